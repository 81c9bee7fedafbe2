//! The indexer's queue: leases across callers, storing vectors, dropping one, and the
//! embedding cache.

use chrono::Utc;

use super::super::open_fresh;
use super::{count, sql};
use crate::store::backend::{IndexQueue, IndexReads, VectorIndex};
use crate::store::postgres::index_queue::LEASE_SECONDS;
use crate::store::postgres::vectors::drop_vectors;
use crate::store::postgres::PostgresStore;
use crate::store::rows::ts;
use crate::store::IndexItem;

/// `count` memories of ana queued for a vector, enqueued in order.
async fn queue(store: &PostgresStore, count: i64) {
    sql(
        store,
        &format!(
            "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
             SELECT 'q' || lpad(n::text, 4, '0'), 'fact', 'text ' || n, 'ana', n, n \
             FROM generate_series(1, {count}) n"
        ),
    )
    .await;
    sql(
        store,
        &format!(
            "INSERT INTO embedding_queue (memory_id, enqueued_at) \
             SELECT 'q' || lpad(n::text, 4, '0'), n FROM generate_series(1, {count}) n"
        ),
    )
    .await;
}

fn item_ids(items: &[IndexItem]) -> Vec<String> {
    items.iter().map(|item| item.memory_id.clone()).collect()
}

#[tokio::test]
async fn a_batch_is_leased_to_one_caller_until_its_lease_runs_out() {
    let store = open_fresh().await;
    queue(&store, 10).await;
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'q0002'",
    )
    .await;
    let (first, second) = tokio::join!(store.next_index_batch(4), store.next_index_batch(4));
    let (first, second) = (item_ids(&first.unwrap()), item_ids(&second.unwrap()));
    assert_eq!(first.len(), 4);
    assert_eq!(second.len(), 4);
    let mut both: Vec<String> = first.iter().chain(&second).cloned().collect();
    both.sort();
    both.dedup();
    assert_eq!(both.len(), 8, "disjoint: {first:?} {second:?}");
    assert_eq!(both[0], "q0003", "newest first");
    assert_eq!(both[7], "q0010");
    let rest = store.next_index_batch(10).await.unwrap();
    assert_eq!(item_ids(&rest), ["q0002", "q0001"]);
    assert!(store.next_index_batch(10).await.unwrap().is_empty());
    assert_eq!(
        store.pending_index().await.unwrap(),
        10,
        "leased, still queued"
    );
    let lease: i64 = count(&store, "SELECT MIN(claimed_until) FROM embedding_queue").await;
    let now = ts(Utc::now());
    assert!(
        (now + LEASE_SECONDS - 10..=now + LEASE_SECONDS + 10).contains(&lease),
        "{lease} vs {now}"
    );

    // A dead instance's lease runs out: its rows are taken again, newest first.
    sql(
        &store,
        "UPDATE embedding_queue SET claimed_until = 5 WHERE memory_id IN ('q0002', 'q0003')",
    )
    .await;
    let again = store.next_index_batch(10).await.unwrap();
    assert_eq!(item_ids(&again), ["q0003", "q0002"]);
    assert!(!again[1].active, "soft-deleted before it was indexed");
    assert!(again[0].active);
    assert_eq!(again[0].content, "text 3");
    assert_eq!(
        (again[0].user_id.as_str(), again[0].kind.as_str()),
        ("ana", "fact")
    );
    let later = store
        .lease_index_batch(3, now + LEASE_SECONDS + 60)
        .await
        .unwrap();
    // Past every lease, the newest rows again.
    assert_eq!(item_ids(&later), ["q0010", "q0009", "q0008"]);

    // An operator's re-index takes over every batch at once.
    assert_eq!(store.release_index_leases().await.unwrap(), 10);
    assert_eq!(store.next_index_batch(20).await.unwrap().len(), 10);
}

#[tokio::test]
async fn instances_taking_batches_at_once_embed_each_memory_once() {
    let store = std::sync::Arc::new(open_fresh().await);
    queue(&store, 200).await;
    let workers = (0..6).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut taken = Vec::new();
            loop {
                let batch = store.next_index_batch(7).await.unwrap();
                if batch.is_empty() {
                    return taken;
                }
                taken.extend(item_ids(&batch));
            }
        })
    });
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await.unwrap());
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!((total, all.len()), (200, 200));
}

#[tokio::test]
async fn stored_vectors_replace_old_ones_and_leave_the_queue() {
    let store = open_fresh().await;
    store.ensure_vector_index(3, "tiny").await.unwrap();
    queue(&store, 5).await;
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'q0004'",
    )
    .await;
    let mut batch = store.next_index_batch(10).await.unwrap();
    batch.sort_by(|a, b| a.memory_id.cmp(&b.memory_id));
    let vector = |x: f32| Some(vec![x, 1.0, 0.0]);
    let items: Vec<(IndexItem, Option<Vec<f32>>)> = batch
        .into_iter()
        .map(|item| {
            let vector = match item.memory_id.as_str() {
                "q0001" | "q0004" => vector(1.0),
                "q0002" => None,
                _ => vector(0.5),
            };
            (item, vector)
        })
        .collect();
    let mut twice = items.clone();
    twice.push((items[0].0.clone(), vector(2.0)));
    store.store_vectors(&twice).await.unwrap();
    assert_eq!(store.pending_index().await.unwrap(), 0);
    let stored: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT memory_id, embedding::text, user_id, kind FROM memory_vectors ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let stored: Vec<(&str, &str)> = stored
        .iter()
        .map(|(id, embedding, user, kind)| {
            assert_eq!((user.as_str(), kind.as_str()), ("ana", "fact"));
            (id.as_str(), embedding.as_str())
        })
        .collect();
    // No vector for the item without one, nor for the memory soft-deleted meanwhile; the last
    // vector given for a memory wins.
    assert_eq!(
        stored,
        [
            ("q0001", "[2,1,0]"),
            ("q0003", "[0.5,1,0]"),
            ("q0005", "[0.5,1,0]")
        ]
    );
    // Stored again: replaced, not duplicated.
    store
        .store_vectors(&[(items[2].0.clone(), vector(-1.0))])
        .await
        .unwrap();
    let replaced: String =
        sqlx::query_scalar("SELECT embedding::text FROM memory_vectors WHERE memory_id = 'q0003'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(replaced, "[-1,1,0]");
    assert_eq!(store.mirror_size().await.unwrap().memory_rows, 3);
    store.store_vectors(&[]).await.unwrap();

    // Dropping a memory's vector takes it off the queue too.
    sql(
        &store,
        "INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES ('q0003', 9)",
    )
    .await;
    let mut tx = store.pool().begin().await.unwrap();
    drop_vectors(&mut tx, &["q0003".to_owned()]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.mirror_size().await.unwrap().memory_rows, 2);
    assert_eq!(store.pending_index().await.unwrap(), 0);
}
