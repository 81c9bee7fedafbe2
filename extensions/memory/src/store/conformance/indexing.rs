//! The indexer's side: the embedding cache by model, sentence keys living and going with their
//! turn, and the order the indexer takes owners in (the shared checks of
//! `store/sentence_key_checks.rs` and `store/index_order_checks.rs`).

use super::{count, Conformant};
use crate::store::index_order_checks;
use crate::store::rows::from_ts as at;
use crate::store::sentence_key_checks::{
    a_query_vector_of_the_wrong_length_is_refused, found, sentence_keys_follow_their_turn,
};
use crate::store::sql::Driver;

/// Cached vectors round-trip bit for bit, by content hash and model; the first vector cached
/// for a text stays; rebuilding the index for a model forgets that model's vectors only.
pub(super) async fn the_embedding_cache_round_trips_by_model<S: Conformant>(store: &S) {
    let hashes = ["h1", "h2", "h3"].map(String::from);
    assert!(store.cached_vectors(&hashes, "m").await.unwrap().is_empty());
    assert!(store.cached_vectors(&[], "m").await.unwrap().is_empty());
    let vectors = vec![
        ("h1".to_owned(), vec![0.25, -1.5, 3.0e-7]),
        ("h2".to_owned(), vec![1.0; 384]),
    ];
    store.cache_vectors(&vectors, "m", at(10)).await.unwrap();
    store
        .cache_vectors(&[("h1".to_owned(), vec![9.0])], "m", at(20))
        .await
        .unwrap();
    store
        .cache_vectors(&[("h1".to_owned(), vec![7.0])], "other", at(20))
        .await
        .unwrap();
    store.cache_vectors(&[], "m", at(30)).await.unwrap();
    let cached = store.cached_vectors(&hashes, "m").await.unwrap();
    assert_eq!(cached.len(), 2);
    assert_eq!(
        cached["h1"], vectors[0].1,
        "the first vector stays, bit for bit"
    );
    assert_eq!(cached["h2"], vectors[1].1);
    assert_eq!(
        store.cached_vectors(&hashes, "other").await.unwrap()["h1"],
        [7.0]
    );
    let created = count(
        store,
        "SELECT created_at AS n FROM embedding_cache WHERE content_hash = 'h1' AND model_id = 'm'",
    )
    .await;
    assert_eq!(created, 10);
    // Rebuilding the index for "m" re-embeds every text: its cached vectors are forgotten,
    // another model's stay.
    store.reset_vector_index(4, "m").await.unwrap();
    assert!(store.cached_vectors(&hashes, "m").await.unwrap().is_empty());
    assert_eq!(
        store.cached_vectors(&hashes, "other").await.unwrap()["h1"],
        [7.0]
    );
}

/// The shared sentence-key checks, then the rows they leave: Ben's one turn keyed, in the
/// table and in what the store searches; a rebuilt index drops every key.
pub(super) async fn sentence_keys_live_and_go_with_their_turn<S: Conformant>(store: &S) {
    let left = sentence_keys_follow_their_turn(store).await;
    a_query_vector_of_the_wrong_length_is_refused(store).await;
    let keyed = store
        .read(sqlx::QueryBuilder::new(
            "SELECT DISTINCT memory_id FROM memory_sentence_vectors",
        ))
        .await
        .unwrap();
    let keyed: Vec<String> = keyed
        .iter()
        .map(|row| S::Db::text(row, "memory_id").unwrap())
        .collect();
    assert_eq!(keyed, std::slice::from_ref(&left.ben_turn));
    assert_eq!(store.mirror_size().await.unwrap().sentence_rows, 1);
    store.reset_vector_index(4, "model-s").await.unwrap();
    assert_eq!(
        count(store, "SELECT COUNT(*) AS n FROM memory_sentence_vectors").await,
        0
    );
    assert!(found(store, "ben", [0.0, 1.0, 0.0, 0.0]).await.is_empty());
}

/// The indexer takes each owner's newest turns in turn (`store/index_order_checks.rs`).
pub(super) async fn the_indexer_takes_owners_in_turn_newest_first<S: Conformant>(store: &S) {
    index_order_checks::owners_take_turns_newest_first(store).await;
}
