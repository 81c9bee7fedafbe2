//! Reading memories: by id, through a request's filters, ranking keys with session
//! neighbours, touching, counting and listing. Rows are written with plain SQL
//! ([`insert_row`]), so that these checks stand on the reading side alone.

use super::{fact, insert_row as insert, row, Conformant, Row};
use crate::store::rows::from_ts as at;
use crate::types::{ListRequest, MemoryKind, MemoryType, SearchRequest, SessionKey};

/// Runs the statement `statement`.
async fn sql<S: Conformant>(store: &S, statement: &str) {
    super::execute(store, statement, None).await;
}

/// A search of Ana's.
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

async fn visible<S: Conformant>(store: &S, ids: &[&str], request: &SearchRequest) -> Vec<String> {
    let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
    let loaded = store.load_filtered(&ids, request).await.unwrap();
    let keys = store.rank_keys(&ids, request, false).await.unwrap();
    let loaded = sorted(loaded.into_keys().collect());
    assert_eq!(loaded, sorted(keys.into_keys().collect()), "same filters");
    loaded
}

pub(super) async fn get_load_and_rank_keys_with_session_neighbours<S: Conformant>(store: &S) {
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
        insert(store, &memory).await;
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
    assert_eq!(
        keys["ep_2"].session,
        Some(SessionKey::new("ana", None, "s1"))
    );
    assert_eq!(keys["fact_1"].session, None, "only episodes have a session");
    // An episode of nobody's is read too, in no session.
    insert(
        store,
        &Row {
            user: None,
            ..turn("ep_nobody", 40)
        },
    )
    .await;
    let anyone = store
        .rank_keys(&["ep_nobody".to_owned()], &SearchRequest::default(), false)
        .await
        .unwrap();
    assert_eq!(anyone["ep_nobody"].session, None);
    assert_eq!(keys["ep_4"].confidence, 1.0);
    let plain = store.rank_keys(&ids, &ana(), false).await.unwrap();
    assert_eq!(plain["ep_2"].previous, None);
    assert!(store.rank_keys(&[], &ana(), true).await.unwrap().is_empty());
}

pub(super) async fn requests_filter_by_scope_kind_tags_time_and_state<S: Conformant>(store: &S) {
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
        insert(store, &memory).await;
    }
    sql(
        store,
        "UPDATE memories SET shared = 1 WHERE id = 'bo_shared'",
    )
    .await;
    sql(
        store,
        r#"UPDATE memories SET tags = '["work", "urgent"]' WHERE id = 'tagged'"#,
    )
    .await;
    sql(
        store,
        "UPDATE memories SET expires_at = 2000 WHERE id = 'expiring'",
    )
    .await;
    sql(
        store,
        "UPDATE memories SET faded_at = 900 WHERE id = 'faded'",
    )
    .await;
    sql(
        store,
        "UPDATE memories SET valid_until = 900 WHERE id = 'deleted'",
    )
    .await;
    sql(
        store,
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
    assert_eq!(visible(store, &all, &ana()).await, personal);
    let in_chat = SearchRequest {
        chat_id: Some("c1".into()),
        ..ana()
    };
    let mut expected: Vec<&str> = personal.to_vec();
    expected.extend(["in_chat", "bo_shared"]);
    expected.sort();
    assert_eq!(visible(store, &all, &in_chat).await, expected);
    let everyone = SearchRequest::default();
    assert_eq!(visible(store, &all, &everyone).await.len(), 10);
    let with_gone = SearchRequest {
        include_deleted: true,
        include_superseded: true,
        ..ana()
    };
    assert_eq!(visible(store, &all, &with_gone).await.len(), 7);

    let episodes = SearchRequest {
        kinds: vec![MemoryKind::Episode],
        ..ana()
    };
    assert_eq!(visible(store, &all, &episodes).await, ["episode"]);
    let conversation = SearchRequest {
        memory_type: Some(MemoryType::Conversation),
        ..ana()
    };
    assert_eq!(visible(store, &all, &conversation).await, ["episode"]);
    let not_session = SearchRequest {
        exclude_session: Some("s9".into()),
        ..ana()
    };
    assert!(!visible(store, &all, &not_session)
        .await
        .contains(&"episode".to_owned()));
    let tags = SearchRequest {
        tags: vec!["urgent".into(), "work".into()],
        ..ana()
    };
    assert_eq!(visible(store, &all, &tags).await, ["tagged"]);
    let other_tag = SearchRequest {
        tags: vec!["work".into(), "home".into()],
        ..ana()
    };
    assert!(visible(store, &all, &other_tag).await.is_empty());
    let later = SearchRequest {
        at: Some(at(3000)),
        ..ana()
    };
    assert!(!visible(store, &all, &later)
        .await
        .contains(&"expiring".to_owned()));
    let sooner = SearchRequest {
        at: Some(at(1500)),
        ..ana()
    };
    assert!(visible(store, &all, &sooner)
        .await
        .contains(&"expiring".to_owned()));
    let unfaded = SearchRequest {
        exclude_faded: true,
        ..ana()
    };
    assert!(!visible(store, &all, &unfaded)
        .await
        .contains(&"faded".to_owned()));
    let window = SearchRequest {
        since: Some(at(400)),
        until: Some(at(600)),
        ..ana()
    };
    assert_eq!(visible(store, &all, &window).await, ["episode"]);
    sql(
        store,
        "INSERT INTO entities (id, canonical_name, type) VALUES ('ent_1', 'Lisbon', 'place')",
    )
    .await;
    sql(
        store,
        "INSERT INTO memory_entities (memory_id, entity_id) VALUES ('personal', 'ent_1')",
    )
    .await;
    let about = SearchRequest {
        about: vec!["ent_1".into()],
        ..ana()
    };
    assert_eq!(visible(store, &all, &about).await, ["personal"]);
}

