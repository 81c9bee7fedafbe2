//! The search side of the PostgreSQL store on a real server: reading memories through a
//! request's filters (`records`), full text (`full_text`), vectors (`vectors`), and the indexer's
//! queue (`index_queue`). Rows are written with plain SQL, so that these tests stand on the
//! reading side alone; the helpers here write them.

mod full_text;
mod index_queue;
mod records;
mod vectors;

use chrono::{DateTime, Utc};

use crate::store::postgres::PostgresStore;
use crate::store::rows::from_ts;
use crate::types::SearchRequest;

/// A memory row; what a test does not set keeps its default.
#[derive(Clone)]
pub(super) struct Row {
    pub(super) id: &'static str,
    pub(super) kind: &'static str,
    pub(super) content: &'static str,
    pub(super) user: Option<&'static str>,
    pub(super) chat: Option<&'static str>,
    pub(super) session: Option<&'static str>,
    pub(super) event_time: i64,
}

pub(super) fn row(id: &'static str, content: &'static str) -> Row {
    Row {
        id,
        kind: "fact",
        content,
        user: Some("ana"),
        chat: None,
        session: None,
        event_time: 1_000,
    }
}

pub(super) async fn insert(store: &PostgresStore, row: &Row) {
    sqlx::query(
        "INSERT INTO memories (id, kind, content, user_id, chat_id, session_id, event_time, \
         created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
    )
    .bind(row.id)
    .bind(row.kind)
    .bind(row.content)
    .bind(row.user)
    .bind(row.chat)
    .bind(row.session)
    .bind(row.event_time)
    .execute(store.pool())
    .await
    .unwrap();
}

pub(super) async fn sql(store: &PostgresStore, statement: &str) {
    sqlx::query(statement).execute(store.pool()).await.unwrap();
}

pub(super) fn at(seconds: i64) -> DateTime<Utc> {
    from_ts(seconds)
}

pub(super) fn ana() -> SearchRequest {
    SearchRequest {
        user_id: Some("ana".into()),
        ..SearchRequest::default()
    }
}

/// The one value `query` selects.
pub(super) async fn count(store: &PostgresStore, query: &str) -> i64 {
    sqlx::query_scalar(query)
        .fetch_one(store.pool())
        .await
        .unwrap()
}
