//! What both stores must do with sentence keys (see `crate::sentence_keys`), checked through
//! the storage traits alone; `sqlite/tests` and `postgres/tests` run it on a real SQLite file
//! and a real PostgreSQL database, then count the rows left behind in their own SQL.

use std::collections::HashMap;

use chrono::{TimeZone, Utc};

use crate::store::{content_hash, MemoryBackend, NewMemory};
use crate::types::SearchRequest;

pub(crate) fn unit(values: [f32; 4]) -> Vec<f32> {
    let norm = values.iter().map(|value| value * value).sum::<f32>().sqrt();
    values.iter().map(|value| value / norm).collect()
}

/// A turn of `user` spoken by `role`, at 2026-01-01 00:00 UTC.
pub(crate) fn turn(user: &str, role: &str, content: &str) -> NewMemory {
    NewMemory {
        source_role: Some(role.into()),
        ..crate::store::conformance::turn(user, "s1", content)
    }
}

fn asked_by(user: &str) -> SearchRequest {
    SearchRequest {
        user_id: Some(user.into()),
        limit: 10,
        ..SearchRequest::default()
    }
}

/// The memory ids `search_sentences` finds for `user` near `query` (at least 0.9 similar).
pub(crate) async fn found(store: &dyn MemoryBackend, user: &str, query: [f32; 4]) -> Vec<String> {
    store
        .search_sentences(&asked_by(user), &unit(query), 10, 0.9)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// What the checks leave: Ben's turn, the one memory that keeps a sentence key.
pub(crate) struct Left {
    pub(crate) ben_turn: String,
}

/// Indexes users' and assistants' turns with sentence keys, searches them per owner, replaces,
/// retires and purges them, and erases a user. Call on a fresh store.
pub(crate) async fn sentence_keys_follow_their_turn(store: &dyn MemoryBackend) -> Left {
    store.ensure_vector_index(4, "model-s").await.unwrap();
    let long = "I flew to Lisbon with TAP in May. The hotel was near the river.";
    let ana_turn = store
        .insert_memory(&turn("ana", "user", long), &[])
        .await
        .unwrap();
    let mut expiring = turn("ana", "user", "I keep my spare key under the blue pot.");
    expiring.expires_at = Some(Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap());
    let ana_expiring = store.insert_memory(&expiring, &[]).await.unwrap();
    let assistant = store
        .insert_memory(&turn("ana", "assistant", "Lisbon is lovely in May."), &[])
        .await
        .unwrap();
    let ben_turn = store
        .insert_memory(
            &turn("ben", "user", "I flew with TAP to Porto last week."),
            &[],
        )
        .await
        .unwrap();

    // Only the turns a user spoke are marked for sentence keys.
    let batch = store.next_index_batch(10).await.unwrap();
    let spoken: HashMap<String, bool> = batch
        .iter()
        .map(|item| (item.memory_id.clone(), item.spoken_by_user))
        .collect();
    assert_eq!(spoken.len(), 4);
    assert!(spoken[&ana_turn] && spoken[&ana_expiring] && spoken[&ben_turn]);
    assert!(!spoken[&assistant]);

    let own = unit([1.0, 0.0, 0.0, 0.0]);
    let items: Vec<_> = batch
        .into_iter()
        .map(|item| (item, Some(own.clone())))
        .collect();
    let sentences: HashMap<String, Vec<Vec<f32>>> = [
        (
            ana_turn.clone(),
            vec![unit([0.0, 1.0, 0.0, 0.0]), unit([0.0, 0.0, 1.0, 0.0])],
        ),
        (ana_expiring.clone(), vec![unit([0.0, 0.0, 0.0, 1.0])]),
        (ben_turn.clone(), vec![unit([0.0, 1.0, 0.0, 0.0])]),
    ]
    .into_iter()
    .collect();
    store
        .store_vectors_and_sentences(&items, &sentences)
        .await
        .unwrap();
    assert_eq!(store.pending_index().await.unwrap(), 0);

    // Each owner finds their own turn by any of its sentences, once, at that sentence's
    // similarity; the turn's own vector is not a sentence key.
    let near_second = store
        .search_sentences(&asked_by("ana"), &unit([0.0, 0.1, 1.0, 0.0]), 10, 0.5)
        .await
        .unwrap();
    assert_eq!(near_second.len(), 1, "{near_second:?}");
    assert_eq!(near_second[0].0, ana_turn);
    assert!((near_second[0].1 - 0.995).abs() < 0.02, "{near_second:?}");
    assert_eq!(
        found(store, "ana", [0.0, 1.0, 0.0, 0.0]).await,
        std::slice::from_ref(&ana_turn)
    );
    assert_eq!(
        found(store, "ben", [0.0, 1.0, 0.0, 0.0]).await,
        std::slice::from_ref(&ben_turn)
    );
    assert!(found(store, "ana", [1.0, 0.0, 0.0, 0.0]).await.is_empty());
    assert!(found(store, "carol", [0.0, 1.0, 0.0, 0.0]).await.is_empty());
    // In a chat, a user still finds their personal turns, and nobody else's.
    for (user, expected) in [("ben", vec![ben_turn.clone()]), ("carol", Vec::new())] {
        let in_chat = SearchRequest {
            chat_id: Some("c1".into()),
            ..asked_by(user)
        };
        let hits = store
            .search_sentences(&in_chat, &unit([0.0, 1.0, 0.0, 0.0]), 10, 0.9)
            .await
            .unwrap();
        let ids: Vec<String> = hits.into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, expected, "{user} in a chat");
    }

    // Indexed again with one sentence, the turn keeps only that one.
    let items: Vec<_> = items
        .into_iter()
        .filter(|(item, _)| item.memory_id == ana_turn)
        .collect();
    let one: HashMap<String, Vec<Vec<f32>>> =
        [(ana_turn.clone(), vec![unit([0.0, 0.0, 1.0, 0.0])])].into();
    store
        .store_vectors_and_sentences(&items, &one)
        .await
        .unwrap();
    assert!(found(store, "ana", [0.0, 1.0, 0.0, 0.0]).await.is_empty());
    assert_eq!(
        found(store, "ana", [0.0, 0.0, 1.0, 0.0]).await,
        std::slice::from_ref(&ana_turn)
    );

    // A retired turn (here: expired) is not found by its sentences.
    assert_eq!(
        found(store, "ana", [0.0, 0.0, 0.0, 1.0]).await,
        std::slice::from_ref(&ana_expiring)
    );
    let expired = store
        .expire(Utc.with_ymd_and_hms(2026, 1, 3, 0, 0, 0).unwrap())
        .await
        .unwrap();
    assert_eq!(expired, 1);
    assert!(found(store, "ana", [0.0, 0.0, 0.0, 1.0]).await.is_empty());

    // A purged turn takes its sentence keys and their cached vectors along.
    let sentence = "The hotel was near the river.";
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    store
        .cache_vectors(
            &[(content_hash(sentence), unit([0.0, 0.0, 1.0, 0.0]))],
            "model-s",
            at,
        )
        .await
        .unwrap();
    crate::store::purge(store, std::slice::from_ref(&ana_turn))
        .await
        .unwrap();
    assert!(found(store, "ana", [0.0, 0.0, 1.0, 0.0]).await.is_empty());
    assert!(store
        .cached_vectors(&[content_hash(sentence)], "model-s")
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        found(store, "ben", [0.0, 1.0, 0.0, 0.0]).await,
        std::slice::from_ref(&ben_turn)
    );

    // An erased user's sentence keys go with them.
    let dan_turn = store
        .insert_memory(
            &turn("dan", "user", "I sold my bike. I bought a kayak."),
            &[],
        )
        .await
        .unwrap();
    let batch = store.next_index_batch(10).await.unwrap();
    store_one_key(store, batch, dan_turn, &own).await;
    assert_eq!(found(store, "dan", [0.0, 1.0, 0.0, 0.0]).await.len(), 1);
    store.erase_user("dan").await.unwrap();
    assert!(found(store, "dan", [0.0, 1.0, 0.0, 0.0]).await.is_empty());

    // A turn retired after its batch was read but before its vectors are stored keeps none:
    // no vector and no sentence key is left without an active memory.
    let mut fleeting = turn("eve", "user", "I parked on level three. The car is red.");
    fleeting.expires_at = Some(Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap());
    let eve_turn = store.insert_memory(&fleeting, &[]).await.unwrap();
    let batch = store.next_index_batch(10).await.unwrap();
    let expired = store
        .expire(Utc.with_ymd_and_hms(2026, 1, 3, 0, 0, 0).unwrap())
        .await
        .unwrap();
    assert_eq!(expired, 1);
    store_one_key(store, batch, eve_turn, &own).await;
    assert_eq!(store.pending_index().await.unwrap(), 0);
    let report = store.check_integrity().await.unwrap();
    assert_eq!(report.orphan_vectors, 0, "{report:?}");
    Left { ben_turn }
}

