//! The search side of the PostgreSQL store on a real server: full text (`full_text`), vectors
//! (`vectors`) and the indexer's queue (`index_queue`); reading memories through a request's
//! filters is checked on both stores in `store/conformance`. Rows are written with plain SQL,
//! so that these tests stand on the reading side alone.

mod full_text;
mod index_queue;
mod vectors;

use crate::store::postgres::PostgresStore;
use crate::types::SearchRequest;

pub(super) use crate::store::conformance::{insert_row as insert, row, Row};

pub(super) async fn sql(store: &PostgresStore, statement: &str) {
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(store.pool())
        .await
        .unwrap();
}

pub(super) fn ana() -> SearchRequest {
    SearchRequest {
        user_id: Some("ana".into()),
        ..SearchRequest::default()
    }
}

/// The one value `query` selects.
pub(super) async fn count(store: &PostgresStore, query: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(query.to_owned()))
        .fetch_one(store.pool())
        .await
        .unwrap()
}
