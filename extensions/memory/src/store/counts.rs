//! Counts that read the same in both backends' SQL, written once over sqlx's `QueryBuilder`.

use sqlx::QueryBuilder;

use crate::store::sql::{Bind, Driver};

/// The count of memories linked to `owner`'s entities (`None`: to any entity), as one `BIGINT`
/// named `n`.
pub(crate) fn linked_memory_count<D: Driver>(owner: Option<&str>) -> QueryBuilder<D> {
    match owner {
        Some(owner) => {
            let mut builder = QueryBuilder::new(
                "SELECT COUNT(DISTINCT me.memory_id) AS n FROM memory_entities me \
                 JOIN entities e ON e.id = me.entity_id WHERE e.owner_id = ",
            );
            builder.text(owner);
            builder
        }
        None => QueryBuilder::new("SELECT COUNT(DISTINCT memory_id) AS n FROM memory_entities"),
    }
}
