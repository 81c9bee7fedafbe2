//! Counts that read the same in both backends' SQL, written once over sqlx's `QueryBuilder`.

use sqlx::{Database, Encode, QueryBuilder, Type};

/// The count of memories linked to `owner`'s entities (`None`: to any entity), as one `BIGINT`.
pub(crate) fn linked_memory_count<'args, DB>(owner: Option<&str>) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    match owner {
        Some(owner) => {
            let mut builder = QueryBuilder::new(
                "SELECT COUNT(DISTINCT me.memory_id) FROM memory_entities me \
                 JOIN entities e ON e.id = me.entity_id WHERE e.owner_id = ",
            );
            builder.push_bind(owner.to_owned());
            builder
        }
        None => QueryBuilder::new("SELECT COUNT(DISTINCT memory_id) FROM memory_entities"),
    }
}
