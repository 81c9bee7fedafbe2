//! The search side of the PostgreSQL store on a real server: reading memories through a
//! request's filters, full text, vectors, and the indexer's queue. Rows are written with plain
//! SQL, so that these tests stand on the reading side alone.

use std::collections::HashSet;
use std::time::Instant;

use chrono::{DateTime, Utc};

use std::time::Duration;

use super::super::vectors::vector_text;
use super::open_fresh;
use crate::store::backend::{FullTextIndex, IndexQueue, MemoryRecords, VectorIndex};
use crate::store::postgres::PostgresOptions;
use crate::store::postgres::PostgresStore;
use crate::store::rows::{from_ts, ts};
use crate::store::{IndexItem, VectorStatus};
use crate::types::{ListRequest, MemoryKind, SearchRequest};
use crate::vector_index::tests::pseudo;

/// A memory row; what a test does not set keeps its default.
#[derive(Clone)]
struct Row {
    id: &'static str,
    kind: &'static str,
    content: &'static str,
    user: Option<&'static str>,
    chat: Option<&'static str>,
    session: Option<&'static str>,
    event_time: i64,
}

fn row(id: &'static str, content: &'static str) -> Row {
    Row {
        id,
        kind: "fact",
        content,
        user: Some("ana"),
        chat: None,
        session: None,
        event_time: 1_000,
    }
}

async fn insert(store: &PostgresStore, row: &Row) {
    sqlx::query(
        "INSERT INTO memories (id, kind, content, user_id, chat_id, session_id, event_time, \
         created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
    )
    .bind(row.id)
    .bind(row.kind)
    .bind(row.content)
    .bind(row.user)
    .bind(row.chat)
    .bind(row.session)
    .bind(row.event_time)
    .execute(store.pool())
    .await
    .unwrap();
}

async fn sql(store: &PostgresStore, statement: &str) {
    sqlx::query(statement).execute(store.pool()).await.unwrap();
}

fn at(seconds: i64) -> DateTime<Utc> {
    from_ts(seconds)
}

