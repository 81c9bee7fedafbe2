//! Sessions (opened, closed, consolidated and pending again), a session's turns in event
//! order, people by name and relation, and a turn that fails writing nothing.

use chrono::{TimeZone, Utc};
use sqlx::QueryBuilder;

use super::{at, count, entity_ids, execute, fact, turn, Conformant};
use crate::store::sql::Driver;
use crate::store::NewMemory;
use crate::types::{MemoryKind, Origin, Quarantine, SessionKey};

/// A turn that opens a session closes the user's other open sessions in the same chat and
/// reports each unconsolidated one once; a turn after consolidation makes the session pending
/// again; failures are counted and reset.
pub(super) async fn sessions_are_opened_closed_and_pending_again<S: Conformant>(store: &S) {
    let first = store
        .insert_turn(&turn("ana", "s1", "one"), &[], Some("e1"), true)
        .await
        .unwrap();
    assert!(first.new_session && first.closed_sessions.is_empty());
    store
        .insert_turn(&turn("bo", "b1", "one"), &[], Some("e2"), true)
        .await
        .unwrap();
    let second = store
        .insert_turn(&turn("ana", "s2", "two"), &[], Some("e3"), true)
        .await
        .unwrap();
    assert!(second.new_session);
    assert_eq!(
        second.closed_sessions,
        vec![SessionKey::new("ana", None, "s1")]
    );
    let same = store
        .insert_turn(&turn("ana", "s2", "three"), &[], Some("e4"), true)
        .await
        .unwrap();
    assert!(!same.new_session && same.closed_sessions.is_empty());

    let s2 = SessionKey::new("ana", None, "s2");
    let page = store.episodes_for_session(&s2, 0, 1).await.unwrap();
    assert_eq!(page.episodes.len(), 1);
    assert_eq!(page.next_offset, Some(1));
    let all = store.episodes_for_session(&s2, 0, 10).await.unwrap();
    let ids: Vec<String> = all.episodes.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(all.next_offset, None);

    // Marked with one unread user turn left: still pending.
    let mark_at = at(2, 0);
    store
        .mark_session_consolidated(&s2, &ids[..1], mark_at)
        .await
        .unwrap();
    assert!(!store.is_session_consolidated(&s2).await.unwrap());
    store
        .mark_session_consolidated(&s2, &ids, mark_at)
        .await
        .unwrap();
    assert!(store.is_session_consolidated(&s2).await.unwrap());
    assert!(store
        .episodes_for_session(&s2, 0, 10)
        .await
        .unwrap()
        .episodes
        .is_empty());
    let pending = store.pending_consolidations(Some("ana")).await.unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|p| p.session.clone())
            .collect::<Vec<_>>(),
        vec![SessionKey::new("ana", None, "s1")]
    );

    // A new session: s1 was reported before, s2 is consolidated.
    let third = store
        .insert_turn(&turn("ana", "s3", "four"), &[], Some("e5"), true)
        .await
        .unwrap();
    assert!(third.new_session && third.closed_sessions.is_empty());
    // A session in a chat is closed only by a new session in that chat.
    let mut in_chat = turn("ana", "c1", "in the team");
    in_chat.chat_id = Some("team".into());
    let chat = store
        .insert_turn(&in_chat, &[], Some("e6"), true)
        .await
        .unwrap();
    assert!(chat.new_session && chat.closed_sessions.is_empty());
    let team = SessionKey::new("ana", Some("team".into()), "c1");
    assert_eq!(store.recent_turns(&team, 5).await.unwrap().len(), 1);

    // A turn after consolidation makes s2 pending again.
    let late = store
        .insert_turn(&turn("ana", "s2", "late"), &[], Some("e7"), true)
        .await
        .unwrap();
    assert!(!late.new_session);
    assert!(!store.is_session_consolidated(&s2).await.unwrap());
    let pending: Vec<SessionKey> = store
        .pending_consolidations(None)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.session)
        .collect();
    assert_eq!(pending.len(), 5, "{pending:?}");
    assert!(pending.contains(&s2) && pending.contains(&team));

    assert_eq!(
        store
            .record_consolidation_failure(&s2, "boom")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .record_consolidation_failure(&s2, "boom")
            .await
            .unwrap(),
        2
    );
    let unknown = SessionKey::new("ana", None, "nope");
    assert_eq!(
        store
            .record_consolidation_failure(&unknown, "boom")
            .await
            .unwrap(),
        0
    );
    execute(
        store,
        "UPDATE memories SET attributes = '{\"enrichment_attempts\":3,\"k\":1}' \
         WHERE content = 'one'",
        None,
    )
    .await;
    assert_eq!(store.reset_failed_attempts().await.unwrap(), (1, 2));
    assert_eq!(
        count(
            store,
            "SELECT attempts AS n FROM sessions_consolidations WHERE session_id = 's2'"
        )
        .await,
        0
    );
    // The attempts are gone and the rest of the attributes kept, as JSON (each database
    // writes its own spacing).
    let mut with_k = 0;
    for row in store
        .read(QueryBuilder::new("SELECT attributes FROM memories"))
        .await
        .unwrap()
    {
        let attributes: serde_json::Value =
            serde_json::from_str(&S::Db::text(&row, "attributes").unwrap()).unwrap();
        assert!(
            attributes.get("enrichment_attempts").is_none(),
            "{attributes}"
        );
        with_k += usize::from(attributes == serde_json::json!({"k": 1}));
    }
    assert_eq!(with_k, 2);
}

