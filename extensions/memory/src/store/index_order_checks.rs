//! What both stores must do with the indexer's queue order (store/index_order.rs), checked
//! through the storage traits alone; `sqlite/tests` and `postgres/tests` run it on a real
//! SQLite file and a real PostgreSQL database.

use chrono::Duration;

use crate::store::{sentence_key_checks, IndexItem, MemoryBackend, NewMemory};

/// A turn of `user`'s, `second` seconds into 2026.
fn turn(user: &str, second: i64) -> NewMemory {
    let mut turn = sentence_key_checks::turn(
        user,
        "user",
        &format!("{user} said something at second {second}"),
    );
    turn.created_at += Duration::seconds(second);
    turn.event_time = turn.created_at;
    turn
}

/// Takes a batch and stores it without vectors, so that it leaves the queue; returns its ids.
async fn take(store: &dyn MemoryBackend, limit: usize) -> Vec<String> {
    let batch = store.next_index_batch(limit).await.unwrap();
    let items: Vec<(IndexItem, Option<Vec<f32>>)> =
        batch.iter().map(|item| (item.clone(), None)).collect();
    store.store_vectors(&items).await.unwrap();
    batch.into_iter().map(|item| item.memory_id).collect()
}

/// Ana imports 40 turns; then Ben says one thing, and later Cy: each one's turn is in the next
/// batch the indexer takes, beside Ana's newest. Call on a fresh store.
pub(crate) async fn owners_take_turns_newest_first(store: &dyn MemoryBackend) {
    let mut ana = Vec::new();
    for second in 0..40 {
        // Two turns a second: the order within a second is the order they were queued.
        ana.push(
            store
                .insert_memory(&turn("ana", second / 2), &[])
                .await
                .unwrap(),
        );
    }
    // Ben's turn is older than most of Ana's import: it still waits for no one.
    let ben = store.insert_memory(&turn("ben", 3), &[]).await.unwrap();
    let first = take(store, 8).await;
    let newest_of_ana: Vec<String> = ana.iter().rev().take(7).cloned().collect();
    assert_eq!(first.len(), 8, "{first:?}");
    assert!(
        first.contains(&ben),
        "Ben's turn waits behind Ana's import: {first:?}"
    );
    let mut of_ana: Vec<String> = first.iter().filter(|id| **id != ben).cloned().collect();
    assert_eq!(of_ana, newest_of_ana, "Ana's newest first");

    let cy = store.insert_memory(&turn("cy", 1), &[]).await.unwrap();
    let second = take(store, 4).await;
    assert!(second.contains(&cy), "{second:?}");
    assert_eq!(second.len(), 4);
    of_ana.extend(second.into_iter().filter(|id| *id != cy));

    // Ana alone now: the rest of her turns, newest first, each once.
    loop {
        let batch = take(store, 16).await;
        if batch.is_empty() {
            break;
        }
        of_ana.extend(batch);
    }
    let all_of_ana: Vec<String> = ana.iter().rev().cloned().collect();
    assert_eq!(of_ana, all_of_ana);
    assert_eq!(store.pending_index().await.unwrap(), 0);
}