fn ana() -> SearchRequest {
    SearchRequest {
        user_id: Some("ana".into()),
        ..SearchRequest::default()
    }
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

async fn visible(store: &PostgresStore, ids: &[&str], request: &SearchRequest) -> Vec<String> {
    let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
    let loaded = store.load_filtered(&ids, request).await.unwrap();
    let keys = store.rank_keys(&ids, request, false).await.unwrap();
    let loaded = sorted(loaded.into_keys().collect());
    assert_eq!(loaded, sorted(keys.into_keys().collect()), "same filters");
    loaded
}

#[tokio::test]
async fn get_load_and_rank_keys_with_session_neighbours() {
    let store = open_fresh().await;
    let turn = |id, time| Row {
        kind: "episode",
        session: Some("s1"),
        event_time: time,
        ..row(id, "a turn")
    };
    for memory in [
        turn("ep_1", 10),
        turn("ep_2", 20),
        turn("ep_3b", 20),
        turn("ep_4", 30),
        Row {
            chat: Some("c1"),
            ..turn("ep_other_chat", 25)
        },
        Row {
            user: Some("bo"),
            ..turn("ep_other_user", 25)
        },
        row("fact_1", "a fact"),
    ] {
        insert(&store, &memory).await;
    }
    let memory = store.get("ep_2").await.unwrap().unwrap();
    assert_eq!(memory.kind, MemoryKind::Episode);
    assert_eq!(memory.event_time, at(20));
    assert_eq!(memory.user_id.as_deref(), Some("ana"));
    assert!(store.get("nope").await.unwrap().is_none());

    let ids: Vec<String> = ["ep_1", "ep_2", "ep_3b", "ep_4", "fact_1", "nope"]
        .map(String::from)
        .to_vec();
    let loaded = store.load_filtered(&ids, &ana()).await.unwrap();
    assert_eq!(loaded.len(), 5);
    assert_eq!(loaded["fact_1"].content, "a fact");

    let keys = store.rank_keys(&ids, &ana(), true).await.unwrap();
    let neighbours = |id: &str| (keys[id].previous.clone(), keys[id].next.clone());
    let some = |id: &str| Some(id.to_owned());
    // Equal event times fall back to creation time, then id.
    assert_eq!(neighbours("ep_1"), (None, some("ep_2")));
    assert_eq!(neighbours("ep_2"), (some("ep_1"), some("ep_3b")));
    assert_eq!(neighbours("ep_3b"), (some("ep_2"), some("ep_4")));
    assert_eq!(neighbours("ep_4"), (some("ep_3b"), None));
    assert_eq!(neighbours("fact_1"), (None, None));
    assert_eq!(keys["ep_4"].event_time, 30);
    assert_eq!(keys["ep_4"].confidence, 1.0);
    let plain = store.rank_keys(&ids, &ana(), false).await.unwrap();
    assert_eq!(plain["ep_2"].previous, None);
    assert!(store.rank_keys(&[], &ana(), true).await.unwrap().is_empty());
}

#[tokio::test]
async fn requests_filter_by_scope_kind_tags_time_and_state() {
    let store = open_fresh().await;
    for memory in [
        row("personal", "p"),
        Row {
            chat: Some("c1"),
            ..row("in_chat", "c")
        },
        Row {
            chat: Some("c2"),
            ..row("other_chat", "c")
        },
        Row {
            user: Some("bo"),
            chat: Some("c1"),
            ..row("bo_shared", "s")
        },
        Row {
            user: Some("bo"),
            chat: Some("c1"),
            ..row("bo_private", "s")
        },
        Row {
            user: Some("bo"),
            ..row("bo_personal", "s")
        },
        Row {
            kind: "episode",
            session: Some("s9"),
            event_time: 500,
            ..row("episode", "e")
        },
        row("tagged", "t"),
        row("expiring", "x"),
        row("faded", "f"),
        row("deleted", "d"),
        row("superseded", "s"),
    ] {
        insert(&store, &memory).await;
    }
    sql(
        &store,
        "UPDATE memories SET shared = 1 WHERE id = 'bo_shared'",
    )
    .await;
    sql(
        &store,
        r#"UPDATE memories SET tags = '["work", "urgent"]' WHERE id = 'tagged'"#,
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET expires_at = 2000 WHERE id = 'expiring'",
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET faded_at = 900 WHERE id = 'faded'",
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET valid_until = 900 WHERE id = 'deleted'",
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET superseded_at = 900 WHERE id = 'superseded'",
    )
    .await;
    let all = [
        "personal",
        "in_chat",
        "other_chat",
        "bo_shared",
        "bo_private",
        "bo_personal",
        "episode",
        "tagged",
        "expiring",
        "faded",
        "deleted",
        "superseded",
    ];
    let personal = ["episode", "expiring", "faded", "personal", "tagged"];
    assert_eq!(visible(&store, &all, &ana()).await, personal);
    let in_chat = SearchRequest {
        chat_id: Some("c1".into()),
        ..ana()
    };
    let mut expected: Vec<&str> = personal.to_vec();
    expected.extend(["in_chat", "bo_shared"]);
    expected.sort();
    assert_eq!(visible(&store, &all, &in_chat).await, expected);
    let everyone = SearchRequest::default();
    assert_eq!(visible(&store, &all, &everyone).await.len(), 10);
    let with_gone = SearchRequest {
        include_deleted: true,
        include_superseded: true,
        ..ana()
    };
    assert_eq!(visible(&store, &all, &with_gone).await.len(), 7);

    let episodes = SearchRequest {
        kinds: vec![MemoryKind::Episode],
        ..ana()
    };
    assert_eq!(visible(&store, &all, &episodes).await, ["episode"]);
    let conversation = SearchRequest {
        memory_type: Some("conversation".into()),
        ..ana()
    };
    assert_eq!(visible(&store, &all, &conversation).await, ["episode"]);
    let not_session = SearchRequest {
        exclude_session: Some("s9".into()),
        ..ana()
    };
    assert!(!visible(&store, &all, &not_session)
        .await
        .contains(&"episode".to_owned()));
    let tags = SearchRequest {
        tags: vec!["urgent".into(), "work".into()],
        ..ana()
    };
    assert_eq!(visible(&store, &all, &tags).await, ["tagged"]);
    let other_tag = SearchRequest {
        tags: vec!["work".into(), "home".into()],
        ..ana()
    };
    assert!(visible(&store, &all, &other_tag).await.is_empty());
    let later = SearchRequest {
        at: Some(at(3000)),
        ..ana()
    };
    assert!(!visible(&store, &all, &later)
        .await
        .contains(&"expiring".to_owned()));
    let sooner = SearchRequest {
        at: Some(at(1500)),
        ..ana()
    };
    assert!(visible(&store, &all, &sooner)
        .await
        .contains(&"expiring".to_owned()));
    let unfaded = SearchRequest {
        exclude_faded: true,
        ..ana()
    };
    assert!(!visible(&store, &all, &unfaded)
        .await
        .contains(&"faded".to_owned()));
    let window = SearchRequest {
        since: Some(at(400)),
        until: Some(at(600)),
        ..ana()
    };
    assert_eq!(visible(&store, &all, &window).await, ["episode"]);
    sql(
        &store,
        "INSERT INTO entities (id, canonical_name, type) VALUES ('ent_1', 'Lisbon', 'place')",
    )
    .await;
    sql(
        &store,
        "INSERT INTO memory_entities (memory_id, entity_id) VALUES ('personal', 'ent_1')",
    )
    .await;
    let about = SearchRequest {
        about: vec!["ent_1".into()],
        ..ana()
    };
    assert_eq!(visible(&store, &all, &about).await, ["personal"]);
}

#[tokio::test]
async fn touch_counts_an_access_and_brings_a_faded_fact_back() {
    let store = open_fresh().await;
    insert(&store, &row("fresh", "f")).await;
    insert(&store, &row("faded", "f")).await;
    insert(
        &store,
        &Row {
            user: None,
            ..row("nobodys", "n")
        },
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET faded_at = 5, confidence = 0.2 WHERE id = 'faded'",
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET confidence = 0.3 WHERE id = 'fresh'",
    )
    .await;
    let ids = ["fresh", "faded", "nobodys", "unknown"].map(String::from);
    store.touch(&ids, at(7_000)).await.unwrap();
    store.touch(&ids[..1], at(8_000)).await.unwrap();
    let fresh = store.get("fresh").await.unwrap().unwrap();
    assert_eq!(fresh.access_count, 2);
    assert_eq!(fresh.last_accessed, Some(at(8_000)));
    assert_eq!(
        fresh.confidence, 0.3,
        "only a faded fact's confidence rises"
    );
    let faded = store.get("faded").await.unwrap().unwrap();
    assert_eq!((faded.access_count, faded.confidence), (1, 0.5));
    assert_eq!(faded.faded_at, None);
    assert_eq!(store.get("nobodys").await.unwrap().unwrap().access_count, 1);
    store.touch(&[], at(9_000)).await.unwrap();
}

#[tokio::test]
async fn stats_count_active_memories_entities_and_the_queue() {
    let store = open_fresh().await;
    for memory in [
        row("f1", "x"),
        row("f2", "x"),
        Row {
            kind: "episode",
            event_time: 3_000,
            ..row("e1", "x")
        },
        Row {
            kind: "reflection",
            user: Some("bo"),
            event_time: 5_000,
            ..row("r1", "x")
        },
        row("gone", "x"),
    ] {
        insert(&store, &memory).await;
    }
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'gone'",
    )
    .await;
    sql(
        &store,
        "INSERT INTO entities (id, owner_id, canonical_name, type) VALUES \
         ('ent_a', 'ana', 'Lisbon', 'place'), ('ent_b', 'bo', 'Porto', 'place')",
    )
    .await;
    sql(
        &store,
        "INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES ('f1', 1), ('r1', 1)",
    )
    .await;
    let all = store.stats(None).await.unwrap();
    assert_eq!(
        (all.facts, all.episodes, all.reflections, all.entities),
        (2, 1, 1, 2)
    );
    assert_eq!(all.pending_index, 2);
    assert_eq!(all.latest, Some(at(5_000)));
    let ana = store.stats(Some("ana")).await.unwrap();
    assert_eq!(
        (ana.facts, ana.episodes, ana.reflections, ana.entities),
        (2, 1, 0, 1)
    );
    assert_eq!(ana.pending_index, 1);
    assert_eq!(ana.latest, Some(at(3_000)));
}

