//! Opening stores made by earlier versions, and opening one store from several processes at once.

use std::path::Path;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

use crate::store::backend::*;
use crate::store::{MemoryStore, StoreOptions};
use crate::types::SessionKey;

fn options() -> StoreOptions {
    StoreOptions {
        busy_timeout: Duration::from_secs(5),
        synchronous: "full".into(),
        max_connections: 2,
        vector_oversample: 8,
        wal_truncate_frames: crate::store::DEFAULT_WAL_TRUNCATE_FRAMES,
    }
}

/// One connection to the file at `path`, created if missing, with no migrations run.
async fn raw_pool(path: &Path) -> sqlx::SqlitePool {
    SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true),
        )
        .await
        .unwrap()
}

/// Builds a store at schema `up_to` by running the crate's own first migrations.
async fn store_at_schema(path: &Path, up_to: u32) -> sqlx::SqlitePool {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let old = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let version: u32 = name[..4].parse().unwrap();
        if version <= up_to {
            std::fs::copy(entry.path(), old.path().join(&name)).unwrap();
        }
    }
    let pool = raw_pool(path).await;
    sqlx::migrate::Migrator::new(old.path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    pool
}

async fn episode(pool: &sqlx::SqlitePool, id: &str, user: &str, chat: Option<&str>, text: &str) {
    sqlx::query(
        "INSERT INTO memories (id, kind, content, session_id, user_id, chat_id, event_time, created_at) \
         VALUES (?, 'episode', ?, ?, ?, ?, 1775000000, 1775000000)",
    )
    .bind(id)
    .bind(text)
    .bind(if chat.is_some() { "main" } else { "s1" })
    .bind(user)
    .bind(chat)
    .execute(pool)
    .await
    .unwrap();
}

/// A store from before sessions were keyed by user (schema 5), where alice and bob both spoke
/// in `s1` and only alice's consolidation record existed: after the upgrade alice keeps her
/// record, bob has his own, pending, and each session lists only its own user's turns.
#[tokio::test]
async fn sessions_of_a_reused_id_are_split_by_user_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let pool = store_at_schema(&path, 5).await;
    episode(&pool, "ep_a", "alice", None, "My bank PIN is 4417").await;
    episode(&pool, "ep_b", "bob", None, "I am planning a trip to Lisbon").await;
    episode(&pool, "ep_c", "alice", Some("teamA"), "Launch is Friday").await;
    sqlx::query(
        "INSERT INTO sessions_consolidations (session_id, user_id, chat_id, first_seen_at, \
         consolidated_at, attempts, closed_at) VALUES ('s1', 'alice', NULL, 1775000000, \
         1775000500, 1, 1775000400), ('main', 'alice', 'teamA', 1775000000, NULL, 2, NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = MemoryStore::open(&path, &options()).await.unwrap();
    let alice = SessionKey::new("alice", None, "s1");
    let bob = SessionKey::new("bob", None, "s1");
    let team = SessionKey::new("alice", Some("teamA".into()), "main");
    assert!(store.is_session_consolidated(&alice).await.unwrap());
    assert!(!store.is_session_consolidated(&bob).await.unwrap());
    let pending = store.pending_consolidations(None).await.unwrap();
    let keys: Vec<&SessionKey> = pending.iter().map(|pending| &pending.session).collect();
    assert_eq!(keys, vec![&team, &bob], "{pending:?}");
    let team_record = pending.iter().find(|pending| pending.session == team);
    assert_eq!(team_record.map(|pending| pending.attempts), Some(2));

    let texts = |turns: Vec<crate::Memory>| -> Vec<String> {
        turns.into_iter().map(|turn| turn.content).collect()
    };
    assert_eq!(
        texts(store.recent_turns(&bob, 10).await.unwrap()),
        vec!["I am planning a trip to Lisbon"]
    );
    assert_eq!(
        texts(store.recent_turns(&alice, 10).await.unwrap()),
        vec!["My bank PIN is 4417"]
    );
    assert_eq!(
        texts(
            store
                .episodes_for_session(&team, 0, 10)
                .await
                .unwrap()
                .episodes
        ),
        vec!["Launch is Friday"]
    );
    let at = Utc.with_ymd_and_hms(2026, 4, 1, 0, 0, 0).unwrap();
    store
        .mark_session_consolidated(&bob, &[], at)
        .await
        .unwrap();
    assert!(store.is_session_consolidated(&bob).await.unwrap());
    store.close().await;
}

