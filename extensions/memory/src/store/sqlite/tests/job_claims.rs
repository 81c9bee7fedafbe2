//! Scheduled runs claimed by one of several processes' stores on one SQLite file.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};

use crate::store::backend::JobRecords;

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