pub(super) async fn touch_counts_an_access_and_brings_a_faded_fact_back<S: Conformant>(store: &S) {
    insert(store, &row("fresh", "f")).await;
    insert(store, &row("faded", "f")).await;
    insert(
        store,
        &Row {
            user: None,
            ..row("nobodys", "n")
        },
    )
    .await;
    sql(
        store,
        "UPDATE memories SET faded_at = 5, confidence = 0.2 WHERE id = 'faded'",
    )
    .await;
    sql(
        store,
        "UPDATE memories SET confidence = 0.3 WHERE id = 'fresh'",
    )
    .await;
    let ids = ["fresh", "faded", "nobodys", "unknown"].map(String::from);
    store.touch(&ids, 1, at(7_000)).await.unwrap();
    store.touch(&ids[..1], 2, at(8_000)).await.unwrap();
    let fresh = store.get("fresh").await.unwrap().unwrap();
    assert_eq!(fresh.access_count, 3, "once, then twice more");
    assert_eq!(fresh.last_accessed, Some(at(8_000)));
    assert_eq!(
        fresh.confidence, 0.3,
        "only a faded fact's confidence rises"
    );
    let faded = store.get("faded").await.unwrap().unwrap();
    assert_eq!((faded.access_count, faded.confidence), (1, 0.5));
    assert_eq!(faded.faded_at, None);
    assert_eq!(store.get("nobodys").await.unwrap().unwrap().access_count, 1);
    store.touch(&[], 1, at(9_000)).await.unwrap();
}

pub(super) async fn stats_count_active_memories_entities_and_the_queue<S: Conformant>(store: &S) {
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
        Row {
            event_time: 6_000,
            ..row("faded", "x")
        },
    ] {
        insert(store, &memory).await;
    }
    sql(
        store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'gone'",
    )
    .await;
    // A fact decay faded is counted apart, and is not the newest active memory.
    sql(
        store,
        "UPDATE memories SET faded_at = 6000 WHERE id = 'faded'",
    )
    .await;
    sql(
        store,
        "INSERT INTO entities (id, owner_id, canonical_name, type) VALUES \
         ('ent_a', 'ana', 'Lisbon', 'place'), ('ent_b', 'bo', 'Porto', 'place')",
    )
    .await;
    sql(
        store,
        "INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES ('f1', 1), ('r1', 1)",
    )
    .await;
    let all = store.stats(None).await.unwrap();
    assert_eq!(
        (all.facts, all.episodes, all.reflections, all.entities),
        (2, 1, 1, 2)
    );
    assert_eq!(all.faded_facts, 1);
    assert_eq!(all.pending_index, 2);
    assert_eq!(all.latest, Some(at(5_000)));
    let ana = store.stats(Some("ana")).await.unwrap();
    assert_eq!(
        (
            ana.facts,
            ana.faded_facts,
            ana.episodes,
            ana.reflections,
            ana.entities
        ),
        (2, 1, 1, 0, 1)
    );
    assert_eq!(ana.pending_index, 1);
    assert_eq!(ana.latest, Some(at(3_000)));
}