/// A store from before event ids were per user (schema 6): a recorded event gets its user from
/// its memory; one whose memory was forgotten keeps the user '' (which `insert_turn` reads as
/// any user's, so that sending it again does not bring the forgotten text back).
#[tokio::test]
async fn event_ids_become_per_user_and_forgotten_ones_keep_no_user() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let pool = store_at_schema(&path, 6).await;
    episode(&pool, "ep_a", "alice", None, "Alice's turn").await;
    sqlx::query(
        "INSERT INTO ingested_events (event_id, memory_id) VALUES ('e1', 'ep_a'), ('gone', 'ep_x')",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = MemoryStore::open(&path, &options()).await.unwrap();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT user_id, event_id FROM ingested_events ORDER BY event_id")
            .fetch_all(&store.pool)
            .await
            .unwrap();
    assert_eq!(
        rows,
        vec![
            ("alice".to_owned(), "e1".to_owned()),
            (String::new(), "gone".to_owned())
        ]
    );
    store.close().await;
}

/// A store from before sentence keys (schema 11): the turns the user spoke go back on the
/// indexer's queue, for their sentence keys; other memories, and retired turns, do not.
#[tokio::test]
async fn the_users_turns_are_queued_for_their_sentence_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let pool = store_at_schema(&path, 11).await;
    episode(&pool, "ep_user", "alice", None, "I moved. I like it.").await;
    episode(&pool, "ep_agent", "alice", None, "Good to hear.").await;
    episode(&pool, "ep_old", "alice", None, "I used to live here.").await;
    sqlx::query(
        "UPDATE memories SET source_role = CASE id WHEN 'ep_agent' THEN 'assistant' ELSE 'user' END",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE memories SET valid_until = 1775000001 WHERE id = 'ep_old'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM embedding_queue")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let store = MemoryStore::open(&path, &options()).await.unwrap();
    let queued: Vec<String> = store
        .next_index_batch(10)
        .await
        .unwrap()
        .into_iter()
        .map(|item| item.memory_id)
        .collect();
    assert_eq!(queued, ["ep_user"]);
    store.close().await;
}

