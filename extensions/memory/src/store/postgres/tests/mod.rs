//! Tests of the PostgreSQL store on a real server (the shared test server of
//! `mnemo-pg-fixture`, a fresh database each), and the helpers they share.

mod ingest_and_entities;
mod lifecycle_and_export;
mod sessions_and_people;

use std::time::Duration;

use super::{PostgresOptions, PostgresStore};

/// A store on a new, empty database of the shared test server.
pub(super) async fn open_fresh() -> PostgresStore {
    let url = mnemo_pg_fixture::fresh_database();
    PostgresStore::open(&PostgresOptions {
        url,
        max_connections: 4,
        lock_timeout: Duration::from_secs(10),
        ef_search: 100,
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
            "embedding_cache",
            "embedding_queue",
            "entities",
            "ingested_events",
            "memories",
            "memory_entities",
            "memory_metadata",
            "memory_vectors",
            "sessions_consolidations"
        ]
    );
}