pub(super) async fn listings_page_newest_first<S: Conformant>(store: &S) {
    for n in 0..7 {
        let id: &'static str = Box::leak(format!("m{n}").into_boxed_str());
        insert(
            store,
            &Row {
                event_time: 100 + n,
                chat: (n % 2 == 1).then_some("c1"),
                ..row(id, "x")
            },
        )
        .await;
    }
    sql(store, "UPDATE memories SET valid_until = 1 WHERE id = 'm6'").await;
    sql(store, "UPDATE memories SET expires_at = 50 WHERE id = 'm5'").await;
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

pub(super) async fn context_values_reflections_and_enrichment_candidates<S: Conformant>(store: &S) {
    for (id, chat, created) in [
        ("ctx_personal", None, 10),
        ("ctx_chat", Some("c1"), 5),
        ("ctx_expired", Some("c2"), 20),
    ] {
        insert(
            store,
            &Row {
                chat,
                event_time: created,
                ..row(id, "mood")
            },
        )
        .await;
    }
    sql(
        store,
        r#"UPDATE memories SET memory_type = 'context', attributes = '{"key": "mood"}'"#,
    )
    .await;
    sql(
        store,
        "UPDATE memories SET expires_at = 100 WHERE id = 'ctx_expired'",
    )
    .await;
    let value = |chat: Option<&'static str>, key: &'static str, now: i64| async move {
        store
            .context_value("ana", chat, key, at(now))
            .await
            .unwrap()
            .map(|memory| memory.id)
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
            store,
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
    let latest = |user, chat| async move {
        store
            .latest_reflection(user, chat)
            .await
            .unwrap()
            .map(|memory| memory.id)
    };
    assert_eq!(latest(Some("ana"), None).await.as_deref(), Some("ref_new"));
    assert_eq!(
        latest(Some("ana"), Some("c1")).await.as_deref(),
        Some("ref_chat")
    );
    assert_eq!(latest(None, None).await.as_deref(), Some("ref_nobody"));

    insert(store, &row("plain", "x")).await;
    insert(store, &row("enriched", "x")).await;
    insert(store, &row("tried", "x")).await;
    sql(
        store,
        r#"UPDATE memories SET attributes = '{"enriched_at": 5}' WHERE id = 'enriched'"#,
    )
    .await;
    sql(
        store,
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

/// Ranking keys name an episode's session; nobody's episodes and facts are in none.
pub(super) async fn rank_keys_name_an_episodes_session<S: Conformant>(store: &S) {
    let episode = |content: &str, user: Option<&str>| crate::store::NewMemory {
        kind: MemoryKind::Episode,
        user_id: user.map(str::to_owned),
        ..fact("ana", content)
    };
    let turn = store
        .insert_memory(&episode("ana's turn", Some("ana")), &[])
        .await
        .unwrap();
    let nobodys = store
        .insert_memory(&episode("nobody's turn", None), &[])
        .await
        .unwrap();
    let fact = store
        .insert_memory(&fact("ana", "a fact"), &[])
        .await
        .unwrap();
    let ids = vec![turn.clone(), nobodys.clone(), fact.clone()];
    let keys = store
        .rank_keys(&ids, &SearchRequest::default(), true)
        .await
        .unwrap();
    assert_eq!(keys.len(), 3);
    assert_eq!(
        keys[&turn].session,
        Some(SessionKey::new("ana", None, "s1"))
    );
    assert_eq!(
        keys[&nobodys].session, None,
        "nobody's: in no user's session"
    );
    assert_eq!(keys[&fact].session, None, "only episodes have a session");
}

/// The index queue a user's statistics count is their own.
/// `memory_stats` counts the caller's memories waiting for a vector, not the whole store's.
pub(super) async fn stats_count_only_the_users_own_queue<S: Conformant>(store: &S) {
    for (user, text) in [("ana", "one"), ("ana", "two"), ("bo", "three")] {
        let mut memory = fact("ana", text);
        memory.user_id = Some(user.into());
        store.insert_memory(&memory, &[]).await.unwrap();
    }
    assert_eq!(store.stats(Some("ana")).await.unwrap().pending_index, 2);
    assert_eq!(store.stats(Some("bo")).await.unwrap().pending_index, 1);
    assert_eq!(store.stats(None).await.unwrap().pending_index, 3);
}