/// Pages in use: the file's pages less those on the free list.
/// The pages of the sentence keys' table and its indexes (other migrations' pages aside).
async fn key_pages(pool: &sqlx::SqlitePool) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM dbstat d JOIN sqlite_schema s ON s.name = d.name \
         WHERE s.tbl_name = 'memory_sentence_vectors'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Sentence keys stored at schema 12 (a WITHOUT ROWID table, where every 1.5 KB vector took an
/// overflow page) come through the move to rowid pages whole, take less than half the pages,
/// and still go when their turn is retired.
#[tokio::test]
async fn sentence_keys_move_to_rowid_pages_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let pool = store_at_schema(&path, 12).await;
    let turns = 100;
    for turn in 0..turns {
        episode(
            &pool,
            &format!("ep_{turn}"),
            "alice",
            None,
            "I moved. I like it.",
        )
        .await;
    }
    for turn in 0..turns {
        let id = format!("ep_{turn}");
        for ordinal in 0..2u8 {
            let embedding: Vec<u8> = (0..1536).map(|byte| (byte as u8) ^ ordinal).collect();
            sqlx::query(
                "INSERT INTO memory_sentence_vectors (memory_id, ordinal, user_id, kind, embedding) \
                 VALUES (?, ?, 'alice', 'episode', ?)",
            )
            .bind(&id)
            .bind(i64::from(ordinal))
            .bind(embedding)
            .execute(&pool)
            .await
            .unwrap();
        }
    }
    let before = key_pages(&pool).await;
    pool.close().await;

    let store = MemoryStore::open(&path, &options()).await.unwrap();
    store.close().await;
    let pool = raw_pool(&path).await;
    let after = key_pages(&pool).await;
    assert!(
        after * 2 < before,
        "the keys take {after} pages after the move, {before} before"
    );
    let rows: Vec<(String, i64, Vec<u8>)> = sqlx::query_as(
        "SELECT memory_id, ordinal, embedding FROM memory_sentence_vectors ORDER BY memory_id, ordinal",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), turns * 2);
    for (memory_id, ordinal, embedding) in &rows {
        let expected: Vec<u8> = (0..1536)
            .map(|byte| (byte as u8) ^ *ordinal as u8)
            .collect();
        assert_eq!(embedding, &expected, "{memory_id} sentence {ordinal}");
    }
    sqlx::query("UPDATE memories SET valid_until = 1775000001 WHERE id = 'ep_7'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM memories WHERE id = 'ep_8'")
        .execute(&pool)
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM memory_sentence_vectors WHERE memory_id IN ('ep_7', 'ep_8')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        left, 0,
        "the triggers drop a retired or removed turn's keys"
    );
    pool.close().await;
}

