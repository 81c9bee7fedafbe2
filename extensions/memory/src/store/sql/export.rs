//! What the export reads the same in both backends: the tables it holds in their order, which
//! rows of each table belong to one user, and blobs as hex. The rest of the export stays with
//! each backend (`store/*/export.rs`): SQLite reads its values by storage class, PostgreSQL
//! reads its catalog to give SQLite's values and to bind each value with its column's type on
//! import.

use serde_json::{Map, Value};
use sqlx::QueryBuilder;

use super::{Bind, Dialect, Driver};
use crate::error::{MemoryError, Result};

/// Tables a full export holds, with the key columns that order their rows: memories in the
/// order they were stored (none here: [`Dialect::STORED_ORDER`]), so that an import stores them
/// in that order again (search keeps the last stored matches of very common words), the other
/// tables by key, text compared byte by byte as SQLite compares it.
pub(crate) const EXPORT_TABLES: [(&str, &[&str]); 6] = [
    ("memories", &[]),
    ("entities", &["id"]),
    ("memory_entities", &["memory_id", "entity_id"]),
    (
        "sessions_consolidations",
        &["user_id", "chat_id", "session_id"],
    ),
    ("ingested_events", &["user_id", "event_id"]),
    ("forget_receipts", &["id"]),
];

/// The `ORDER BY` list of an exported table's `keys` (see [`EXPORT_TABLES`]).
pub(crate) fn export_order<D: Dialect>(keys: &[&str]) -> String {
    if keys.is_empty() {
        return D::STORED_ORDER.to_owned();
    }
    let keys: Vec<String> = keys.iter().map(|key| D::byte_order(key)).collect();
    keys.join(", ")
}

/// Whether `table` is one the export holds.
///
/// # Errors
/// It is not: an unknown record type.
pub(crate) fn exported_table(table: &str) -> Result<&'static str> {
    EXPORT_TABLES
        .iter()
        .find(|(known, _)| *known == table)
        .map(|(known, _)| *known)
        .ok_or_else(|| MemoryError::Invalid(format!("unknown record type `{table}`")))
}

/// An exported record of `table` to import: the table as the export names it, and the row's
/// columns.
///
/// # Errors
/// An unknown record type, or a row that is not an object with columns.
pub(crate) fn exported_record<'r>(
    table: &str,
    row: &'r Value,
) -> Result<(&'static str, &'r Map<String, Value>)> {
    let table = exported_table(table)?;
    let Some(object) = row.as_object() else {
        return Err(MemoryError::Invalid(format!(
            "`{table}` record: `row` must be an object"
        )));
    };
    if object.is_empty() {
        return Err(MemoryError::Invalid(format!(
            "`{table}` record: bad column names"
        )));
    }
    Ok((table, object))
}

/// Bytes as lowercase hex, as the export writes blobs.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Appends the condition (` WHERE …`) that keeps `user`'s rows of the exported `table`.
///
/// # Errors
/// `table` has no such condition: a table added to the export without one must not export
/// everyone's rows under one user's name.
pub(crate) fn push_user_rows<D: Driver>(
    builder: &mut QueryBuilder<D>,
    table: &str,
    user: &str,
) -> Result<()> {
    match table {
        "memories" | "sessions_consolidations" | "forget_receipts" => {
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
