//! The store on a real SQLite file: the vector dimension lock, soft deletes, the vector
//! mirror, full-text narrowing, and sessions.

use chrono::{TimeZone, Utc};

use super::{fact, index_all, open, open_fast, pseudo_vector, FullTextSearch};
use crate::store::backend::*;
use crate::store::conformance::soft_delete;
use crate::store::VectorStatus;
use crate::types::{SearchRequest, SessionKey};

#[tokio::test]
async fn a_dimension_or_model_change_disables_vectors_and_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    {
        let store = open(&path).await;
        let status = store.ensure_vector_index(4, "model-a").await.unwrap();
        assert_eq!(
            status,
            VectorStatus::Enabled {
                dimensions: 4,
                model_id: "model-a".into()
            }
        );
        let id = store
            .insert_memory(&fact("the sky is green"), &[])
            .await
            .unwrap();
        let batch = store.next_index_batch(10).await.unwrap();
        assert_eq!(batch.len(), 1);
        store
            .store_vectors(&[(batch[0].clone(), Some(vec![1.0, 0.0, 0.0, 0.0]))])
            .await
            .unwrap();
        assert_eq!(store.pending_index().await.unwrap(), 0);
        let request = SearchRequest {
            user_id: Some("ana".into()),
            limit: 5,
            ..SearchRequest::default()
        };
        let found = store
            .search_vector(&request, &[0.9, 0.1, 0.0, 0.0], 5, -1.0)
            .await
            .unwrap();
        let found: Vec<String> = found.into_iter().map(|(id, _)| id).collect();
        assert_eq!(found, vec![id]);
        // Another owner never sees it.
        let other = SearchRequest {
            user_id: Some("ben".into()),
            ..request.clone()
        };
        assert!(store
            .search_vector(&other, &[0.9, 0.1, 0.0, 0.0], 5, -1.0)
            .await
            .unwrap()
            .is_empty());
        store.close().await;
    }
    let store = open(&path).await;
    for (dimensions, model) in [(8, "model-a"), (4, "model-b")] {
        match store.ensure_vector_index(dimensions, model).await.unwrap() {
            VectorStatus::Disabled { reason } => {
                assert!(reason.contains("mnemo reindex"), "{reason}");
                assert!(reason.contains("Nothing is lost"), "{reason}");
            }
            enabled => panic!("expected vector search off, got {enabled:?}"),
        }
    }
    let request = SearchRequest {
        query: "sky".into(),
        user_id: Some("ana".into()),
        limit: 5,
        ..SearchRequest::default()
    };
    assert_eq!(
        store.search_fts(&request, 5).await.unwrap().len(),
        1,
        "the memory is still there"
    );
    assert!(store
        .search_vector(&request, &[1.0; 8], 5, -1.0)
        .await
        .unwrap()
        .is_empty());
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM vec_memories")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(count, 1, "the old vectors are kept for a re-index");
}

#[tokio::test]
async fn the_vector_mirror_agrees_with_exact_search_and_follows_other_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let writer = open_fast(&path).await;
    let reader = open_fast(&path).await;
    for store in [&writer, &reader] {
        store.ensure_vector_index(128, "m").await.unwrap();
    }
    for n in 0..300 {
        writer
            .insert_memory(&fact(&format!("note {n}")), &[])
            .await
            .unwrap();
    }
    index_all(&writer, 128).await;
    // The reader (a second connection pool, as another process would have) loads what the
    // writer stored, and its quantised answers match brute force.
    let query = pseudo_vector(77, 128);
    let approximate = reader
        .nearest_approximate(&query, Some("ana"), None, 10)
        .await
        .unwrap();
    let exact = reader
        .nearest_exact(&query, Some("ana"), None, 10)
        .await
        .unwrap();
    assert_eq!(approximate[0].0, exact[0].0);
    assert!((approximate[0].1 - 1.0).abs() < 0.01, "{approximate:?}");
    let overlap = approximate
        .iter()
        .filter(|(id, _)| exact.iter().any(|(other, _)| other == id))
        .count();
    assert!(overlap >= 9, "{overlap} of 10 exact neighbours found");
    // A later write by the writer moves the generation on; the reader reloads and sees it.
    let late = writer.insert_memory(&fact("note 5000"), &[]).await.unwrap();
    index_all(&writer, 128).await;
    let found = reader
        .nearest_approximate(&pseudo_vector(5000, 128), Some("ana"), None, 1)
        .await
        .unwrap();
    assert_eq!(found[0].0, late);
    assert_eq!(reader.mirror_size().await.unwrap().memory_rows, 301);
    // A forgotten memory leaves the writer's mirror at once.
    let at = Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap();
    assert!(soft_delete(&writer, &late, at).await);
    let after = writer
        .nearest_approximate(&pseudo_vector(5000, 128), Some("ana"), None, 1)
        .await
        .unwrap();
    assert_ne!(after[0].0, late);
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn stored_vectors_are_read_from_the_mirror() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_fast(&dir.path().join("memory.db")).await;
    store.ensure_vector_index(128, "m").await.unwrap();
    let mut ids = Vec::new();
    for n in 0..20 {
        let memory = fact(&format!("note {n}"));
        ids.push(store.insert_memory(&memory, &[]).await.unwrap());
    }
    index_all(&store, 128).await;
    // The mirror's 8-bit reading of each stored vector is the vector, nearly; an id without a
    // vector is left out.
    let asked = [ids[3].clone(), ids[4].clone(), "no-such-memory".to_owned()];
    let stored = store.stored_vectors(&asked).await.unwrap();
    assert_eq!(stored.len(), 2, "only memories with a vector");
    for (id, seed) in [(&ids[3], 3), (&ids[4], 4)] {
        let reading = &stored[id];
        let cosine = dot(reading, &pseudo_vector(seed, 128)) / dot(reading, reading).sqrt();
        assert!(cosine > 0.999, "note {seed}: {cosine}");
    }
    // A forgotten memory's vector is gone.
    let at = Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap();
    assert!(soft_delete(&store, &ids[4], at).await);
    let left = store.stored_vectors(&asked).await.unwrap();
    assert_eq!(left.keys().collect::<Vec<_>>(), [&ids[3]]);
}