/// The index row ids of every memory, in the order they were stored.
async fn index_rows(pool: &sqlx::SqlitePool) -> Vec<(String, i64, i64)> {
    sqlx::query_as(
        "SELECT id, fts_rowid >> 32, fts_rowid & 4294967295 FROM memories ORDER BY rowid",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A store from before the index kept owners together (schema 18): each owner's memories get
/// a range of index row ids of their own, numbered in the order they were stored; the index
/// still finds every memory, within its owner's scope only; a new memory takes its owner's
/// next row id, and one that changes owner moves to the new owner's range.
#[tokio::test]
async fn each_owners_memories_become_one_range_of_the_text_index() {
    use crate::store::TextScope;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let pool = store_at_schema(&path, 18).await;
    episode(&pool, "ep_a1", "alice", None, "jazz on Sunday").await;
    episode(&pool, "ep_b1", "bob", None, "jazz and tea").await;
    episode(&pool, "ep_a2", "alice", Some("team"), "more jazz").await;
    pool.close().await;

    let store = MemoryStore::open(&path, &options()).await.unwrap();
    let ranges = |pairs: &[(&str, i64, i64)]| -> Vec<(String, i64, i64)> {
        pairs
            .iter()
            .map(|(id, owner, row)| ((*id).to_owned(), *owner, *row))
            .collect()
    };
    assert_eq!(
        index_rows(&store.pool).await,
        ranges(&[("ep_a1", 1, 1), ("ep_b1", 2, 1), ("ep_a2", 1, 2)])
    );
    let alice = TextScope {
        user_id: Some("alice"),
        chat_id: None,
    };
    let bob = TextScope {
        user_id: Some("bob"),
        chat_id: None,
    };
    assert_eq!(store.fts_match_count("\"jazz\"", alice).await.unwrap(), 2);
    assert_eq!(store.fts_match_count("\"jazz\"", bob).await.unwrap(), 1);
    assert_eq!(store.fts_document_count(bob).await.unwrap(), 1);
    let nobody = TextScope {
        user_id: Some("carol"),
        chat_id: None,
    };
    assert_eq!(store.fts_match_count("\"jazz\"", nobody).await.unwrap(), 0);

    episode(&store.pool, "ep_a3", "alice", None, "tea time").await;
    sqlx::query("UPDATE memories SET user_id = 'bob' WHERE id = 'ep_a1'")
        .execute(&store.pool)
        .await
        .unwrap();
    assert_eq!(
        index_rows(&store.pool).await,
        ranges(&[
            ("ep_a1", 2, 2),
            ("ep_b1", 2, 1),
            ("ep_a2", 1, 2),
            ("ep_a3", 1, 3)
        ])
    );
    store.text_statistics.clear();
    assert_eq!(store.fts_match_count("\"jazz\"", alice).await.unwrap(), 1);
    assert_eq!(store.fts_match_count("\"jazz\"", bob).await.unwrap(), 2);
    let check: Result<_, _> =
        sqlx::query("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
            .execute(&store.pool)
            .await;
    assert!(check.is_ok(), "{check:?}");
    store.close().await;
}

/// A store from before origins (schema 22): each memory gets the origin its kind and provenance
/// show, the user's turns, the agent's turns, facts drawn from turns, facts told, reflections.
#[tokio::test]
async fn earlier_memories_get_the_origin_their_kind_and_provenance_show() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let pool = store_at_schema(&path, 22).await;
    for (id, kind, role, sources) in [
        ("ep_user", "episode", Some("user"), "[]"),
        ("ep_agent", "episode", Some("assistant"), "[]"),
        ("fact_drawn", "fact", None, r#"["ep_user"]"#),
        ("fact_told", "fact", None, "[]"),
        ("fact_corrected", "fact", None, r#"["fact_told"]"#),
        ("ref_week", "reflection", None, r#"["fact_drawn"]"#),
    ] {
        sqlx::query(
            "INSERT INTO memories (id, kind, content, user_id, event_time, created_at, \
             source_role, source_ids) VALUES (?, ?, 'text', 'ana', 1775000000, 1775000000, ?, ?)",
        )
        .bind(id)
        .bind(kind)
        .bind(role)
        .bind(sources)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let store = MemoryStore::open(&path, &options()).await.unwrap();
    for (id, origin) in [
        ("ep_user", crate::types::Origin::User),
        ("ep_agent", crate::types::Origin::Agent),
        ("fact_drawn", crate::types::Origin::Inferred),
        ("fact_told", crate::types::Origin::Told),
        ("fact_corrected", crate::types::Origin::Told),
        ("ref_week", crate::types::Origin::Reflected),
    ] {
        assert_eq!(store.get(id).await.unwrap().unwrap().origin, origin, "{id}");
    }
    store.close().await;
}

/// A store from before validity (schema 23): each memory is true from its event time, a
/// superseded fact until it was superseded, a corrected one never.
#[tokio::test]
async fn earlier_memories_are_true_from_their_event_time_until_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let pool = store_at_schema(&path, 23).await;
    for (id, superseded_at, superseded_by, valid_until) in [
        ("fact_now", None, None, None),
        ("fact_moved", Some(1_775_000_500), Some("fact_now"), None),
        ("fact_wrong", None, Some("fact_now"), Some(1_775_000_900)),
    ] {
        sqlx::query(
            "INSERT INTO memories (id, kind, content, user_id, event_time, created_at, \
             superseded_at, superseded_by_id, valid_until) \
             VALUES (?, 'fact', 'text', 'ana', 1775000000, 1775000000, ?, ?, ?)",
        )
        .bind(id)
        .bind(superseded_at)
        .bind(superseded_by)
        .bind(valid_until)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let store = MemoryStore::open(&path, &options()).await.unwrap();
    let at = |seconds: i64| chrono::DateTime::from_timestamp(seconds, 0);
    for (id, valid_to) in [
        ("fact_now", None),
        ("fact_moved", at(1_775_000_500)),
        ("fact_wrong", at(1_775_000_000)),
    ] {
        let memory = store.get(id).await.unwrap().unwrap();
        assert_eq!(memory.valid_from, at(1_775_000_000), "{id}");
        assert_eq!(memory.valid_to, valid_to, "{id}");
    }
    store.close().await;
}
