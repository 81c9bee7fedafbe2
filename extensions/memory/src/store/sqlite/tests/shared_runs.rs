//! What several processes' stores on one SQLite file must not both do: run a scheduled run, and
//! consolidate a session.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};

use crate::store::backend::{JobRecords, SessionLeases};
use crate::types::SessionKey;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_scheduled_run_is_claimed_once_across_stores_on_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let stores = [
        Arc::new(super::open(&path).await),
        Arc::new(super::open(&path).await),
    ];
    let first = Utc.with_ymd_and_hms(2026, 3, 1, 3, 0, 0).unwrap();
    let mut tasks = Vec::new();
    for day in 0..10 {
        for store in &stores {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                store
                    .claim_job_run("execute_decay", first + Duration::days(day), Utc::now())
                    .await
                    .unwrap()
            }));
        }
    }
    let mut claimed = 0;
    for task in tasks {
        claimed += usize::from(task.await.unwrap());
    }
    assert_eq!(claimed, 10);
    // Claims a month older than the run being claimed are dropped.
    let later = first + Duration::days(40);
    assert!(stores[0]
        .claim_job_run("execute_decay", later, Utc::now())
        .await
        .unwrap());
    let kept: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_runs")
        .fetch_one(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(kept, 1);
}

#[tokio::test]
async fn one_store_at_a_time_leases_a_sessions_consolidation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let (first, second) = (super::open(&path).await, super::open(&path).await);
    let session = SessionKey {
        user_id: "ana".into(),
        chat_id: None,
        session_id: "s1".into(),
    };
    let now = Utc.with_ymd_and_hms(2026, 3, 1, 3, 0, 0).unwrap();
    // No consolidation record: nothing to share.
    assert!(first.lease_session(&session, "a", now, now).await.unwrap());
    sqlx::query(
        "INSERT INTO sessions_consolidations (user_id, chat_id, session_id, first_seen_at) \
         VALUES ('ana', '', 's1', 0)",
    )
    .execute(first.pool())
    .await
    .unwrap();
    let until = now + Duration::minutes(15);
    assert!(first
        .lease_session(&session, "a", until, now)
        .await
        .unwrap());
    assert!(!second
        .lease_session(&session, "b", until, now)
        .await
        .unwrap());
    // The holder may renew it; another may take it once it ran out, or once it is released.
    assert!(first
        .lease_session(&session, "a", until, now)
        .await
        .unwrap());
    let later = until + Duration::seconds(1);
    assert!(second
        .lease_session(&session, "b", later + Duration::minutes(15), later)
        .await
        .unwrap());
    first.release_session(&session, "a").await.unwrap();
    assert!(!first
        .lease_session(&session, "a", later, later)
        .await
        .unwrap());
    second.release_session(&session, "b").await.unwrap();
    assert!(first
        .lease_session(&session, "a", later, later)
        .await
        .unwrap());
}
