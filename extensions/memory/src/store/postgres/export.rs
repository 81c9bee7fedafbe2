//! Lossless export of the memory tables as JSON records, and importing them back: the SQLite
//! store's records (`../sqlite/export.rs`) exactly, so that `mnemo migrate-store` copies a store
//! between the two backends in either direction.
//!
//! A record is `{"type": table, "row": {column: value}}` with SQLite's values: integers as JSON
//! integers, reals as JSON floats, text as strings, blobs as lowercase hex strings, NULL as null;
//! rows in the order the SQLite store gives them (memories as stored, the rest by key). The
//! PostgreSQL-only columns (the generated full text, the storing and link orders, the queue's
//! lease) and the sessions' leases are left out, and an import binds
//! each value with its column's PostgreSQL type, read from the catalog.

use std::collections::HashMap;

use async_trait::async_trait;
use serde_json::{Map, Number, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, QueryBuilder, Row};
use tokio::sync::OnceCell;

use super::PostgresStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::MemoryExport;
use crate::store::sql::{
    export_order, exported_record, exported_table, hex, push_user_rows, WriteScope, EXPORT_TABLES,
};

/// Columns that are not exported or accepted: PostgreSQL's own derived ones (the tsvector, and
/// the storing and link orders, made again in import order), and the lease of the process at
/// work on a session (which SQLite does not export either).
const POSTGRES_ONLY: [(&str, &str); 6] = [
    ("memories", "search_text"),
    ("memories", "seq"),
    ("sessions_consolidations", "leased_by"),
    ("sessions_consolidations", "leased_until"),
    ("memory_entities", "position"),
    ("embedding_queue", "claimed_until"),
];

/// SQLite's storage class of a column, from its PostgreSQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Storage {
    /// BIGINT.
    Integer,
    /// DOUBLE PRECISION.
    Real,
    /// TEXT.
    Text,
    /// BYTEA, exported as lowercase hex.
    Blob,
}

impl Storage {
    fn sql_type(self) -> &'static str {
        match self {
            Self::Integer => "BIGINT",
            Self::Real => "DOUBLE PRECISION",
            Self::Text => "TEXT",
            Self::Blob => "BYTEA",
        }
    }
}

/// An exported column.
#[derive(Debug, Clone)]
struct Column {
    name: String,
    storage: Storage,
}

/// The exported columns of every exported table, in table order.
type Schema = HashMap<&'static str, Vec<Column>>;

/// The exported columns, read from the catalog once per process: every database a process
/// opens is migrated by the same migrations, so their columns are the same.
async fn schema(pool: &PgPool) -> Result<&'static Schema> {
    static SCHEMA: OnceCell<Schema> = OnceCell::const_new();
    SCHEMA.get_or_try_init(|| read_schema(pool)).await
}

async fn read_schema(pool: &PgPool) -> Result<Schema> {
    let tables: Vec<String> = EXPORT_TABLES
        .iter()
        .map(|(table, _)| (*table).to_owned())
        .collect();
    let rows = sqlx::query(
        "SELECT table_name::text AS table_name, column_name::text AS column_name, \
         data_type::text AS data_type FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = ANY($1) \
         ORDER BY table_name, ordinal_position",
    )
    .bind(&tables)
    .fetch_all(pool)
    .await?;
    let mut schema = Schema::new();
    for row in rows {
        let table: String = row.try_get("table_name")?;
        let name: String = row.try_get("column_name")?;
        let data_type: String = row.try_get("data_type")?;
        let Ok(table) = exported_table(&table) else {
            continue;
        };
        if POSTGRES_ONLY.contains(&(table, name.as_str())) {
            continue;
        }
        let storage = match data_type.as_str() {
            "bigint" => Storage::Integer,
            "double precision" => Storage::Real,
            "text" => Storage::Text,
            "bytea" => Storage::Blob,
            other => {
                return Err(MemoryError::Corrupt(format!(
                    "column `{table}.{name}` has type {other}, which the export does not know"
                )))
            }
        };
        schema
            .entry(table)
            .or_default()
            .push(Column { name, storage });
    }
    for (table, _) in EXPORT_TABLES {
        if !schema.contains_key(table) {
            return Err(MemoryError::Corrupt(format!("table `{table}` is missing")));
        }
    }
    Ok(schema)
}