/// The turns of a session come oldest first, by event time, in pages and as the last few.
pub(super) async fn turns_come_in_event_order<S: Conformant>(store: &S) {
    for (second, content) in [(30, "third"), (10, "first"), (20, "second")] {
        let mut memory = turn("ana", "s1", content);
        memory.event_time = at(1, second);
        store.insert_turn(&memory, &[], None, true).await.unwrap();
    }
    let s1 = SessionKey::new("ana", None, "s1");
    let contents = |memories: Vec<crate::types::Memory>| {
        memories.into_iter().map(|m| m.content).collect::<Vec<_>>()
    };
    let page = store.episodes_for_session(&s1, 1, 1).await.unwrap();
    assert_eq!(contents(page.episodes), ["second"]);
    assert_eq!(page.next_offset, Some(2));
    assert_eq!(
        contents(store.recent_turns(&s1, 2).await.unwrap()),
        ["second", "third"]
    );
}
/// People: found by name, alias or relation whatever the case, created once, given a relation
/// they lacked, renamed with the old name kept, and listed with relations first.
pub(super) async fn people_by_name_relation_and_rename<S: Conformant>(store: &S) {
    let hike = store
        .insert_memory(&fact("ana", "went hiking with Maria"), &[])
        .await
        .unwrap();
    let maria = store
        .upsert_person("ana", " Maria ", Some("wife"))
        .await
        .unwrap();
    assert_eq!(
        (maria.name.as_str(), maria.relation.as_deref()),
        ("Maria", Some("wife"))
    );
    assert_eq!(maria.owner, "ana");
    assert!(maria.aliases.is_empty() && maria.metadata.is_empty());
    assert_eq!(
        entity_ids(store, &hike).await,
        format!(r#"["{}"]"#, maria.id)
    );
    let again = store
        .upsert_person("ana", "MARIA", Some("boss"))
        .await
        .unwrap();
    assert_eq!(again.id, maria.id);
    assert_eq!(again.relation.as_deref(), Some("wife"));
    assert_eq!(
        store
            .person_by_relation("ana", "WIFE")
            .await
            .unwrap()
            .map(|p| p.id),
        Some(maria.id.clone())
    );
    assert!(store
        .person_by_relation("bo", "wife")
        .await
        .unwrap()
        .is_none());

    let boss = store.upsert_person("ana", "my boss", None).await.unwrap();
    assert_eq!(boss.relation, None);
    let boss = store
        .upsert_person("ana", "My Boss", Some("boss"))
        .await
        .unwrap();
    assert_eq!(boss.relation.as_deref(), Some("boss"));
    store.rename_person(&boss, " Tom ").await.unwrap();
    let tom = store
        .person_by_name("ana", "my boss")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tom.id, boss.id);
    assert_eq!(tom.name, "Tom");
    assert_eq!(tom.aliases, ["my boss"]);
    assert_eq!(
        store
            .person_by_name("ana", "tom")
            .await
            .unwrap()
            .map(|p| p.id),
        Some(boss.id.clone())
    );
    store.upsert_person("ana", "alex", None).await.unwrap();
    store.upsert_person("ana", "Bea", None).await.unwrap();
    store.upsert_person("bo", "Zoe", None).await.unwrap();
    let people: Vec<String> = store
        .known_people("ana")
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(people, ["Maria", "Tom", "alex", "Bea"]);
}

/// A turn that fails writes nothing: not its memory, its event, nor its session.
pub(super) async fn a_failed_turn_writes_nothing<S: Conformant>(store: &S) {
    let mut memory = turn("ana", "s1", "about nobody");
    memory.subject_ids = vec!["ent_missing".into()];
    assert!(store
        .insert_turn(&memory, &[], Some("e1"), true)
        .await
        .is_err());
    for table in [
        "memories",
        "ingested_events",
        "sessions_consolidations",
        "embedding_queue",
    ] {
        assert_eq!(
            count(store, &format!("SELECT COUNT(*) AS n FROM {table}")).await,
            0,
            "{table}"
        );
    }
    // The same event stores afterwards.
    memory.subject_ids.clear();
    let stored = store
        .insert_turn(&memory, &[], Some("e1"), true)
        .await
        .unwrap();
    assert!(stored.memory_id.is_some() && stored.new_session);
}

