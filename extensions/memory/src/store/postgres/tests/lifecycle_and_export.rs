//! Removal, expiry, corrections and the integrity check on PostgreSQL, on the fixture of
//! `store/conformance` (which checks the rest of a fact's lifecycle on both stores), and the
//! export tests (`cross_backend`): what each call leaves in every table, including what an export
//! does not show (vectors, the queue, the embedding cache).

mod cross_backend;

use std::collections::BTreeMap;

use chrono::DateTime;
use sqlx::PgPool;

use super::open_fresh;
use crate::error::MemoryError;
use crate::store::backend::*;
use crate::store::conformance::lifecycle::{at, fill, BASE, DAY};
use crate::store::conformance::{person_in as person, FreshDatabase, SqliteFile};
use crate::store::{content_hash, MemoryStore, NewMemory};
use crate::types::{ListRequest, MemoryForgotten, MemoryKind};

/// A SQLite store in a new directory (kept alive by the returned guard).
async fn open_sqlite() -> (SqliteFile, MemoryStore) {
    let file = SqliteFile::new();
    let store = file.open().await;
    (file, store)
}

/// A vector for each memory (with its owner and kind) and a cached vector for each text.
async fn add_vectors(pool: &PgPool) {
    sqlx::query(
        "INSERT INTO memory_vectors (memory_id, embedding, user_id, kind) \
         SELECT id, '[1,0,0]', COALESCE(user_id, ''), kind FROM memories",
    )
    .execute(pool)
    .await
    .unwrap();
    let contents: Vec<String> = sqlx::query_scalar("SELECT content FROM memories")
        .fetch_all(pool)
        .await
        .unwrap();
    for content in contents {
        sqlx::query(
            "INSERT INTO embedding_cache (content_hash, model_id, vector, created_at) \
             VALUES ($1, 'm', $2, 0)",
        )
        .bind(content_hash(&content))
        .bind(vec![0_u8; 12])
        .execute(pool)
        .await
        .unwrap();
    }
}

async fn count(pool: &PgPool, sql: &str, bind: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(bind)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Every row of `user` (or tied to their memories and entities), table by table.
async fn rows_of(pool: &PgPool, user: &str) -> BTreeMap<&'static str, i64> {
    let mut found = BTreeMap::new();
    for (table, sql) in [
        (
            "memories",
            "SELECT COUNT(*) FROM memories WHERE user_id = $1",
        ),
        (
            "entities",
            "SELECT COUNT(*) FROM entities WHERE owner_id = $1",
        ),
        (
            "links",
            "SELECT COUNT(*) FROM memory_entities WHERE memory_id IN \
             (SELECT id FROM memories WHERE user_id = $1) \
             OR entity_id IN (SELECT id FROM entities WHERE owner_id = $1)",
        ),
        (
            "sessions",
            "SELECT COUNT(*) FROM sessions_consolidations WHERE user_id = $1",
        ),
        (
            "events",
            "SELECT COUNT(*) FROM ingested_events WHERE user_id = $1 \
             OR memory_id IN (SELECT id FROM memories WHERE user_id = $1)",
        ),
        (
            "vectors",
            "SELECT COUNT(*) FROM memory_vectors WHERE user_id = $1",
        ),
        (
            "queue",
            "SELECT COUNT(*) FROM embedding_queue WHERE memory_id IN \
             (SELECT id FROM memories WHERE user_id = $1)",
        ),
    ] {
        found.insert(table, count(pool, sql, user).await);
    }
    found
}

async fn cached(pool: &PgPool, text: &str) -> i64 {
    count(
        pool,
        "SELECT COUNT(*) FROM embedding_cache WHERE content_hash = $1",
        &content_hash(text),
    )
    .await
}

