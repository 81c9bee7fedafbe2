//! What a removal leaves in the full-text index's leaf keys, and the merges that take it out
//! (see `store/sqlite/index_merge.rs`): the checkpointer's after a forget, the removal's own
//! after a bulk erasure.

use std::time::{Duration, Instant};

use super::{fact, open_fast};
use crate::store::backend::*;
use crate::store::sqlite::index_merge::{merge_due, BULK_ROWS};
use crate::store::MemoryStore;

/// A word of `letters` pseudo-random lower-case letters after `prefix`.
fn word(prefix: &str, seed: &mut u64, letters: usize) -> String {
    let mut word = prefix.to_owned();
    for _ in 0..letters {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        word.push(char::from(b'a' + (*seed % 26) as u8));
    }
    word
}

/// How many keys of the index's leaf-page b-tree begin with `prefix` (each key is a byte that
/// says how long a prefix of the page's first term follows, then that prefix).
async fn leaf_keys_starting(store: &MemoryStore, prefix: &str) -> usize {
    let keys: Vec<Vec<u8>> = sqlx::query_scalar("SELECT term FROM memories_fts_idx")
        .fetch_all(store.pool())
        .await
        .unwrap();
    keys.iter()
        .filter(|key| {
            key.get(1..)
                .is_some_and(|term| term.starts_with(prefix.as_bytes()))
        })
        .count()
}

/// Stores `count` memories of `user`, each with one word after `prefix`; their ids.
async fn store_words(
    store: &MemoryStore,
    user: &str,
    prefix: &str,
    count: usize,
    seed: &mut u64,
) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let text = format!("a note on {} for later", word(prefix, seed, 7));
        let memory = crate::store::NewMemory {
            user_id: Some(user.to_owned()),
            ..fact(&text)
        };
        ids.push(store.insert_memory(&memory, &[]).await.unwrap());
    }
    ids
}

#[tokio::test]
async fn removed_words_leave_no_leaf_key_once_the_index_is_merged() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_fast(&dir.path().join("memory.db")).await;
    let mut seed = 88_172_645_463_325_252_u64;
    // Other words around them, so that the index has many leaf pages; none begins with "qq".
    let mut others = 0;
    while others < 600 {
        let text = format!("a note on {} for later", word("", &mut seed, 8));
        if !text.contains(" qq") {
            store.insert_memory(&fact(&text), &[]).await.unwrap();
            others += 1;
        }
    }
    let forgotten = store_words(&store, "ana", "qqz", 600, &mut seed).await;
    let erased = store_words(&store, "bob", "qqy", BULK_ROWS, &mut seed).await;
    for prefix in ["qqz", "qqy"] {
        assert!(
            leaf_keys_starting(&store, prefix).await > 0,
            "some leaf page begins with a {prefix} word, or this test shows nothing"
        );
    }

    // A forget of fewer rows than a bulk removal deletes them securely: the words are gone at
    // once, a leaf key's few letters stay until the checkpointer's merge.
    assert_eq!(
        crate::store::purge(&store, &forgotten).await.unwrap().len(),
        600
    );
    let matches: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH 'qqz*'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(matches, 0);
    let waited = Instant::now();
    while merge_due(store.pool()).await.unwrap() {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the checkpointer merges the index within a few rounds"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(leaf_keys_starting(&store, "qqz").await, 0);
    assert!(leaf_keys_starting(&store, "qqy").await > 0, "bob's stay");

    // Erasing a user with many memories merges in its own transaction, and deletes securely
    // again afterwards.
    store.erase_user("bob").await.unwrap();
    assert!(!merge_due(store.pool()).await.unwrap());
    assert_eq!(leaf_keys_starting(&store, "qqy").await, 0);
    assert_eq!(erased.len(), BULK_ROWS);
    let secure: i64 =
        sqlx::query_scalar("SELECT v FROM memories_fts_config WHERE k = 'secure-delete'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(secure, 1);
    let report = store.check_integrity().await.unwrap();
    assert_eq!(report.problems(), Vec::<String>::new());
    store.close().await;
}
