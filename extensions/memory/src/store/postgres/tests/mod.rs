//! Tests of the PostgreSQL store on a real server (the shared test server of
//! `mnemo-pg-fixture`, a fresh database each), and the helpers they share.

mod batches;
mod ingest_and_entities;
mod lifecycle_and_export;
mod search_side;
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

/// Three instances on one database claim the same runs at once: each run is claimed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_scheduled_run_is_claimed_by_one_instance() {
    use crate::store::backend::JobRecords;
    use chrono::{Duration as Days, TimeZone, Utc};
    let url = mnemo_pg_fixture::fresh_database();
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(std::sync::Arc::new(
            PostgresStore::open(&PostgresOptions {
                url: url.clone(),
                max_connections: 2,
                lock_timeout: Duration::from_secs(10),
                ef_search: 100,
                synchronous_commit: true,
            })
            .await
            .unwrap(),
        ));
    }
    let first = Utc.with_ymd_and_hms(2026, 3, 1, 3, 0, 0).unwrap();
    let mut tasks = Vec::new();
    for day in 0..20 {
        for instance in &instances {
            let instance = std::sync::Arc::clone(instance);
            tasks.push(tokio::spawn(async move {
                let due = first + Days::days(day);
                instance
                    .claim_job_run("execute_decay", due, Utc::now())
                    .await
                    .unwrap()
            }));
        }
    }
    let mut claimed = 0;
    for task in tasks {
        claimed += usize::from(task.await.unwrap());
    }
    assert_eq!(claimed, 20);
    // Another job's run at the same time is its own.
    assert!(instances[0]
        .claim_job_run("expire_memories", first, Utc::now())
        .await
        .unwrap());
}

/// Two instances lease one session's consolidation: one at a time, until it runs out or is
/// released.
#[tokio::test]
async fn one_instance_at_a_time_leases_a_sessions_consolidation() {
    use crate::store::backend::SessionLeases;
    use crate::types::SessionKey;
    use chrono::{Duration as Span, TimeZone, Utc};
    let first = open_fresh().await;
    let session = SessionKey {
        user_id: "ana".into(),
        chat_id: Some("team".into()),
        session_id: "s1".into(),
    };
    let now = Utc.with_ymd_and_hms(2026, 3, 1, 3, 0, 0).unwrap();
    assert!(first.lease_session(&session, "a", now, now).await.unwrap());
    sqlx::query(
        "INSERT INTO sessions_consolidations (user_id, chat_id, session_id, first_seen_at) \
         VALUES ('ana', 'team', 's1', 0)",
    )
    .execute(first.pool())
    .await
    .unwrap();
    let until = now + Span::minutes(15);
    assert!(first
        .lease_session(&session, "a", until, now)
        .await
        .unwrap());
    assert!(!first
        .lease_session(&session, "b", until, now)
        .await
        .unwrap());
    let later = until + Span::seconds(1);
    assert!(first
        .lease_session(&session, "b", later + Span::minutes(15), later)
        .await
        .unwrap());
    first.release_session(&session, "a").await.unwrap();
    assert!(!first
        .lease_session(&session, "a", later, later)
        .await
        .unwrap());
    first.release_session(&session, "b").await.unwrap();
    assert!(first
        .lease_session(&session, "a", later, later)
        .await
        .unwrap());
}