#[tokio::test]
async fn purge_removes_rows_links_vectors_queue_and_cache_and_keeps_event_ids() {
    let store = open_fresh().await;
    fill(&store).await;
    add_vectors(store.pool()).await;
    let ids = ["ep_a1", "missing", "fact_a1", "ep_a1"].map(String::from);
    let removed = crate::store::purge(&store, &ids).await.unwrap();
    assert_eq!(
        removed,
        [
            MemoryForgotten {
                memory_id: "ep_a1".into(),
                kind: MemoryKind::Episode,
                content: "I like green tea".into(),
                user_id: Some("ana".into()),
                chat_id: None,
                session_id: Some("s1".into()),
            },
            MemoryForgotten {
                memory_id: "fact_a1".into(),
                kind: MemoryKind::Fact,
                content: "Ana likes green tea".into(),
                user_id: Some("ana".into()),
                chat_id: None,
                session_id: Some("s1".into()),
            },
        ]
    );
    let pool = store.pool();
    for id in ["ep_a1", "fact_a1"] {
        for sql in [
            "SELECT COUNT(*) FROM memories WHERE id = $1",
            "SELECT COUNT(*) FROM memory_entities WHERE memory_id = $1",
            "SELECT COUNT(*) FROM memory_vectors WHERE memory_id = $1",
            "SELECT COUNT(*) FROM embedding_queue WHERE memory_id = $1",
        ] {
            assert_eq!(count(pool, sql, id).await, 0, "{sql} for {id}");
        }
    }
    assert_eq!(cached(pool, "I like green tea").await, 0);
    assert_eq!(cached(pool, "Ana likes green tea").await, 0);
    assert_eq!(cached(pool, "Ana works at Acme").await, 1);
    // The events stay, so that replaying them does not bring the memory back; the entity no
    // memory mentions any more goes with them (forgetting follows lineage).
    assert_eq!(
        count(
            pool,
            "SELECT COUNT(*) FROM ingested_events WHERE memory_id = $1",
            "ep_a1"
        )
        .await,
        2
    );
    assert_eq!(
        count(
            pool,
            "SELECT COUNT(*) FROM entities WHERE id = $1",
            "ent_tea"
        )
        .await,
        0
    );
    assert_eq!(
        count(pool, "SELECT COUNT(*) FROM memories WHERE $1 = ''", "").await,
        7
    );
    assert!(crate::store::purge(&store, &[]).await.unwrap().is_empty());
    assert!(crate::store::purge(&store, &ids).await.unwrap().is_empty());
}

#[tokio::test]
async fn erase_user_removes_everything_of_one_user_and_nothing_of_another() {
    let store = open_fresh().await;
    fill(&store).await;
    add_vectors(store.pool()).await;
    let pool = store.pool();
    let bob_before = rows_of(pool, "bob").await;
    assert!(bob_before.values().all(|rows| *rows > 0), "{bob_before:?}");
    // The planner's statistics name her until the erasure analyses the tables again.
    let in_statistics = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM pg_stats WHERE tablename = 'memories' AND attname = 'user_id' \
             AND most_common_vals::text LIKE '%ana%'",
        )
        .fetch_one(pool)
        .await
        .unwrap()
    };
    sqlx::query("ANALYZE memories").execute(pool).await.unwrap();
    assert_eq!(in_statistics().await, 1);
    let erased = store.erase_user("ana").await.unwrap().erased;
    assert_eq!(in_statistics().await, 0);
    assert_eq!(erased.user_id, "ana");
    assert_eq!(erased.session_ids, ["s1", "s9"]);
    assert_eq!(erased.memories_removed, 5);
    let ana_after = rows_of(pool, "ana").await;
    assert!(ana_after.values().all(|rows| *rows == 0), "{ana_after:?}");
    // The legacy event ('' user) pointing at one of hers went too.
    assert_eq!(
        count(
            pool,
            "SELECT COUNT(*) FROM ingested_events WHERE user_id = $1",
            ""
        )
        .await,
        0
    );
    for text in [
        "Ana likes green tea",
        "I like green tea",
        "Ana lives in Lisbon",
    ] {
        assert_eq!(cached(pool, text).await, 0, "{text}");
    }
    assert_eq!(rows_of(pool, "bob").await, bob_before);
    for text in ["Bob plays chess", "Hello there", "Everyone likes tea"] {
        assert_eq!(cached(pool, text).await, 1, "{text}");
    }
    assert_eq!(
        count(pool, "SELECT COUNT(*) FROM memories WHERE id = $1", "ref_x").await,
        1
    );
    let again = store.erase_user("ana").await.unwrap().erased;
    assert_eq!((again.memories_removed, again.session_ids.len()), (0, 0));
}