#[tokio::test]
async fn listings_page_newest_first() {
    let store = open_fresh().await;
    for n in 0..7 {
        let id: &'static str = Box::leak(format!("m{n}").into_boxed_str());
        insert(
            &store,
            &Row {
                event_time: 100 + n,
                chat: (n % 2 == 1).then_some("c1"),
                ..row(id, "x")
            },
        )
        .await;
    }
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'm6'",
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET expires_at = 50 WHERE id = 'm5'",
    )
    .await;
    let ids = |memories: Vec<crate::types::Memory>| -> Vec<String> {
        memories.into_iter().map(|memory| memory.id).collect()
    };
    let mut request = ListRequest::active("ana", 2);
    let first = store.list_memories(&request, at(60)).await.unwrap();
    assert_eq!(ids(first), ["m4", "m3"]);
    request.offset = 2;
    assert_eq!(
        ids(store.list_memories(&request, at(60)).await.unwrap()),
        ["m2", "m1"]
    );
    request.offset = 0;
    request.limit = 10;
    request.include_inactive = true;
    assert_eq!(
        store.list_memories(&request, at(60)).await.unwrap().len(),
        7
    );
    request.include_inactive = false;
    request.chat_id = Some("c1".into());
    assert_eq!(
        ids(store.list_memories(&request, at(40)).await.unwrap()),
        ["m5", "m3", "m1"]
    );
    request.kinds = vec![MemoryKind::Episode];
    assert!(store
        .list_memories(&request, at(40))
        .await
        .unwrap()
        .is_empty());

    let recent = store.recent_memories(Some("ana"), at(103), 10).await;
    assert_eq!(ids(recent.unwrap()), ["m5", "m4", "m3"]);
}