/// Stores the one item of `batch` (the turn `id`) with vector `own` and one sentence key.
async fn store_one_key(
    store: &dyn MemoryBackend,
    batch: Vec<crate::store::IndexItem>,
    id: String,
    own: &[f32],
) {
    assert_eq!(batch.len(), 1);
    let items: Vec<_> = batch
        .into_iter()
        .map(|item| (item, Some(own.to_vec())))
        .collect();
    let keys: HashMap<String, Vec<Vec<f32>>> = [(id, vec![unit([0.0, 1.0, 0.0, 0.0])])].into();
    store
        .store_vectors_and_sentences(&items, &keys)
        .await
        .unwrap();
}

/// Both vector paths (the memories' vectors and the sentence keys) refuse a query vector that is
/// not as long as the store's vectors, with an error naming both lengths, rather than finding
/// nothing. Call on a store whose vector index is 4 long.
pub(crate) async fn a_query_vector_of_the_wrong_length_is_refused(store: &dyn MemoryBackend) {
    let short = [1.0_f32, 0.0, 0.0];
    let refusals = [
        store
            .search_vector(&asked_by("ana"), &short, 10, 0.0)
            .await
            .err(),
        store
            .search_sentences(&asked_by("ana"), &short, 10, 0.0)
            .await
            .err(),
    ];
    for refusal in refusals {
        let refusal = refusal
            .expect("a 3-long query vector is refused")
            .to_string();
        assert!(
            refusal.contains("3-dimension") && refusal.contains("4-dimension"),
            "{refusal}"
        );
    }
}