#[tokio::test]
async fn expire_retires_expired_memories_and_drops_their_vectors() {
    let store = open_fresh().await;
    fill(&store).await;
    add_vectors(store.pool()).await;
    assert_eq!(store.expire(at(BASE + 2 * DAY)).await.unwrap(), 0);
    assert_eq!(store.expire(at(BASE + 3 * DAY)).await.unwrap(), 1);
    let pool = store.pool();
    let valid_until: Option<i64> =
        sqlx::query_scalar("SELECT valid_until FROM memories WHERE id = 'fact_a4'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(valid_until, Some(BASE + 3 * DAY));
    for sql in [
        "SELECT COUNT(*) FROM memory_vectors WHERE memory_id = $1",
        "SELECT COUNT(*) FROM embedding_queue WHERE memory_id = $1",
    ] {
        assert_eq!(count(pool, sql, "fact_a4").await, 0, "{sql}");
    }
    assert_eq!(store.expire(at(BASE + 9 * DAY)).await.unwrap(), 0);
}

fn new_memory(kind: MemoryKind, content: &str, user: Option<&str>, seconds: i64) -> NewMemory {
    NewMemory {
        kind,
        content: content.into(),
        session_id: Some("s1".into()),
        user_id: user.map(str::to_owned),
        chat_id: None,
        event_time: at(seconds),
        created_at: at(seconds),
        source_role: (kind == MemoryKind::Episode).then(|| "user".to_owned()),
        source_ids: Vec::new(),
        tags: vec!["tag".into()],
        attributes: serde_json::Map::new(),
        decay_rate: 0.1,
        confidence: 0.75,
        memory_type: None,
        expires_at: None,
        shared: false,
        subject_ids: Vec::new(),
        quarantine: None,
        origin: if kind == MemoryKind::Episode {
            crate::types::Origin::User
        } else {
            crate::types::Origin::Told
        },
        valid_from: None,
    }
}

#[tokio::test]
async fn the_integrity_check_counts_what_sqlite_counts() {
    let store = open_fresh().await;
    fill(&store).await;
    let report = store.check_integrity().await.unwrap();
    assert_eq!(report.memories, 9);
    assert_eq!(report.active, 9);
    assert_eq!(report.vectors, None);
    assert_eq!(report.queued, 9);
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    add_vectors(store.pool()).await;
    sqlx::query("DELETE FROM embedding_queue")
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query("DELETE FROM memory_vectors WHERE memory_id IN ('ep_b1', 'fact_b2')")
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query("UPDATE memories SET valid_until = 1 WHERE id = 'fact_a1'")
        .execute(store.pool())
        .await
        .unwrap();
    crate::store::purge(&store, &["ep_a1".to_owned(), "ep_b1".to_owned()])
        .await
        .unwrap();
    let report = store.check_integrity().await.unwrap();
    assert_eq!(report.database, Vec::<String>::new());
    assert_eq!(report.full_text, None);
    assert_eq!(report.memories, 7);
    assert_eq!(report.active, 6);
    assert_eq!(report.vectors, Some(6));
    assert_eq!(report.orphan_vectors, 1);
    assert_eq!(report.unindexed, 1);
    assert_eq!(report.queued, 0);
    assert_eq!(report.forgotten_events, 3);
    assert_eq!(report.problems().len(), 2);
    store.close().await;
    assert!(store.pool().is_closed());
}

#[tokio::test]
async fn a_correction_retires_the_old_fact_and_names_it() {
    let store = open_fresh().await;
    fill(&store).await;
    add_vectors(store.pool()).await;
    let replacement = new_memory(
        MemoryKind::Fact,
        "Ana likes black tea",
        Some("ana"),
        BASE + DAY,
    );
    for (id, user) in [("fact_a1", Some("bob")), ("ep_a1", None), ("missing", None)] {
        let error = store
            .correct(id, user, &replacement, &[])
            .await
            .unwrap_err();
        assert!(matches!(error, MemoryError::NotFound(_)), "{id}: {error}");
    }
    let new_id = store
        .correct("fact_a1", Some("ana"), &replacement, &[])
        .await
        .unwrap();
    let pool = store.pool();
    let old: (Option<i64>, Option<String>) =
        sqlx::query_as("SELECT valid_until, superseded_by_id FROM memories WHERE id = 'fact_a1'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(old, (Some(BASE + DAY), Some(new_id.clone())));
    for sql in [
        "SELECT COUNT(*) FROM memory_vectors WHERE memory_id = $1",
        "SELECT COUNT(*) FROM embedding_queue WHERE memory_id = $1",
    ] {
        assert_eq!(count(pool, sql, "fact_a1").await, 0, "{sql}");
    }
    let new: (String, String, String) =
        sqlx::query_as("SELECT content, source_ids, attributes FROM memories WHERE id = $1")
            .bind(&new_id)
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(new.0, "Ana likes black tea");
    assert_eq!(new.1, r#"["fact_a1"]"#);
    assert_eq!(new.2, r#"{"corrects":"fact_a1"}"#);
    assert_eq!(
        count(
            pool,
            "SELECT COUNT(*) FROM embedding_queue WHERE memory_id = $1",
            &new_id
        )
        .await,
        1
    );
    // A fact is corrected once.
    let error = store
        .correct("fact_a1", Some("ana"), &replacement, &[])
        .await
        .unwrap_err();
    assert!(matches!(error, MemoryError::NotFound(_)), "{error}");
}