#[tokio::test]
async fn context_values_reflections_and_enrichment_candidates() {
    let store = open_fresh().await;
    for (id, chat, created) in [
        ("ctx_personal", None, 10),
        ("ctx_chat", Some("c1"), 5),
        ("ctx_expired", Some("c2"), 20),
    ] {
        insert(
            &store,
            &Row {
                chat,
                event_time: created,
                ..row(id, "mood")
            },
        )
        .await;
    }
    sql(
        &store,
        r#"UPDATE memories SET memory_type = 'context', attributes = '{"key": "mood"}'"#,
    )
    .await;
    sql(
        &store,
        "UPDATE memories SET expires_at = 100 WHERE id = 'ctx_expired'",
    )
    .await;
    let value = |chat: Option<&'static str>, key: &'static str, now: i64| {
        let store = &store;
        async move {
            store
                .context_value("ana", chat, key, at(now))
                .await
                .unwrap()
                .map(|memory| memory.id)
        }
    };
    assert_eq!(
        value(Some("c1"), "mood", 50).await.as_deref(),
        Some("ctx_chat")
    );
    assert_eq!(
        value(None, "mood", 50).await.as_deref(),
        Some("ctx_personal")
    );
    assert_eq!(
        value(Some("c2"), "mood", 50).await.as_deref(),
        Some("ctx_expired")
    );
    assert_eq!(
        value(Some("c2"), "mood", 150).await.as_deref(),
        Some("ctx_personal")
    );
    assert_eq!(value(Some("c1"), "other", 50).await, None);

    for (id, user, chat, time) in [
        ("ref_old", Some("ana"), None, 10),
        ("ref_new", Some("ana"), None, 20),
        ("ref_chat", Some("ana"), Some("c1"), 30),
        ("ref_nobody", None, None, 15),
    ] {
        insert(
            &store,
            &Row {
                kind: "reflection",
                user,
                chat,
                event_time: time,
                ..row(id, "r")
            },
        )
        .await;
    }
    let latest = |user, chat| {
        let store = &store;
        async move {
            store
                .latest_reflection(user, chat)
                .await
                .unwrap()
                .map(|memory| memory.id)
        }
    };
    assert_eq!(latest(Some("ana"), None).await.as_deref(), Some("ref_new"));
    assert_eq!(
        latest(Some("ana"), Some("c1")).await.as_deref(),
        Some("ref_chat")
    );
    assert_eq!(latest(None, None).await.as_deref(), Some("ref_nobody"));

    insert(&store, &row("plain", "x")).await;
    insert(&store, &row("enriched", "x")).await;
    insert(&store, &row("tried", "x")).await;
    sql(
        &store,
        r#"UPDATE memories SET attributes = '{"enriched_at": 5}' WHERE id = 'enriched'"#,
    )
    .await;
    sql(
        &store,
        r#"UPDATE memories SET attributes = '{"enrichment_attempts": 3}' WHERE id = 'tried'"#,
    )
    .await;
    let candidates: Vec<String> = store
        .memories_for_enrichment(&[MemoryKind::Fact], 0, 3, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|memory| memory.id)
        .collect();
    assert!(candidates.contains(&"plain".to_owned()));
    assert!(!candidates.contains(&"enriched".to_owned()));
    assert!(!candidates.contains(&"tried".to_owned()));
    assert!(!candidates.contains(&"ref_new".to_owned()), "facts only");
}

