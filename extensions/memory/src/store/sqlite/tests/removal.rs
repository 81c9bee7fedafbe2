//! Removing memories from a real SQLite file: purge, erasure, the full-text index and the
//! vector mirror afterwards, and the write-ahead log under a busy writer.

use std::time::Duration;

use chrono::{TimeZone, Utc};

use super::{fact, index_all, open, pseudo_vector, FullTextSearch};
use crate::store::backend::*;
use crate::store::conformance::person_in as person;
use crate::store::MemoryStore;
use crate::types::{MemoryKind, SearchRequest};

fn hex_sha256(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Rows anywhere in the store that still hold `needle` or point at `id`.
async fn traces(path: &std::path::Path, id: &str, needle: &str) -> Vec<String> {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let mut found = Vec::new();
    for (what, sql, bind) in [
        (
            "memories row",
            "SELECT COUNT(*) FROM memories WHERE id = ?",
            id,
        ),
        (
            "memories text",
            "SELECT COUNT(*) FROM memories WHERE content LIKE '%' || ? || '%'",
            needle,
        ),
        (
            "full-text entry",
            "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?",
            needle,
        ),
        (
            "entity link",
            "SELECT COUNT(*) FROM memory_entities WHERE memory_id = ?",
            id,
        ),
        (
            "queue entry",
            "SELECT COUNT(*) FROM embedding_queue WHERE memory_id = ?",
            id,
        ),
        (
            "vector",
            "SELECT COUNT(*) FROM vec_memories WHERE memory_id = ?",
            id,
        ),
    ] {
        let count: i64 = sqlx::query_scalar(sql)
            .bind(bind)
            .fetch_one(&pool)
            .await
            .unwrap();
        if count > 0 {
            found.push(format!("{what}: {count}"));
        }
    }
    pool.close().await;
    found
}

#[tokio::test]
async fn purge_removes_a_memory_everywhere_and_erase_removes_a_user() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store = open(&path).await;
    store.ensure_vector_index(4, "model-a").await.unwrap();
    let secret = "flamingo passport is with Sarah 4417";
    let mut ana_secret = fact(secret);
    ana_secret.kind = MemoryKind::Episode;
    let secret_id = store
        .insert_memory(&ana_secret, &[person("Sarah", secret)])
        .await
        .unwrap();
    let kept_text = "Sarah likes the blue tram 12";
    let kept_id = store
        .insert_memory(&fact(kept_text), &[person("Sarah", kept_text)])
        .await
        .unwrap();
    let mut ben = fact("ben keeps a flamingo mug 99");
    ben.user_id = Some("ben".into());
    let ben_id = store.insert_memory(&ben, &[]).await.unwrap();
    index_all(&store, 4).await;
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    store
        .cache_vectors(
            &[(hex_sha256(secret), vec![1.0, 0.0, 0.0, 0.0])],
            "model-a",
            at,
        )
        .await
        .unwrap();
    assert!(!traces(&path, &secret_id, "passport").await.is_empty());

    // One memory: gone from every table and index, the others untouched.
    let forgotten = crate::store::purge(&store, std::slice::from_ref(&secret_id))
        .await
        .unwrap();
    assert_eq!(forgotten.len(), 1);
    assert_eq!(forgotten[0].memory_id, secret_id);
    assert_eq!(forgotten[0].content, secret, "announced with its text");
    assert_eq!(forgotten[0].user_id.as_deref(), Some("ana"));
    assert_eq!(
        traces(&path, &secret_id, "passport").await,
        Vec::<String>::new()
    );
    assert!(store
        .cached_vectors(&[hex_sha256(secret)], "model-a")
        .await
        .unwrap()
        .is_empty());
    let request = SearchRequest {
        query: "flamingo passport".into(),
        user_id: Some("ana".into()),
        limit: 10,
        ..SearchRequest::default()
    };
    assert!(store.search_fts(&request, 10).await.unwrap().is_empty());
    let nearest = store
        .search_vector(&request, &[1.0, 0.0, 0.0, 0.0], 10, -1.0)
        .await
        .unwrap();
    assert!(
        nearest.iter().all(|(id, _)| id != &secret_id),
        "{nearest:?}"
    );
    assert!(store.get(&kept_id).await.unwrap().is_some());
    assert!(
        crate::store::purge(&store, std::slice::from_ref(&secret_id))
            .await
            .unwrap()
            .is_empty(),
        "already gone"
    );
    let report = store.check_integrity().await.unwrap();
    assert_eq!(report.problems(), Vec::<String>::new(), "{report:?}");

    // The whole user: nothing of ana is left, ben is untouched.
    let erased = store.erase_user("ana").await.unwrap().erased;
    assert_eq!(erased.memories_removed, 1);
    assert!(!erased.session_ids.is_empty(), "{erased:?}");
    assert!(store.get(&kept_id).await.unwrap().is_none());
    assert_eq!(traces(&path, &kept_id, "tram").await, Vec::<String>::new());
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    for sql in [
        "SELECT COUNT(*) FROM memories WHERE user_id = 'ana'",
        "SELECT COUNT(*) FROM entities WHERE owner_id = 'ana'",
        "SELECT COUNT(*) FROM sessions_consolidations WHERE user_id = 'ana'",
        "SELECT COUNT(*) FROM vec_memories WHERE user_id = 'ana'",
    ] {
        let count: i64 = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        assert_eq!(count, 0, "{sql}");
    }
    pool.close().await;
    assert!(store.get(&ben_id).await.unwrap().is_some());
    let report = store.check_integrity().await.unwrap();
    assert_eq!(report.problems(), Vec::<String>::new(), "{report:?}");
    assert_eq!((report.active, report.vectors), (1, Some(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn the_write_ahead_log_stays_bounded_under_a_writer_that_never_pauses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let wal = dir.path().join("memory.db-wal");
    let store = std::sync::Arc::new(
        MemoryStore::open(
            &path,
            &crate::store::StoreOptions {
                busy_timeout: Duration::from_secs(5),
                synchronous: "off".into(),
                max_connections: 3,
                vector_oversample: 8,
                // 1 MB: small enough that a few seconds of writes pass it many times.
                wal_truncate_frames: 256,
            },
        )
        .await
        .unwrap(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    let writer = {
        let store = std::sync::Arc::clone(&store);
        tokio::spawn(async move {
            let mut written = 0_u64;
            while std::time::Instant::now() < deadline {
                let text = format!("{} note {written}", "lorem ipsum dolor ".repeat(200));
                store.insert_memory(&fact(&text), &[]).await.unwrap();
                written += 1;
            }
            written
        })
    };
    // Short readers all the while (a rare term, as a search would look one up), so that the
    // log is never free of them for long.
    let reader = {
        let store = std::sync::Arc::clone(&store);
        tokio::spawn(async move {
            let request = SearchRequest {
                query: "17".into(),
                user_id: Some("ana".into()),
                limit: 5,
                ..SearchRequest::default()
            };
            while std::time::Instant::now() < deadline {
                store.search_fts(&request, 5).await.unwrap();
            }
        })
    };
    // The log file's size every 20 ms: it falls when the log is emptied (truncated, or restarted
    // and trimmed to the limit); before the bound it only ever grew.
    let (mut largest, mut previous, mut emptied) = (0, 0, 0);
    while std::time::Instant::now() < deadline {
        let size = std::fs::metadata(&wal).map(|meta| meta.len()).unwrap_or(0);
        if size < previous / 2 {
            emptied += 1;
        }
        largest = largest.max(size);
        previous = size;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let written = writer.await.unwrap();
    reader.await.unwrap();
    let database = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "{written} memories, database {database} bytes, largest log {largest} bytes, emptied {emptied} times"
    );
    // Each insert commits a few pages, so the log carries several times the database's growth:
    // unbounded, it would end as the sum of everything written. Bounded, it is emptied again
    // and again (every 0.5 s checkpoint round that finds it past the limit).
    assert!(
        emptied >= 3,
        "the log was emptied {emptied} times in 4 s of writes (largest {largest} bytes)"
    );
    store.close().await;
    assert_eq!(
        std::fs::metadata(&wal).map(|meta| meta.len()).unwrap_or(0),
        0,
        "close empties the log"
    );
}

/// Purging the first, the last, some or all rows keeps the full-text index sound, with FTS5's
/// `secure-delete` on. (With the SQLite 3.46.0 that sqlx 0.8 bundled, the option left the index
/// "malformed" in all of these cases; 3.51 does not.)
#[tokio::test]
async fn purging_any_rows_leaves_a_sound_full_text_index() {
    for (rows, purged) in [(1, 1), (2, 1), (5, 1), (5, 5), (30, 29)] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir.path().join("memory.db")).await;
        let secure: i64 =
            sqlx::query_scalar("SELECT v FROM memories_fts_config WHERE k = 'secure-delete'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(secure, 1, "the index deletes securely");
        let mut ids = Vec::new();
        for index in 0..rows {
            let text = format!("I moved to Lisbon in May {index} alpha");
            ids.push(store.insert_memory(&fact(&text), &[]).await.unwrap());
        }
        // In two goes: the second merges an index the first already merged.
        let half = purged / 2;
        assert_eq!(
            crate::store::purge(&store, &ids[..half])
                .await
                .unwrap()
                .len(),
            half
        );
        assert_eq!(
            crate::store::purge(&store, &ids[half..purged])
                .await
                .unwrap()
                .len(),
            purged - half
        );
        let report = store.check_integrity().await.unwrap();
        assert_eq!(
            report.problems(),
            Vec::<String>::new(),
            "{rows} rows, {purged} purged"
        );
        let request = SearchRequest {
            query: "Lisbon alpha".into(),
            user_id: Some("ana".into()),
            limit: 50,
            ..SearchRequest::default()
        };
        assert_eq!(
            store.search_fts(&request, 50).await.unwrap().len(),
            rows - purged
        );
    }
}

/// Erasing a user takes their vectors row by row when they own few memories, and rebuilds the
/// table from everyone else's when they own most; either way the others' vectors stay whole.
#[tokio::test]
async fn erasing_a_user_keeps_everyone_elses_vectors_either_way() {
    for (theirs, others) in [(2, 6), (6, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir.path().join("memory.db")).await;
        store.ensure_vector_index(4, "model-a").await.unwrap();
        let mut kept = Vec::new();
        for seed in 0..theirs + others {
            let mut memory = fact(&format!("note number {seed}"));
            if seed >= theirs {
                memory.user_id = Some("ben".into());
            }
            let id = store.insert_memory(&memory, &[]).await.unwrap();
            if seed >= theirs {
                kept.push((id, seed));
            }
        }
        index_all(&store, 4).await;
        let erased = store.erase_user("ana").await.unwrap().erased;
        assert_eq!(erased.memories_removed, theirs as u64);
        let report = store.check_integrity().await.unwrap();
        assert_eq!(report.problems(), Vec::<String>::new(), "{report:?}");
        assert_eq!(
            (report.active, report.vectors),
            (others as i64, Some(others as i64))
        );
        // Each kept memory is still its own nearest neighbour, with its own vector.
        for (id, seed) in kept {
            let request = SearchRequest {
                user_id: Some("ben".into()),
                limit: 1,
                ..SearchRequest::default()
            };
            let nearest = store
                .search_vector(&request, &pseudo_vector(seed as u64, 4), 1, -1.0)
                .await
                .unwrap();
            assert_eq!(
                nearest[0].0,
                id,
                "{theirs} of {}: {nearest:?}",
                theirs + others
            );
            assert!(nearest[0].1 > 0.999, "{nearest:?}");
        }
    }
}

/// A forget updates the in-memory vector mirror in place: the next search does not reload it
/// from the table (which costs 0.5 s per 100k vectors). A row slipped into the table behind the
/// store's back, without a new generation, shows whether a reload happened.
#[tokio::test]
async fn a_forget_keeps_the_vector_mirror_without_reloading_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("memory.db")).await;
    store.ensure_vector_index(4, "model-a").await.unwrap();
    let mut ids = Vec::new();
    for seed in 0..5 {
        ids.push(
            store
                .insert_memory(&fact(&format!("note number {seed}")), &[])
                .await
                .unwrap(),
        );
    }
    index_all(&store, 4).await;
    assert_eq!(store.mirror_size().await.unwrap().memory_rows, 5);
    crate::store::purge(&store, &ids[..1]).await.unwrap();
    sqlx::query(
        "INSERT INTO vec_memories (memory_id, embedding, user_id, kind) VALUES ('stray', ?, 'ana', 'fact')",
    )
    .bind(vec![0_u8; 16])
    .execute(store.pool())
    .await
    .unwrap();
    assert_eq!(
        store.mirror_size().await.unwrap().memory_rows,
        4,
        "the mirror was reloaded"
    );
    store.erase_user("ana").await.unwrap();
    assert_eq!(store.mirror_size().await.unwrap().memory_rows, 0);
}
