//! What the shared SQL needs of a database driver: binding a value, reading a column, running a
//! query. Binding and reading are written once, for any sqlx database whose driver binds and
//! reads the types mnemo stores (texts, integers, reals, booleans, bytes); sqlx's trait bounds
//! are stated here, once, on that blanket implementation, and code generic over a
//! [`super::Dialect`] needs none of them. Only running a query is instantiated per database
//! ([`Run`]).

use async_trait::async_trait;
use sqlx::{ColumnIndex, Decode, Encode, QueryBuilder, Row, Type};

use crate::error::Result;
use mnemo_kernel::host::JobRun;

use crate::store::rows::{
    entity_summary_from_row, job_run_from_row, memory_from_row, owner_summary_from_row,
};
use crate::store::{EntitySummary, OwnerSummary};
use crate::types::Memory;

/// Binding and reading values on one database.
pub(crate) trait Driver: Run + Sized {
    /// Binds a text.
    fn bind_text(builder: &mut QueryBuilder<Self>, value: String);
    /// Binds a text or NULL.
    fn bind_opt_text(builder: &mut QueryBuilder<Self>, value: Option<String>);
    /// Binds an integer.
    fn bind_int(builder: &mut QueryBuilder<Self>, value: i64);
    /// Binds an integer or NULL.
    fn bind_opt_int(builder: &mut QueryBuilder<Self>, value: Option<i64>);
    /// Binds a real number.
    fn bind_float(builder: &mut QueryBuilder<Self>, value: f64);
    /// Binds bytes.
    fn bind_bytes(builder: &mut QueryBuilder<Self>, value: Vec<u8>);

    /// A text column of `row`.
    fn text(row: &Self::Row, column: &str) -> Result<String>;
    /// A text column of `row` that may be NULL.
    fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>>;
    /// An integer column of `row`.
    fn int(row: &Self::Row, column: &str) -> Result<i64>;
    /// An integer column of `row` that may be NULL.
    fn opt_int(row: &Self::Row, column: &str) -> Result<Option<i64>>;
    /// A real column of `row`.
    fn float(row: &Self::Row, column: &str) -> Result<f64>;
    /// A boolean column of `row` (SQLite's 0 or 1).
    fn flag(row: &Self::Row, column: &str) -> Result<bool>;
    /// A column of bytes of `row`.
    fn bytes(row: &Self::Row, column: &str) -> Result<Vec<u8>>;
    /// A memory from a row holding [`crate::store::rows::MEMORY_COLUMNS`].
    fn memory(row: &Self::Row) -> Result<Memory>;
    /// A job run from a row holding [`crate::store::rows::JOB_RUN_COLUMNS`].
    fn job_run(row: &Self::Row) -> Result<JobRun>;
    /// An owner's summary from a row holding `user_id` and `memories`.
    fn owner_summary(row: &Self::Row) -> Result<OwnerSummary>;
    /// An entity's summary from a row holding [`crate::store::rows::ENTITY_SUMMARY_COLUMNS`].
    fn entity_summary(row: &Self::Row) -> Result<EntitySummary>;
}

impl<DB> Driver for DB
where
    DB: Run,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB>,
    for<'q> f64: Encode<'q, DB>,
    for<'q> Vec<u8>: Encode<'q, DB>,
    for<'r> String: Decode<'r, DB>,
    for<'r> Option<String>: Decode<'r, DB>,
    for<'r> i64: Decode<'r, DB>,
    for<'r> Option<i64>: Decode<'r, DB>,
    for<'r> f64: Decode<'r, DB> + Type<DB>,
    for<'r> bool: Decode<'r, DB> + Type<DB>,
    for<'r> Vec<u8>: Decode<'r, DB> + Type<DB>,
    for<'c> &'c str: ColumnIndex<DB::Row>,
{
    fn bind_text(builder: &mut QueryBuilder<Self>, value: String) {
        builder.push_bind(value);
    }

    fn bind_opt_text(builder: &mut QueryBuilder<Self>, value: Option<String>) {
        builder.push_bind(value);
    }

    fn bind_int(builder: &mut QueryBuilder<Self>, value: i64) {
        builder.push_bind(value);
    }

    fn bind_opt_int(builder: &mut QueryBuilder<Self>, value: Option<i64>) {
        builder.push_bind(value);
    }

    fn bind_float(builder: &mut QueryBuilder<Self>, value: f64) {
        builder.push_bind(value);
    }

    fn bind_bytes(builder: &mut QueryBuilder<Self>, value: Vec<u8>) {
        builder.push_bind(value);
    }

    fn text(row: &DB::Row, column: &str) -> Result<String> {
        Ok(row.try_get(column)?)
    }

    fn opt_text(row: &DB::Row, column: &str) -> Result<Option<String>> {
        Ok(row.try_get(column)?)
    }

    fn int(row: &DB::Row, column: &str) -> Result<i64> {
        Ok(row.try_get(column)?)
    }

    fn opt_int(row: &DB::Row, column: &str) -> Result<Option<i64>> {
        Ok(row.try_get(column)?)
    }

    fn float(row: &DB::Row, column: &str) -> Result<f64> {
        Ok(row.try_get(column)?)
    }

    fn flag(row: &DB::Row, column: &str) -> Result<bool> {
        Ok(row.try_get(column)?)
    }

    fn bytes(row: &DB::Row, column: &str) -> Result<Vec<u8>> {
        Ok(row.try_get(column)?)
    }

    fn memory(row: &DB::Row) -> Result<Memory> {
        memory_from_row(row)
    }

    fn job_run(row: &DB::Row) -> Result<JobRun> {
        job_run_from_row(row)
    }

    fn owner_summary(row: &DB::Row) -> Result<OwnerSummary> {
        owner_summary_from_row(row)
    }

    fn entity_summary(row: &DB::Row) -> Result<EntitySummary> {
        entity_summary_from_row(row)
    }
}

/// Running a query built in place: the same two bodies, instantiated below for each database,
/// since a statement's count of changed rows is each driver's own method (`rows_affected`),
/// not one of sqlx's traits.
#[async_trait]
pub(crate) trait Run: sqlx::Database {
    /// Runs a statement; the rows it changed.
    async fn execute(connection: &mut Self::Connection, query: QueryBuilder<Self>) -> Result<u64>;
    /// Runs a query; its rows.
    async fn rows(
        connection: &mut Self::Connection,
        query: QueryBuilder<Self>,
    ) -> Result<Vec<Self::Row>>;
}

macro_rules! run_with_own_types {
    ($($database:ty),*) => {$(
        #[async_trait]
        impl Run for $database {
            async fn execute(
                connection: &mut Self::Connection,
                mut query: QueryBuilder<Self>,
            ) -> Result<u64> {
                Ok(query.build().execute(connection).await?.rows_affected())
            }

            async fn rows(
                connection: &mut Self::Connection,
                mut query: QueryBuilder<Self>,
            ) -> Result<Vec<Self::Row>> {
                Ok(query.build().fetch_all(connection).await?)
            }
        }
    )*};
}

run_with_own_types!(sqlx::Sqlite);
#[cfg(feature = "postgres")]
run_with_own_types!(sqlx::Postgres);