#[tokio::test]
async fn full_text_ranks_stems_and_filters() {
    let store = open_fresh().await;
    for memory in [
        row("run", "I run every morning before work"),
        row(
            "runs",
            "She runs and runs and runs along the river, running all day",
        ),
        row("coffee", "Coffee with oat milk, no sugar"),
        Row {
            user: Some("bo"),
            ..row("bo_run", "Bo will run a marathon")
        },
        row("gone", "run run run"),
        row("empty", ""),
    ] {
        insert(&store, &memory).await;
    }
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'gone'",
    )
    .await;
    // "running" is stemmed as "run" was.
    let matches = store
        .fts_best_matches("\"running\"", &ana(), 10)
        .await
        .unwrap();
    let ids: Vec<&str> = matches.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["runs", "run"], "more occurrences rank higher");
    assert!(matches.iter().all(|(_, score)| *score > 0.0));
    assert!(matches[0].1 > matches[1].1);
    let all = store
        .fts_all_matches("\"running\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(all, matches);
    // A memory with more of the query's words ranks above one with fewer.
    let both = store
        .fts_best_matches("\"coffee\" OR \"sugar\" OR \"river\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(both[0].0, "coffee");
    assert_eq!(both.len(), 2);
    // Filters: another owner's, and soft-deleted memories, are left out unless asked.
    let everyone = SearchRequest {
        include_deleted: true,
        ..SearchRequest::default()
    };
    let all_runs = store
        .fts_all_matches("\"run\"", &everyone, 10)
        .await
        .unwrap();
    assert_eq!(all_runs.len(), 4);
    assert_eq!(all_runs[0].0, "gone", "three runs in three words");
    let limited = store
        .fts_best_matches("\"run\"", &everyone, 2)
        .await
        .unwrap();
    assert_eq!(limited, all_runs[..2]);
    let bo = SearchRequest {
        user_id: Some("bo".into()),
        ..SearchRequest::default()
    };
    let bo_runs = store.fts_best_matches("\"run\"", &bo, 10).await.unwrap();
    assert_eq!(bo_runs.len(), 1);
    assert_eq!(bo_runs[0].0, "bo_run");
    // NOT, AND and phrases.
    let not = store
        .fts_all_matches("\"run\" NOT \"river\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(not.len(), 1);
    assert_eq!(not[0].0, "run");
    assert!(not[0].1 > 0.0);
    let phrase = store
        .fts_all_matches("\"oat milk\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(phrase.len(), 1);
    assert!(store
        .fts_all_matches("\"milk oat\"", &ana(), 10)
        .await
        .unwrap()
        .is_empty());
    // Counts: every memory is a document; stopwords and empty queries match nothing.
    assert_eq!(store.fts_document_count().await.unwrap(), 6);
    assert_eq!(store.fts_match_count("\"running\"").await.unwrap(), 4);
    assert_eq!(store.fts_match_count("\"the\"").await.unwrap(), 0);
    assert_eq!(store.fts_match_count("").await.unwrap(), 0);
    assert!(store
        .fts_best_matches("", &ana(), 5)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .fts_all_matches("\"'\"", &ana(), 5)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn full_text_finds_the_best_few_among_many() {
    let store = open_fresh().await;
    sql(
        &store,
        "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
         SELECT 'm' || n, 'fact', 'note ' || n || CASE WHEN n % 100 = 0 THEN ' garden garden' \
         ELSE ' garden' END, CASE WHEN n % 2 = 0 THEN 'ana' ELSE 'bo' END, n, n \
         FROM generate_series(1, 3000) n",
    )
    .await;
    let best = store
        .fts_best_matches("\"gardening\"", &ana(), 5)
        .await
        .unwrap();
    // The 30 memories with the word twice come first, newest first among equals.
    assert_eq!(best.len(), 5);
    assert_eq!(best[0].0, "m3000");
    assert_eq!(best[1].0, "m2900");
    let all = store
        .fts_all_matches("\"gardening\"", &ana(), 5)
        .await
        .unwrap();
    assert_eq!(best, all);
    assert_eq!(store.fts_match_count("\"garden\"").await.unwrap(), 3000);
}

/// Stores memories with their vectors: (id, owner, kind, vector).
async fn insert_vectors(store: &PostgresStore, rows: &[(String, String, &str, Vec<f32>)]) {
    let ids: Vec<String> = rows.iter().map(|row| row.0.clone()).collect();
    let users: Vec<String> = rows.iter().map(|row| row.1.clone()).collect();
    let kinds: Vec<String> = rows.iter().map(|row| row.2.to_owned()).collect();
    let vectors: Vec<String> = rows.iter().map(|row| vector_text(&row.3)).collect();
    sqlx::query(
        "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
         SELECT id, kind, 'a memory', user_id, 1, 1 \
         FROM unnest($1::text[], $2::text[], $3::text[]) AS r (id, user_id, kind)",
    )
    .bind(&ids)
    .bind(&users)
    .bind(&kinds)
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO memory_vectors (memory_id, embedding, user_id, kind) \
         SELECT id, embedding::vector, user_id, kind \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r (id, embedding, user_id, kind)",
    )
    .bind(&ids)
    .bind(&vectors)
    .bind(&users)
    .bind(&kinds)
    .execute(store.pool())
    .await
    .unwrap();
}

async fn indexes(store: &PostgresStore) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE tablename = 'memory_vectors' \
         AND indexname <> 'memory_vectors_pkey' ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap()
}

async fn count(store: &PostgresStore, query: &str) -> i64 {
    sqlx::query_scalar(query)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

fn recall(found: &[(String, f32)], exact: &[(String, f32)]) -> f64 {
    let truth: HashSet<&String> = exact.iter().map(|(id, _)| id).collect();
    let hits = found.iter().filter(|(id, _)| truth.contains(id)).count();
    hits as f64 / truth.len().max(1) as f64
}

#[tokio::test]
async fn the_vector_index_follows_the_provider() {
    let store = open_fresh().await;
    assert!(matches!(
        store.vector_status(),
        VectorStatus::Disabled { .. }
    ));
    let enabled = |dimensions, model: &str| VectorStatus::Enabled {
        dimensions,
        model_id: model.to_owned(),
    };
    assert_eq!(
        store.ensure_vector_index(4, "small").await.unwrap(),
        enabled(4, "small")
    );
    assert_eq!(store.vector_status(), enabled(4, "small"));
    assert_eq!(
        indexes(&store).await,
        ["memory_vectors_hnsw_4", "memory_vectors_user"]
    );
    assert_eq!(
        store.ensure_vector_index(4, "small").await.unwrap(),
        enabled(4, "small")
    );
    insert_vectors(
        &store,
        &[("m1".into(), "ana".into(), "fact", vec![1.0, 0.0, 0.0, 0.0])],
    )
    .await;
    sql(
        &store,
        "INSERT INTO memories (id, kind, content, user_id, event_time, created_at, valid_until) \
         VALUES ('old', 'fact', 'x', 'ana', 1, 1, 5)",
    )
    .await;
    insert(&store, &row("queued", "x")).await;
    sql(
        &store,
        "INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES ('queued', 1)",
    )
    .await;

    // Another provider: vector search is off, nothing is deleted.
    let VectorStatus::Disabled { reason } = store.ensure_vector_index(8, "large").await.unwrap()
    else {
        panic!("a mismatch disables vector search");
    };
    assert!(
        reason.contains("4-dimension") && reason.contains("`large`"),
        "{reason}"
    );
    assert!(matches!(
        store.vector_status(),
        VectorStatus::Disabled { .. }
    ));
    assert_eq!(store.mirror_size().await.unwrap(), (1, 0));
    let found = store
        .search_vector(&ana(), &[1.0, 0.0, 0.0, 0.0], 5, -1.0)
        .await
        .unwrap();
    assert!(found.is_empty());
    assert!(matches!(
        store.ensure_vector_index(4, "other").await.unwrap(),
        VectorStatus::Disabled { .. }
    ));

    // Rebuilt for the new provider: every active memory queued once, old vectors gone.
    assert_eq!(store.reset_vector_index(8, "large").await.unwrap(), 1);
    assert_eq!(store.vector_status(), enabled(8, "large"));
    assert_eq!(store.pending_index().await.unwrap(), 2);
    assert_eq!(store.mirror_size().await.unwrap(), (0, 0));
    assert_eq!(
        indexes(&store).await,
        ["memory_vectors_hnsw_8", "memory_vectors_user"]
    );
    assert_eq!(
        store.ensure_vector_index(8, "large").await.unwrap(),
        enabled(8, "large")
    );
    // A store copied from SQLite has the provider recorded but no index: it is made.
    sql(&store, "DROP INDEX memory_vectors_hnsw_8").await;
    assert_eq!(
        store.ensure_vector_index(8, "large").await.unwrap(),
        enabled(8, "large")
    );
    assert_eq!(
        indexes(&store).await,
        ["memory_vectors_hnsw_8", "memory_vectors_user"]
    );
}

/// `users` users with `per_user` random 384-dimension vectors each, each user's kinds
/// alternating.
fn random_rows(users: usize, per_user: usize) -> Vec<(String, String, &'static str, Vec<f32>)> {
    (0..users * per_user)
        .map(|n| {
            (
                format!("m{n}"),
                format!("u{}", n % users),
                if (n / users).is_multiple_of(2) {
                    "fact"
                } else {
                    "episode"
                },
                pseudo(n as u64 + 1, 384),
            )
        })
        .collect()
}

#[tokio::test]
async fn vector_search_for_one_user_among_many_finds_their_nearest() {
    let store = open_fresh().await;
    insert_vectors(&store, &random_rows(30, 100)).await;
    let started = Instant::now();
    store.ensure_vector_index(384, "test").await.unwrap();
    eprintln!("HNSW index over 3,000 vectors: {:?}", started.elapsed());
    let mut search_recall = 0.0;
    let mut kind_recall = 0.0;
    let mut hnsw_found = [0usize; 2];
    let mut deepest_recall = 0.0;
    let queries = 30;
    let started = Instant::now();
    for q in 0..queries {
        let query = pseudo(100_000 + q as u64, 384);
        let user = format!("u{q}");
        let request = SearchRequest {
            user_id: Some(user.clone()),
            ..SearchRequest::default()
        };
        let exact = store
            .nearest_exact(&query, Some(&user), None, 10)
            .await
            .unwrap();
        assert_eq!(exact.len(), 10);
        let found = store
            .search_vector(&request, &query, 10, -1.0)
            .await
            .unwrap();
        assert_eq!(found.len(), 10);
        search_recall += recall(&found, &exact);
        let facts = SearchRequest {
            kinds: vec![MemoryKind::Fact],
            ..request.clone()
        };
        let exact_facts = store
            .nearest_exact(&query, Some(&user), Some("fact"), 10)
            .await
            .unwrap();
        let found_facts = store.search_vector(&facts, &query, 10, -1.0).await.unwrap();
        kind_recall += recall(&found_facts, &exact_facts);
        // What the HNSW scan alone gives for one user among 30 (pgvector filters after it).
        for (slot, ef_search) in [100, 1_000].into_iter().enumerate() {
            let hnsw = store
                .nearest_hnsw(&query, 384, Some(&user), None, 10, ef_search)
                .await
                .unwrap();
            hnsw_found[slot] += hnsw.len();
            if ef_search == 1_000 {
                deepest_recall += recall(&hnsw, &exact);
            }
        }
    }
    let elapsed = started.elapsed();
    search_recall /= queries as f64;
    kind_recall /= queries as f64;
    eprintln!(
        "one user of 30: recall@10 {search_recall:.3}, with a kind {kind_recall:.3}; \
         HNSW scan alone finds {:.1} of 10 at ef_search 100, {:.1} at 1000 (recall {:.3}); \
         {:?} for {queries} rounds",
        hnsw_found[0] as f64 / queries as f64,
        hnsw_found[1] as f64 / queries as f64,
        deepest_recall / queries as f64,
        elapsed
    );
    assert!(search_recall >= 0.9, "recall {search_recall}");
    assert!(kind_recall >= 0.9, "recall {kind_recall}");
    assert!(
        hnsw_found[0] < 10 * queries,
        "the filtered scan falls short"
    );

    // Similarity cut-off, and the request's filters after the search.
    let query = pseudo(7, 384);
    let request = SearchRequest {
        user_id: Some("u6".into()),
        ..SearchRequest::default()
    };
    let found = store
        .search_vector(&request, &query, 10, 0.99)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "only itself");
    assert_eq!(found[0].0, "m6");
    assert!((found[0].1 - 1.0).abs() < 1e-4);
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'm6'",
    )
    .await;
    let found = store
        .search_vector(&request, &query, 10, -1.0)
        .await
        .unwrap();
    assert_eq!(found.len(), 10);
    assert!(found.iter().all(|(id, _)| id != "m6"));
    assert!(store
        .search_vector(&request, &[0.5; 8], 10, -1.0)
        .await
        .is_err());
}

/// A store on a fresh database whose vector searches keep `ef_search` HNSW candidates.
async fn open_with_ef_search(ef_search: usize) -> PostgresStore {
    PostgresStore::open(&PostgresOptions {
        url: mnemo_pg_fixture::fresh_database(),
        max_connections: 4,
        lock_timeout: Duration::from_secs(10),
        ef_search,
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn without_ef_search_vector_search_is_exact() {
    let store = open_with_ef_search(0).await;
    insert_vectors(&store, &random_rows(4, 50)).await;
    store.ensure_vector_index(384, "test").await.unwrap();
    let query = pseudo(99_999, 384);
    let request = SearchRequest {
        kinds: vec![MemoryKind::Fact, MemoryKind::Episode],
        ..SearchRequest::default()
    };
    let found = store
        .search_vector(&request, &query, 10, -1.0)
        .await
        .unwrap();
    let exact = store.nearest_exact(&query, None, None, 10).await.unwrap();
    assert_eq!(found, exact);
}

#[tokio::test]
async fn approximate_search_uses_the_hnsw_index_and_exact_search_does_not() {
    // Uniform random vectors are HNSW's hardest case: 100 candidates find about two thirds of
    // the true top 10 (see the sweep below), 400 over nine tenths.
    let store = open_with_ef_search(400).await;
    let mut rows = random_rows(3, 1_000);
    // One user with most of the vectors: more than are searched exactly.
    for row in rows.iter_mut().take(2_000) {
        row.1 = "big".into();
    }
    let extra: Vec<_> = (0..4_000)
        .map(|n| {
            (
                format!("b{n}"),
                "big".to_owned(),
                "fact",
                pseudo(50_000 + n, 384),
            )
        })
        .collect();
    insert_vectors(&store, &rows).await;
    insert_vectors(&store, &extra).await;
    store.ensure_vector_index(384, "test").await.unwrap();
    let mut unfiltered = 0.0;
    let mut big = 0.0;
    let queries = 20;
    let (mut exact_time, mut approximate_time, mut big_time) = Default::default();
    for q in 0..queries {
        let query = pseudo(200_000 + q, 384);
        let started = Instant::now();
        let exact = store.nearest_exact(&query, None, None, 10).await.unwrap();
        exact_time += started.elapsed();
        let started = Instant::now();
        let approximate = store
            .nearest_approximate(&query, None, None, 10)
            .await
            .unwrap();
        approximate_time += started.elapsed();
        assert_eq!(approximate.len(), 10);
        unfiltered += recall(&approximate, &exact);
        let exact = store
            .nearest_exact(&query, Some("big"), None, 10)
            .await
            .unwrap();
        let started = Instant::now();
        let approximate = store
            .nearest_approximate(&query, Some("big"), None, 10)
            .await
            .unwrap();
        big_time += started.elapsed();
        big += recall(&approximate, &exact);
    }
    // Recall of the HNSW scan alone against how many candidates it keeps.
    let mut sweep = Vec::new();
    for ef_search in [40, 100, 200, 400] {
        let mut total = 0.0;
        for q in 0..queries {
            let query = pseudo(200_000 + q, 384);
            let exact = store.nearest_exact(&query, None, None, 10).await.unwrap();
            let found = store
                .nearest_hnsw(&query, 384, None, None, 10, ef_search)
                .await
                .unwrap();
            total += recall(&found, &exact);
        }
        sweep.push(format!(
            "ef_search {ef_search}: {:.3}",
            total / queries as f64
        ));
    }
    eprintln!(
        "HNSW recall@10 over 7,000 random vectors: {}",
        sweep.join(", ")
    );
    unfiltered /= queries as f64;
    big /= queries as f64;
    let per = |total: std::time::Duration| total / queries as u32;
    eprintln!(
        "7,000 vectors: HNSW recall@10 {unfiltered:.3} in {:?}, exact {:?}; one user with \
         6,000 of them: recall@10 {big:.3} in {:?}",
        per(approximate_time),
        per(exact_time),
        per(big_time)
    );
    assert!(unfiltered >= 0.9, "recall {unfiltered}");
    assert!(big >= 0.9, "recall {big}");

    // The plans: the indexed expression uses the HNSW index, the column does not.
    let plan = |query: String| {
        let store = &store;
        async move {
            let mut tx = store.pool().begin().await.unwrap();
            sqlx::query(&format!("EXPLAIN {query}"))
                .fetch_all(&mut *tx)
                .await
                .unwrap()
                .iter()
                .map(|row| sqlx::Row::get::<String, _>(row, 0))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let vector = vector_text(&pseudo(3, 384));
    let approximate = plan(format!(
        "SELECT memory_id FROM memory_vectors ORDER BY embedding::vector(384) <=> \
         '{vector}'::vector(384) LIMIT 10"
    ))
    .await;
    assert!(
        approximate.contains("memory_vectors_hnsw_384"),
        "{approximate}"
    );
    let exact = plan(format!(
        "SELECT memory_id FROM memory_vectors ORDER BY embedding <=> '{vector}'::vector LIMIT 10"
    ))
    .await;
    assert!(!exact.contains("hnsw"), "{exact}");
    let owner = plan(format!(
        "SELECT memory_id FROM memory_vectors WHERE user_id = 'u1' \
         ORDER BY embedding <=> '{vector}'::vector LIMIT 10"
    ))
    .await;
    assert!(owner.contains("memory_vectors_user"), "{owner}");
}

/// `count` memories of ana queued for a vector, enqueued in order.
async fn queue(store: &PostgresStore, count: i64) {
    sql(
        store,
        &format!(
            "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
             SELECT 'q' || lpad(n::text, 4, '0'), 'fact', 'text ' || n, 'ana', n, n \
             FROM generate_series(1, {count}) n"
        ),
    )
    .await;
    sql(
        store,
        &format!(
            "INSERT INTO embedding_queue (memory_id, enqueued_at) \
             SELECT 'q' || lpad(n::text, 4, '0'), n FROM generate_series(1, {count}) n"
        ),
    )
    .await;
}

fn item_ids(items: &[IndexItem]) -> Vec<String> {
    items.iter().map(|item| item.memory_id.clone()).collect()
}

#[tokio::test]
async fn a_batch_is_leased_to_one_caller_until_its_lease_runs_out() {
    let store = open_fresh().await;
    queue(&store, 10).await;
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'q0002'",
    )
    .await;
    let (first, second) = tokio::join!(store.next_index_batch(4), store.next_index_batch(4));
    let (first, second) = (item_ids(&first.unwrap()), item_ids(&second.unwrap()));
    assert_eq!(first.len(), 4);
    assert_eq!(second.len(), 4);
    let mut both: Vec<String> = first.iter().chain(&second).cloned().collect();
    both.sort();
    both.dedup();
    assert_eq!(both.len(), 8, "disjoint: {first:?} {second:?}");
    assert_eq!(both[0], "q0001", "oldest first");
    assert_eq!(both[7], "q0008");
    let rest = store.next_index_batch(10).await.unwrap();
    assert_eq!(item_ids(&rest), ["q0009", "q0010"]);
    assert!(store.next_index_batch(10).await.unwrap().is_empty());
    assert_eq!(
        store.pending_index().await.unwrap(),
        10,
        "leased, still queued"
    );
    let lease: i64 = count(&store, "SELECT MIN(claimed_until) FROM embedding_queue").await;
    let now = ts(Utc::now());
    assert!((now + 290..=now + 310).contains(&lease), "{lease} vs {now}");

    // A dead instance's lease runs out: its rows are taken again, oldest first.
    sql(
        &store,
        "UPDATE embedding_queue SET claimed_until = 5 WHERE memory_id IN ('q0002', 'q0003')",
    )
    .await;
    let again = store.next_index_batch(10).await.unwrap();
    assert_eq!(item_ids(&again), ["q0002", "q0003"]);
    assert!(!again[0].active, "soft-deleted before it was indexed");
    assert!(again[1].active);
    assert_eq!(again[1].content, "text 3");
    assert_eq!(
        (again[1].user_id.as_str(), again[1].kind.as_str()),
        ("ana", "fact")
    );
    let later = store
        .lease_index_batch(3, now + super::super::index_queue::LEASE_SECONDS + 60)
        .await
        .unwrap();
    // Past every lease, the oldest rows again.
    assert_eq!(item_ids(&later), ["q0001", "q0002", "q0003"]);
}

#[tokio::test]
async fn instances_taking_batches_at_once_embed_each_memory_once() {
    let store = std::sync::Arc::new(open_fresh().await);
    queue(&store, 200).await;
    let workers = (0..6).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut taken = Vec::new();
            loop {
                let batch = store.next_index_batch(7).await.unwrap();
                if batch.is_empty() {
                    return taken;
                }
                taken.extend(item_ids(&batch));
            }
        })
    });
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await.unwrap());
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!((total, all.len()), (200, 200));
}

#[tokio::test]
async fn stored_vectors_replace_old_ones_and_leave_the_queue() {
    let store = open_fresh().await;
    store.ensure_vector_index(3, "tiny").await.unwrap();
    queue(&store, 5).await;
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'q0004'",
    )
    .await;
    let batch = store.next_index_batch(10).await.unwrap();
    let vector = |x: f32| Some(vec![x, 1.0, 0.0]);
    let items: Vec<(IndexItem, Option<Vec<f32>>)> = batch
        .into_iter()
        .map(|item| {
            let vector = match item.memory_id.as_str() {
                "q0001" | "q0004" => vector(1.0),
                "q0002" => None,
                _ => vector(0.5),
            };
            (item, vector)
        })
        .collect();
    let mut twice = items.clone();
    twice.push((items[0].0.clone(), vector(2.0)));
    store.store_vectors(&twice).await.unwrap();
    assert_eq!(store.pending_index().await.unwrap(), 0);
    let stored: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT memory_id, embedding::text, user_id, kind FROM memory_vectors ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let stored: Vec<(&str, &str)> = stored
        .iter()
        .map(|(id, embedding, user, kind)| {
            assert_eq!((user.as_str(), kind.as_str()), ("ana", "fact"));
            (id.as_str(), embedding.as_str())
        })
        .collect();
    // No vector for the item without one, nor for the memory soft-deleted meanwhile; the last
    // vector given for a memory wins.
    assert_eq!(
        stored,
        [
            ("q0001", "[2,1,0]"),
            ("q0003", "[0.5,1,0]"),
            ("q0005", "[0.5,1,0]")
        ]
    );
    // Stored again: replaced, not duplicated.
    store
        .store_vectors(&[(items[2].0.clone(), vector(-1.0))])
        .await
        .unwrap();
    let replaced: String =
        sqlx::query_scalar("SELECT embedding::text FROM memory_vectors WHERE memory_id = 'q0003'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(replaced, "[-1,1,0]");
    assert_eq!(store.mirror_size().await.unwrap(), (3, 0));
    store.store_vectors(&[]).await.unwrap();

    // Dropping a memory's vector takes it off the queue too.
    sql(
        &store,
        "INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES ('q0003', 9)",
    )
    .await;
    let mut tx = store.pool().begin().await.unwrap();
    super::super::vectors::drop_vector(&mut tx, "q0003")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.mirror_size().await.unwrap(), (2, 0));
    assert_eq!(store.pending_index().await.unwrap(), 0);
}

#[tokio::test]
async fn the_embedding_cache_round_trips_by_model() {
    let store = open_fresh().await;
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
    let created: i64 = count(
        &store,
        "SELECT created_at FROM embedding_cache WHERE content_hash = 'h1' AND model_id = 'm'",
    )
    .await;
    assert_eq!(created, 10);
}
