//! What the export reads the same in both backends: which rows of each table belong to one
//! user. The rest of the export stays with each backend (`store/*/export.rs`): SQLite reads its
//! values by storage class, PostgreSQL reads its catalog to give SQLite's values and to bind each
//! value with its column's type on import.

use sqlx::QueryBuilder;

use super::{Bind, Driver};
use crate::error::{MemoryError, Result};

/// Appends the condition (` WHERE …`) that keeps `user`'s rows of the exported `table`.
///
/// # Errors
/// `table` has no such condition: a table added to the export without one must not export
/// everyone's rows under one user's name.
pub(crate) fn push_user_rows<D: Driver>(
    builder: &mut QueryBuilder<'_, D>,
    table: &str,
    user: &str,
) -> Result<()> {
    match table {
        "memories" | "sessions_consolidations" => {
            builder.push(" WHERE user_id = ").text(user);
        }
        "entities" => {
            builder.push(" WHERE owner_id = ").text(user);
        }
        "memory_entities" => {
            builder
                .push(" WHERE memory_id IN (SELECT id FROM memories WHERE user_id = ")
                .text(user)
                .push(")");
        }
        "ingested_events" => {
            builder
                .push(" WHERE user_id = ")
                .text(user)
                .push(
                    " OR (user_id = '' AND memory_id IN (SELECT id FROM memories WHERE user_id = ",
                )
                .text(user)
                .push("))");
        }
        other => {
            return Err(MemoryError::Invalid(format!(
                "the export of one user has no filter for table `{other}`"
            )))
        }
    }
    Ok(())
}