#[tokio::test]
async fn common_words_do_not_crowd_out_rare_ones_in_a_large_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_fast(&dir.path().join("memory.db")).await;
    // 6,000 memories: "alpha" and "beta" each in 40% of them, "zebra" in four, and "note" in
    // every one.
    let mut zebras = Vec::new();
    for n in 0..6_000 {
        let text = match n % 1_500 {
            0 => format!("the zebra escaped again, note {n}"),
            1..=3 => format!("alpha beta together, note {n}"),
            m if m % 5 < 2 => format!("alpha only, note {n}"),
            m if m % 5 < 4 => format!("beta only, note {n}"),
            _ => format!("gamma only, note {n}"),
        };
        let id = store.insert_memory(&fact(&text), &[]).await.unwrap();
        if text.contains("zebra") {
            zebras.push(id);
        }
    }
    let search = |query: &str, limit: usize| {
        let request = SearchRequest {
            query: query.into(),
            user_id: Some("ana".into()),
            limit,
            ..SearchRequest::default()
        };
        let store = &store;
        async move {
            let found: Vec<String> = store
                .search_fts(&request, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let memories = store.load_filtered(&found, &request).await.unwrap();
            let contents: Vec<String> = found
                .iter()
                .map(|id| memories[id].content.clone())
                .collect();
            (found, contents)
        }
    };
    let (found, contents) = search("zebra alpha beta", 10).await;
    assert_eq!(found.len(), 10);
    for zebra in &zebras {
        assert!(found[..4].contains(zebra), "rare word first: {contents:?}");
    }
    // Memories with both common words outrank those with one.
    let both = contents[4..]
        .iter()
        .take_while(|content| content.contains("together"))
        .count();
    assert_eq!(both, 6, "{contents:?}");
    // A word in half the memories or more gets no BM25 weight: it is left out of the query
    // while the other words find enough, and changes nothing.
    assert_eq!(search("zebra alpha beta note", 10).await.0, found);
    // When they do not, it is searched too, after them.
    let (rare, contents) = search("zebra note", 10).await;
    assert_eq!(rare.len(), 10, "{contents:?}");
    for zebra in &zebras {
        assert!(rare[..4].contains(zebra), "rare word first: {contents:?}");
    }
    // A query of common words only still answers, and so does one of ubiquitous words.
    assert_eq!(search("alpha only", 10).await.0.len(), 10);
    assert_eq!(search("note only", 10).await.0.len(), 10);
}