fn column_value(row: &PgRow, index: usize, storage: Storage) -> Result<Value> {
    Ok(match storage {
        Storage::Integer => row.try_get::<Option<i64>, _>(index)?.map(Value::from),
        Storage::Real => row.try_get::<Option<f64>, _>(index)?.map(Value::from),
        Storage::Text => row.try_get::<Option<String>, _>(index)?.map(Value::from),
        Storage::Blob => row
            .try_get::<Option<Vec<u8>>, _>(index)?
            .map(|bytes| Value::from(hex(&bytes))),
    }
    .unwrap_or(Value::Null))
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| {
            text.get(at..at + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect()
}

/// Binds `value` for `column` of `table` with the column's type, converting as SQLite's column
/// affinity does (a whole real into an integer column, a number into a text column).
fn push_value(
    separated: &mut sqlx::query_builder::Separated<'_, Postgres, &'static str>,
    table: &str,
    column: &Column,
    value: &Value,
) -> Result<()> {
    let name = column.name.as_str();
    let mismatch = |what: &str| {
        MemoryError::Invalid(format!(
            "`{table}` record: column `{name}` holds {what}, which does not fit its type {}",
            column.storage.sql_type()
        ))
    };
    match (column.storage, value) {
        // Exports made before sessions were keyed by user and chat (schema 6) hold NULL where the
        // key now holds ''.
        (Storage::Text, Value::Null)
            if table == "sessions_consolidations" && matches!(name, "user_id" | "chat_id") =>
        {
            separated.push_bind(String::new());
        }
        (Storage::Integer, Value::Null) => {
            separated.push_bind(None::<i64>);
        }
        (Storage::Real, Value::Null) => {
            separated.push_bind(None::<f64>);
        }
        (Storage::Text, Value::Null) => {
            separated.push_bind(None::<String>);
        }
        (Storage::Blob, Value::Null) => {
            separated.push_bind(None::<Vec<u8>>);
        }
        (Storage::Integer, Value::Number(number)) => {
            separated.push_bind(whole(number).ok_or_else(|| mismatch(&number.to_string()))?);
        }
        (Storage::Real, Value::Number(number)) => {
            separated.push_bind(
                number
                    .as_f64()
                    .ok_or_else(|| mismatch(&number.to_string()))?,
            );
        }
        (Storage::Text, Value::Number(number)) => {
            separated.push_bind(number.to_string());
        }
        (Storage::Text, Value::String(text)) => {
            separated.push_bind(text.clone());
        }
        (Storage::Blob, Value::String(text)) => {
            separated.push_bind(unhex(text).ok_or_else(|| mismatch("text that is not hex"))?);
        }
        (_, Value::Bool(_) | Value::Array(_) | Value::Object(_)) => {
            return Err(MemoryError::Invalid(format!(
                "`{table}` record: column `{name}` holds {value}, not a plain value"
            )))
        }
        (_, Value::String(_)) => return Err(mismatch("text")),
        (Storage::Blob, Value::Number(number)) => return Err(mismatch(&number.to_string())),
    }
    Ok(())
}

/// A JSON number as an integer, if it is one: SQLite stores a whole real in an integer column
/// as an integer.
fn whole(number: &Number) -> Option<i64> {
    if let Some(integer) = number.as_i64() {
        return Some(integer);
    }
    let real = number.as_f64()?;
    let integer = real as i64;
    (real.fract() == 0.0 && integer as f64 == real).then_some(integer)
}

/// PostgreSQL's error codes for a NULL in a NOT NULL column and a failed CHECK: SQLite's
/// `INSERT OR IGNORE` skips such a row rather than failing.
const IGNORED_VIOLATIONS: [&str; 2] = ["23502", "23514"];

#[async_trait]
impl MemoryExport for PostgresStore {
    async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>> {
        let schema = schema(&self.pool).await?;
        // One snapshot for every table, so that links and events match the memories exported.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let mut records = Vec::new();
        for (table, keys) in EXPORT_TABLES {
            let columns = schema.get(table).map(Vec::as_slice).unwrap_or_default();
            let select = columns
                .iter()
                .map(|column| format!("\"{}\"", column.name))
                .collect::<Vec<_>>()
                .join(", ");
            let mut query = QueryBuilder::<Postgres>::new(format!("SELECT {select} FROM {table}"));
            if let Some(user) = user_id {
                push_user_rows(&mut query, table, user)?;
            }
            query.push(format!(" ORDER BY {}", export_order::<Postgres>(keys)));
            let rows = query.build().fetch_all(&mut *tx).await?;
            for row in &rows {
                let mut object = Map::new();
                for (index, column) in columns.iter().enumerate() {
                    object.insert(
                        column.name.clone(),
                        column_value(row, index, column.storage)?,
                    );
                }
                records.push(serde_json::json!({"type": table, "row": object}));
            }
        }
        tx.commit().await?;
        Ok(records)
    }

    async fn import_row(&self, table: &str, row: &Value) -> Result<bool> {
        let schema = schema(&self.pool).await?;
        let mut tx = self.begin_write(WriteScope::Store).await?;
        let inserted = insert_rows(&mut tx, schema, table, &[row]).await? == 1;
        tx.commit().await?;
        Ok(inserted)
    }

    async fn import_rows(&self, rows: &[(&str, &Value)]) -> Result<u64> {
        let schema = schema(&self.pool).await?;
        let mut tx = self.begin_write(WriteScope::Store).await?;
        let mut inserted = 0;
        let mut start = 0;
        // Runs of one table's rows with the same columns go in one statement each.
        while start < rows.len() {
            let (table, first) = rows[start];
            let mut end = start + 1;
            while end < rows.len()
                && end - start < ROWS_PER_STATEMENT
                && rows[end].0 == table
                && same_columns(rows[end].1, first)
            {
                end += 1;
            }
            let run: Vec<&Value> = rows[start..end].iter().map(|(_, row)| *row).collect();
            inserted += insert_rows(&mut tx, schema, table, &run).await?;
            start = end;
        }
        tx.commit().await?;
        Ok(inserted)
    }
}

/// Rows in one INSERT of an import: well under PostgreSQL's 65,535 parameters at the widest
/// table's columns.
const ROWS_PER_STATEMENT: usize = 500;

fn same_columns(row: &Value, other: &Value) -> bool {
    match (row.as_object(), other.as_object()) {
        (Some(row), Some(other)) => row.len() == other.len() && row.keys().eq(other.keys()),
        _ => false,
    }
}

/// Inserts exported rows of `table` (each with the columns of the first) inside `tx` in one
/// statement, skipping those whose key exists; a run that breaks a constraint the import
/// ignores is inserted row by row, each skipped row alone (see `MemoryExport::import_row`).
/// Returns how many were new; memories come back on the embedding queue.
async fn insert_rows(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    schema: &Schema,
    table: &str,
    rows: &[&Value],
) -> Result<u64> {
    let Some(first) = rows.first() else {
        exported_table(table)?;
        return Ok(0);
    };
    let (table, object) = exported_record(table, first)?;
    let known = schema.get(table).map(Vec::as_slice).unwrap_or_default();
    let mut columns = Vec::with_capacity(object.len());
    for name in object.keys() {
        let column = known
            .iter()
            .find(|column| column.name == *name)
            .ok_or_else(|| {
                MemoryError::Invalid(format!("`{table}` record: unknown column `{name}`"))
            })?;
        columns.push(column);
    }
    let mut builder = QueryBuilder::<Postgres>::new(format!(
        "INSERT INTO {table} ({}) VALUES ",
        columns
            .iter()
            .map(|column| format!("\"{}\"", column.name))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for (index, row) in rows.iter().enumerate() {
        let Some(values) = row.as_object().filter(|_| same_columns(row, first)) else {
            return Err(MemoryError::Invalid(format!(
                "`{table}` record: not an object with the columns of the rows beside it"
            )));
        };
        if index > 0 {
            builder.push(", ");
        }
        builder.push("(");
        let mut separated = builder.separated(", ");
        for column in &columns {
            let value = values.get(&column.name).unwrap_or(&Value::Null);
            push_value(&mut separated, table, column, value)?;
        }
        builder.push(")");
    }
    builder.push(" ON CONFLICT DO NOTHING RETURNING ");
    builder.push(if table == "memories" { "id" } else { "1" });
    // A savepoint: a run the import ignores part of spoils nothing around it.
    let mut savepoint = sqlx::Connection::begin(&mut **tx).await?;
    let returned: Vec<PgRow> = match builder.build().fetch_all(&mut *savepoint).await {
        Ok(returned) => returned,
        Err(sqlx::Error::Database(error))
            if error
                .code()
                .is_some_and(|code| IGNORED_VIOLATIONS.contains(&code.as_ref())) =>
        {
            // Dropping the savepoint rolls back to it; then each row alone.
            drop(savepoint);
            if rows.len() == 1 {
                return Ok(0);
            }
            let mut inserted = 0;
            for row in rows {
                inserted += Box::pin(insert_rows(tx, schema, table, &[*row])).await?;
            }
            return Ok(inserted);
        }
        Err(error) => return Err(error.into()),
    };
    if table == "memories" && !returned.is_empty() {
        let ids: Vec<String> = returned
            .iter()
            .map(|row| row.try_get::<String, _>(0))
            .collect::<std::result::Result<_, _>>()?;
        sqlx::query(
            "INSERT INTO embedding_queue (memory_id, enqueued_at) \
             SELECT id, created_at FROM memories WHERE id = ANY($1) AND valid_until IS NULL \
             ON CONFLICT DO NOTHING",
        )
        .bind(&ids)
        .execute(&mut *savepoint)
        .await?;
    }
    savepoint.commit().await?;
    Ok(returned.len() as u64)
}
