//! Tests of the PostgreSQL store on a real server (the shared test server of
//! `mnemo-pg-fixture`, a fresh database each), and the helpers they share.

mod ingest_and_entities;
mod lifecycle_and_export;
mod search_side;

use std::time::Duration;

use super::PostgresStore;
use crate::store::PostgresOptions;

/// A store on a new, empty database of the shared test server.
pub(super) async fn open_fresh() -> PostgresStore {
    open_at(&mnemo_pg_fixture::fresh_database()).await
}

/// A store on the database at `url`, as the tests open it.
pub(crate) async fn open_at(url: &str) -> PostgresStore {
    PostgresStore::open(&PostgresOptions {
        url: url.to_owned(),
        max_connections: 4,
        lock_timeout: Duration::from_secs(10),
        ef_search: 100,
        synchronous_commit: true,
    })
    .await
    .expect("the store opens on a fresh database")
}

#[tokio::test]
async fn a_fresh_database_is_migrated_with_pgvector() {
    let store = open_fresh().await;
    let version: String =
        sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(version, "0.6.2");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_name NOT LIKE '\\_sqlx%' ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "api_keys",
            "chat_members",
            "embedding_cache",
            "embedding_queue",
            "entities",
            "forget_receipts",
            "ingested_events",
            "job_history",
            "job_runs",
            "mcp_sessions",
            "memories",
            "memory_entities",
            "memory_metadata",
            "memory_sentence_vectors",
            "memory_vectors",
            "sessions_consolidations",
            "store_settings"
        ]
    );
}
