//! Sentence keys in a real SQLite file: loaded again from the file by another process (what
//! both stores do with them is checked in `store/conformance`).

use super::open;
use crate::store::backend::*;
use crate::store::sentence_key_checks::{found, sentence_keys_follow_their_turn};

#[tokio::test]
async fn another_process_loads_the_sentence_keys_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store = open(&path).await;
    let left = sentence_keys_follow_their_turn(&store).await;
    store.close().await;

    // Another process (here: the store opened again) loads them from the file: Ben's one key.
    let store = open(&path).await;
    store.ensure_vector_index(4, "model-s").await.unwrap();
    assert_eq!(store.mirror_size().await.unwrap().sentence_rows, 1);
    assert_eq!(
        found(&store, "ben", [0.0, 1.0, 0.0, 0.0]).await,
        [left.ben_turn]
    );
    store.close().await;
}
