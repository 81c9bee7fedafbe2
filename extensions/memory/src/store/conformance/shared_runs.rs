//! What stores sharing one database (servers on one PostgreSQL database, processes on one
//! SQLite file) must not both do: run a scheduled run, and consolidate a session.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};

use super::{count, execute, FreshDatabase};
use crate::store::backend::{JobRecords, SessionLeases};
use crate::types::SessionKey;

/// Three stores claim the same runs at once: each run is claimed once; another job's run at the
/// same time is its own, and claims a month older than the run being claimed are dropped.
pub(super) async fn each_scheduled_run_is_claimed_once<D: FreshDatabase>(database: &D) {
    let mut stores = Vec::new();
    for _ in 0..3 {
        stores.push(Arc::new(database.open().await));
    }
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
    assert!(stores[1]
        .claim_job_run("expire_memories", first, Utc::now())
        .await
        .unwrap());
    let later = first + Duration::days(40);
    assert!(stores[0]
        .claim_job_run("execute_decay", later, Utc::now())
        .await
        .unwrap());
    assert_eq!(
        count(&*stores[2], "SELECT COUNT(*) AS n FROM job_runs").await,
        1
    );
}

/// Two stores lease one session's consolidation: one at a time, until it runs out or is
/// released; without a consolidation record there is nothing to share.
pub(super) async fn one_store_at_a_time_leases_a_sessions_consolidation<D: FreshDatabase>(
    database: &D,
) {
    let (first, second) = (database.open().await, database.open().await);
    let session = SessionKey {
        user_id: "ana".into(),
        chat_id: Some("team".into()),
        session_id: "s1".into(),
    };
    let now = Utc.with_ymd_and_hms(2026, 3, 1, 3, 0, 0).unwrap();
    assert!(first.lease_session(&session, "a", now, now).await.unwrap());
    assert!(second.lease_session(&session, "b", now, now).await.unwrap());
    execute(
        &first,
        "INSERT INTO sessions_consolidations (user_id, chat_id, session_id, first_seen_at) \
         VALUES ('ana', 'team', 's1', 0)",
        None,
    )
    .await;
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