/// When a store's common words go together in more memories than a search ranks
/// (`RANK_BUDGET`, 2,000), the first pass ranks every memory with a rare word, but of those
/// with the common words only, just the 2,000 stored last.
#[tokio::test]
async fn a_first_pass_ranks_only_the_newest_memories_with_common_words_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_fast(&dir.path().join("memory.db")).await;
    let zebra = store
        .insert_memory(&fact("the zebra and the alpha beta, note 0"), &[])
        .await
        .unwrap();
    // Short, so BM25 puts it first of the memories with the common words only.
    let oldest_short = store.insert_memory(&fact("alpha beta"), &[]).await.unwrap();
    let mut ids = Vec::new();
    for n in 2..2_600 {
        let text = format!("alpha and beta came up together again today, note {n}");
        ids.push(store.insert_memory(&fact(&text), &[]).await.unwrap());
    }
    let newest: std::collections::HashSet<&String> = ids[ids.len() - 2_000..].iter().collect();
    let request = |query: &str| SearchRequest {
        query: query.into(),
        user_id: Some("ana".into()),
        limit: 10,
        ..SearchRequest::default()
    };
    let ranked = |found: Vec<(String, f64)>| -> Vec<String> {
        found.into_iter().map(|(id, _)| id).collect()
    };

    // Ranking every match puts the short old memory right after the rare word's.
    let every = ranked(
        store
            .fts_best_matches("\"zebra\" OR (\"alpha\" AND \"beta\")", &request(""), 10)
            .await
            .unwrap(),
    );
    assert_eq!(every[..2], [zebra.clone(), oldest_short.clone()]);

    // The store's own first pass keeps exactly the `newest_kept` highest rowids of the
    // common words' matches, and every match when they are fewer.
    let pass = |newest_kept: usize| crate::store::FirstPass {
        query: "\"zebra\" OR (\"alpha\" AND \"beta\")".into(),
        common: "\"alpha\" AND \"beta\"".into(),
        rare: Some("\"zebra\"".into()),
        newest_kept,
    };
    let five = ranked(
        store
            .fts_first_pass_matches(&pass(5), &request(""), 10)
            .await
            .unwrap(),
    );
    assert_eq!(five.len(), 6, "the rare word's memory and the five newest");
    assert_eq!(five[0], zebra);
    let last_five: std::collections::HashSet<&String> = ids[ids.len() - 5..].iter().collect();
    assert!(five[1..].iter().all(|id| last_five.contains(id)));
    let all = ranked(
        store
            .fts_first_pass_matches(&pass(3_000), &request(""), 10)
            .await
            .unwrap(),
    );
    assert_eq!(all, every, "fewer matches than kept: all ranked");

    let found = ranked(
        store
            .search_fts(&request("zebra alpha beta"), 10)
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 10);
    assert_eq!(
        found[0], zebra,
        "the rare word's memory, however old, comes first"
    );
    assert!(
        found[1..].iter().all(|id| newest.contains(id)),
        "the others are among the newest 2,000"
    );
    // A query of common words only: the newest 2,000 of their matches.
    let common = ranked(store.search_fts(&request("alpha beta"), 10).await.unwrap());
    assert_eq!(common.len(), 10);
    assert!(common.iter().all(|id| newest.contains(id)), "{common:?}");
    // Looking for a fact's near-duplicate ranks every match: the old one is found.
    let session = SessionKey::new("ana", None, "s1");
    let similar = crate::search::similar_facts(
        &store,
        &crate::search::CorpusStats::default(),
        &session,
        "alpha beta",
        10,
    )
    .await
    .unwrap();
    assert_eq!(similar[0].id, oldest_short);
}

/// Export then import is exact to the last bit of a float: a decayed confidence such as
/// 0.9999884259929053 comes back as the same number (JSON numbers are read with correct
/// rounding, serde_json's `float_roundtrip`).
#[tokio::test]
async fn exported_floats_import_back_to_the_same_bits() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("a.db")).await;
    store
        .insert_memory(&fact("Ana likes tea"), &[])
        .await
        .unwrap();
    let odd = 0.999_988_425_992_905_3_f64;
    let mut rows = store.export_rows(None).await.unwrap();
    for row in &mut rows {
        if row["type"] == "memories" {
            row["row"]["confidence"] = serde_json::json!(odd);
        }
    }
    let text = serde_json::to_string(&rows).unwrap();
    let read: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let copy = open(&dir.path().join("b.db")).await;
    for row in &read {
        copy.import_row(row["type"].as_str().unwrap(), &row["row"])
            .await
            .unwrap();
    }
    let back = copy.export_rows(None).await.unwrap();
    let confidence = back
        .iter()
        .find(|row| row["type"] == "memories")
        .map(|row| row["row"]["confidence"].as_f64().unwrap())
        .unwrap();
    assert_eq!(confidence.to_bits(), odd.to_bits(), "{confidence} != {odd}");
}

/// An export lists memories in the order they were stored, so an import stores them in that
/// order again (ids are hashes, so their order is another): the copy keeps which are the last
/// stored, which a search's full-text first pass relies on.
#[tokio::test]
async fn an_export_keeps_the_order_memories_were_stored_in() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("a.db")).await;
    let mut stored = Vec::new();
    for n in 0..20 {
        let text = format!("Ana noted item {n}");
        stored.push(store.insert_memory(&fact(&text), &[]).await.unwrap());
    }
    let mut by_id = stored.clone();
    by_id.sort();
    assert_ne!(by_id, stored, "ids are not in storing order");
    let rows = store.export_rows(None).await.unwrap();
    let exported: Vec<String> = rows
        .iter()
        .filter(|row| row["type"] == "memories")
        .map(|row| row["row"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(exported, stored);
    let copy = open(&dir.path().join("b.db")).await;
    for row in &rows {
        copy.import_row(row["type"].as_str().unwrap(), &row["row"])
            .await
            .unwrap();
    }
    let in_copy: Vec<String> = sqlx::query_scalar("SELECT id FROM memories ORDER BY rowid")
        .fetch_all(&copy.pool)
        .await
        .unwrap();
    assert_eq!(in_copy, stored);
}