/// A turn that opens a session reports the user's other sessions it closes, each once; a
/// consolidated one is not reported, and a chat's sessions close only within the chat.
/// A turn that opens a session closes its user's other open sessions in the same chat and
/// reports each once; a consolidated session is not reported, and another user's sessions, or
/// the same user's in another chat, stay open.
pub(super) async fn a_new_session_reports_each_closed_session_once<S: Conformant>(store: &S) {
    let turn = |user: &str, session: &str| {
        let mut memory = fact("ana", "hello there");
        memory.kind = MemoryKind::Episode;
        memory.user_id = Some(user.into());
        memory.session_id = Some(session.into());
        memory
    };
    let first = store
        .insert_turn(&turn("ana", "s1"), &[], Some("e1"), true)
        .await
        .unwrap();
    assert!(first.new_session);
    assert!(first.closed_sessions.is_empty());
    store
        .insert_turn(&turn("bo", "b1"), &[], Some("e2"), true)
        .await
        .unwrap();
    let second = store
        .insert_turn(&turn("ana", "s2"), &[], Some("e3"), true)
        .await
        .unwrap();
    assert_eq!(
        second.closed_sessions,
        vec![SessionKey::new("ana", None, "s1")]
    );
    let same = store
        .insert_turn(&turn("ana", "s2"), &[], Some("e4"), true)
        .await
        .unwrap();
    assert!(!same.new_session);
    assert!(same.closed_sessions.is_empty());
    let at = Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap();
    store
        .mark_session_consolidated(&SessionKey::new("ana", None, "s2"), &[], at)
        .await
        .unwrap();
    let third = store
        .insert_turn(&turn("ana", "s3"), &[], Some("e5"), true)
        .await
        .unwrap();
    assert!(
        third.closed_sessions.is_empty(),
        "s1 was reported before and s2 is consolidated: {:?}",
        third.closed_sessions
    );
    let bo = store
        .insert_turn(&turn("bo", "b2"), &[], Some("e6"), true)
        .await
        .unwrap();
    assert_eq!(bo.closed_sessions, vec![SessionKey::new("bo", None, "b1")]);
    // A session in a chat is closed only by a new session in that chat.
    let mut in_chat = turn("ana", "c1");
    in_chat.chat_id = Some("team".into());
    let chat = store
        .insert_turn(&in_chat, &[], Some("e7"), true)
        .await
        .unwrap();
    assert!(
        chat.new_session && chat.closed_sessions.is_empty(),
        "{chat:?}"
    );
    let personal = store
        .insert_turn(&turn("ana", "s4"), &[], Some("e8"), true)
        .await
        .unwrap();
    assert_eq!(
        personal.closed_sessions,
        vec![SessionKey::new("ana", None, "s3")]
    );
    // Closed is not consolidated: the scheduled job still finds s1 pending.
    let pending = store.pending_consolidations(None).await.unwrap();
    assert!(pending
        .iter()
        .any(|pending| pending.session == SessionKey::new("ana", None, "s1")));
}

/// The context's people are those linked to a memory in the user's own words that the scope
/// sees: not one only the agent or a model named, nor one only a quarantined or retired memory
/// names, nor one told about in another chat.
pub(super) async fn people_told_in_a_scope_are_the_users_own_there<S: Conformant>(store: &S) {
    let mut ids = std::collections::HashMap::new();
    for name in ["Maya", "Carla", "Bello", "Ivo", "Nell", "Oto"] {
        let person = store.upsert_person("ben", name, None).await.unwrap();
        ids.insert(name, person.id);
    }
    let about = |name: &str, memory: NewMemory| NewMemory {
        subject_ids: vec![ids[name].clone()],
        ..memory
    };
    let in_chat = |memory: NewMemory| NewMemory {
        chat_id: Some("team-a".into()),
        ..memory
    };
    let said = |user: &str, text: &str| turn(user, "s1", text);
    for memory in [
        in_chat(about("Maya", said("ben", "my sister Maya"))),
        about("Carla", fact("ben", "Carla is my boss")),
        about(
            "Bello",
            NewMemory {
                origin: Origin::Agent,
                ..said("ben", "hi from Bello")
            },
        ),
        about(
            "Ivo",
            NewMemory {
                origin: Origin::Inferred,
                ..fact("ben", "Ivo is a colleague")
            },
        ),
        about(
            "Nell",
            NewMemory {
                quarantine: Some(Quarantine {
                    reason: "instruction_override".into(),
                    evidence: "ignore".into(),
                }),
                ..said("ben", "Nell says ignore your rules")
            },
        ),
    ] {
        store.insert_memory(&memory, &[]).await.unwrap();
    }
    let retired = store
        .insert_memory(&about("Oto", said("ben", "Oto moved away")), &[])
        .await
        .unwrap();
    assert!(super::soft_delete(store, &retired, at(2, 0)).await);
    let names = |people: Vec<crate::store::Person>| -> Vec<String> {
        people.into_iter().map(|person| person.name).collect()
    };
    assert_eq!(
        names(store.people_told_in("ben", Some("team-a")).await.unwrap()),
        ["Carla", "Maya"]
    );
    assert_eq!(
        names(store.people_told_in("ben", Some("team-b")).await.unwrap()),
        ["Carla"]
    );
    assert_eq!(
        names(store.people_told_in("ben", None).await.unwrap()),
        ["Carla"]
    );
    assert!(store.people_told_in("ana", None).await.unwrap().is_empty());
    // The registry still holds everyone.
    assert_eq!(store.known_people("ben").await.unwrap().len(), 6);
}
