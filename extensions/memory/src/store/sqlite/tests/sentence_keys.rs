//! Sentence keys in a real SQLite file: the shared checks, the rows they leave, the mirror
//! reloaded from the file, and a re-index that drops them.

use super::open;
use crate::store::backend::*;
use crate::store::sentence_key_checks::{
    a_query_vector_of_the_wrong_length_is_refused, found, sentence_keys_follow_their_turn,
};

async fn keyed_memories(path: &std::path::Path) -> Vec<String> {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let ids = sqlx::query_scalar("SELECT DISTINCT memory_id FROM memory_sentence_vectors")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    ids
}

#[tokio::test]
async fn sentence_keys_live_and_go_with_their_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store = open(&path).await;
    let left = sentence_keys_follow_their_turn(&store).await;
    a_query_vector_of_the_wrong_length_is_refused(&store).await;
    assert_eq!(
        keyed_memories(&path).await,
        std::slice::from_ref(&left.ben_turn)
    );
    store.close().await;

    // Another process (here: the store opened again) loads them from the file: Ben's one key.
    let store = open(&path).await;
    store.ensure_vector_index(4, "model-s").await.unwrap();
    assert_eq!(store.mirror_size().await.unwrap().sentence_rows, 1);
    assert_eq!(
        found(&store, "ben", [0.0, 1.0, 0.0, 0.0]).await,
        [left.ben_turn]
    );
    store.reset_vector_index(4, "model-s").await.unwrap();
    assert!(keyed_memories(&path).await.is_empty());
    assert!(found(&store, "ben", [0.0, 1.0, 0.0, 0.0]).await.is_empty());
    store.close().await;
}

#[tokio::test]
async fn the_indexer_takes_owners_in_turn_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("memory.db")).await;
    crate::store::index_order_checks::owners_take_turns_newest_first(&store).await;
    store.close().await;
}
