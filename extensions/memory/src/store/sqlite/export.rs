//! Lossless export of the memory tables as JSON records, and importing them back.

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};

use super::MemoryStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::MemoryExport;
use crate::store::sql::{export_order, exported_record, hex, push_user_rows, EXPORT_TABLES};

/// Columns that say which process works on a row right now: not the store's content, and not
/// exported (a copy starts with no process at work on it).
pub(crate) const LEASE_COLUMNS: [&str; 2] = ["leased_by", "leased_until"];

/// Columns the store computes from the others (`memories.fts_scope`, the full-text index's scope
/// tokens, and `memories.fts_rowid`, the memory's row in that index): not exported, since an
/// import computes them again.
const GENERATED_COLUMNS: [&str; 2] = ["fts_scope", "fts_rowid"];

pub(super) fn column_value(row: &SqliteRow, index: usize) -> Result<Value> {
    use sqlx::{TypeInfo, ValueRef};
    let raw = row.try_get_raw(index)?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let kind = raw.type_info().name().to_owned();
    Ok(match kind.as_str() {
        "INTEGER" => Value::from(row.try_get::<i64, _>(index)?),
        "REAL" => Value::from(row.try_get::<f64, _>(index)?),
        "BLOB" => Value::from(hex(&row.try_get::<Vec<u8>, _>(index)?)),
        _ => Value::from(row.try_get::<String, _>(index)?),
    })
}

#[async_trait]
impl MemoryExport for MemoryStore {
    async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>> {
        use sqlx::Column;
        let mut records = Vec::new();
        for (table, keys) in EXPORT_TABLES {
            let mut query = QueryBuilder::<Sqlite>::new(format!("SELECT * FROM {table}"));
            if let Some(user) = user_id {
                push_user_rows(&mut query, table, user)?;
            }
            query.push(format!(" ORDER BY {}", export_order::<Sqlite>(keys)));
            let rows = query.build().fetch_all(&self.pool).await?;
            for row in &rows {
                let mut object = Map::new();
                for (index, column) in row.columns().iter().enumerate() {
                    if LEASE_COLUMNS.contains(&column.name())
                        || GENERATED_COLUMNS.contains(&column.name())
                    {
                        continue;
                    }
                    object.insert(column.name().to_owned(), column_value(row, index)?);
                }
                records.push(serde_json::json!({"type": table, "row": object}));
            }
        }
        Ok(records)
    }

    async fn import_row(&self, table: &str, row: &Value) -> Result<bool> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let inserted = import_in_tx(&mut tx, table, row).await?;
        tx.commit().await?;
        Ok(inserted)
    }

    async fn import_rows(&self, rows: &[(&str, &Value)]) -> Result<u64> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let mut inserted = 0;
        for (table, row) in rows {
            inserted += u64::from(import_in_tx(&mut tx, table, row).await?);
        }
        tx.commit().await?;
        Ok(inserted)
    }
}

/// Inserts one exported row inside `tx` unless a row with its key exists (see
/// `MemoryExport::import_row`); returns whether it was new.
async fn import_in_tx(tx: &mut Transaction<'_, Sqlite>, table: &str, row: &Value) -> Result<bool> {
    let (table, object) = exported_record(table, row)?;
    let columns: Vec<&String> = object.keys().collect();
    if columns
        .iter()
        .any(|name| !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        return Err(MemoryError::Invalid(format!(
            "`{table}` record: bad column names"
        )));
    }
    let mut builder = QueryBuilder::new(format!(
        "INSERT OR IGNORE INTO {table} ({}) VALUES (",
        columns
            .iter()
            .map(|name| name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut separated = builder.separated(", ");
    for name in &columns {
        match &object[name.as_str()] {
            // Exports made before sessions were keyed by user and chat (schema 6) hold NULL
            // where the key now holds ''.
            Value::Null
                if table == "sessions_consolidations"
                    && matches!(name.as_str(), "user_id" | "chat_id") =>
            {
                separated.push_bind(String::new());
            }
            Value::Null => {
                separated.push_bind(None::<String>);
            }
            Value::Number(number) if number.is_i64() => {
                separated.push_bind(number.as_i64());
            }
            Value::Number(number) => {
                separated.push_bind(number.as_f64());
            }
            Value::String(text) => {
                separated.push_bind(text.clone());
            }
            other => {
                return Err(MemoryError::Invalid(format!(
                    "`{table}` record: column `{name}` holds {other}, not a plain value"
                )))
            }
        }
    }
    builder.push(")");
    let inserted = builder.build().execute(&mut **tx).await?.rows_affected() == 1;
    if inserted && table == "memories" {
        sqlx::query(
            "INSERT OR IGNORE INTO embedding_queue (memory_id, enqueued_at) \
             SELECT id, created_at FROM memories WHERE id = ? AND valid_until IS NULL",
        )
        .bind(object.get("id").and_then(Value::as_str))
        .execute(&mut **tx)
        .await?;
    }
    Ok(inserted)
}
