//! Storing turns and memories, and their entities, on PostgreSQL: the behaviour of the SQLite
//! store, and find-or-create under writers running at once; the helpers the store's tests share.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use mnemo_ner_api::{EntityType, ExtractedEntity};

use super::super::{PostgresOptions, PostgresStore};
use super::open_fresh;
use crate::store::backend::*;
use crate::store::sql::link_entities;
use crate::store::NewMemory;
use crate::types::MemoryKind;

pub(super) fn at(day: u32, second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, day, 0, 0, second).unwrap()
}

pub(super) fn fact(user: &str, content: &str) -> NewMemory {
    NewMemory {
        kind: MemoryKind::Fact,
        content: content.into(),
        session_id: Some("s1".into()),
        user_id: Some(user.into()),
        chat_id: None,
        event_time: at(1, 0),
        created_at: at(1, 0),
        source_role: None,
        source_ids: Vec::new(),
        tags: Vec::new(),
        attributes: serde_json::Map::new(),
        decay_rate: 0.1,
        confidence: 1.0,
        memory_type: None,
        expires_at: None,
        shared: false,
        subject_ids: Vec::new(),
    }
}

pub(super) fn turn(user: &str, session: &str, content: &str) -> NewMemory {
    NewMemory {
        kind: MemoryKind::Episode,
        session_id: Some(session.into()),
        source_role: Some("user".into()),
        ..fact(user, content)
    }
}

pub(super) fn entity(surface: &str, canonical: &str, entity_type: EntityType) -> ExtractedEntity {
    ExtractedEntity {
        surface: surface.into(),
        canonical: canonical.into(),
        entity_type,
        start: 0,
        end: surface.len(),
        confidence: 0.9,
        relation: None,
        provider: "test".into(),
    }
}

pub(super) fn person(name: &str) -> ExtractedEntity {
    entity(name, name, EntityType::Person)
}

pub(super) async fn count(store: &PostgresStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

pub(super) async fn entity_ids(store: &PostgresStore, memory_id: &str) -> String {
    sqlx::query_scalar("SELECT entity_ids FROM memories WHERE id = $1")
        .bind(memory_id)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

pub(super) async fn mention_count(store: &PostgresStore, entity_id: &str) -> i64 {
    sqlx::query_scalar("SELECT mention_count FROM entities WHERE id = $1")
        .bind(entity_id)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// An event is stored once per user: replayed, it stores nothing; another user's event of the
/// same id is theirs; an event recorded for no user ('') stands for every user's.
#[tokio::test]
async fn insert_turn_stores_each_users_event_once() {
    let store = open_fresh().await;
    let first = store
        .insert_turn(&turn("ana", "s1", "hello there"), &[], Some("e1"), false)
        .await
        .unwrap();
    let id = first.memory_id.expect("the first turn is stored");
    assert!(id.starts_with("ep_"), "{id}");
    let again = store
        .insert_turn(&turn("ana", "s1", "hello there"), &[], Some("e1"), false)
        .await
        .unwrap();
    // Stored before: nothing new, and the memory it became then.
    assert_eq!((again.memory_id, again.earlier), (None, Some(id.clone())));
    let other = store
        .insert_turn(&turn("bo", "s1", "hello there"), &[], Some("e1"), false)
        .await
        .unwrap();
    assert!(other.memory_id.is_some());
    sqlx::query(
        "INSERT INTO ingested_events (user_id, event_id, memory_id) VALUES ('', 'old', 'x')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let old = store
        .insert_turn(&turn("cy", "s1", "hello"), &[], Some("old"), false)
        .await
        .unwrap();
    // A record whose memory is gone names none.
    assert_eq!((old.memory_id, old.earlier), (None, None));
    assert_eq!(count(&store, "SELECT COUNT(*) FROM memories").await, 2);
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM embedding_queue").await,
        2
    );
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM ingested_events WHERE event_id = 'e1'"
        )
        .await,
        2
    );
    // Without a session record, no session row is written.
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM sessions_consolidations").await,
        0
    );
    // The memory is stored as SQLite stores it.
    let (kind, role, shared, source_ids, attributes): (String, String, i64, String, String) =
        sqlx::query_as(
            "SELECT kind, source_role, shared, source_ids, attributes FROM memories WHERE id = $1",
        )
        .bind(&id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        (kind.as_str(), role.as_str(), shared),
        ("episode", "user", 0)
    );
    assert_eq!((source_ids.as_str(), attributes.as_str()), ("[]", "{}"));
}

/// An entity is found by its name or an alias whatever the case; a new surface form becomes
/// an alias, and the memory's `entity_ids` lists its links.
#[tokio::test]
async fn entities_are_found_by_name_and_alias_whatever_the_case() {
    let store = open_fresh().await;
    let first = store
        .insert_memory(
            &fact("ana", "Met Sarah at the cafe"),
            &[entity("Sarah", "Sarah Connor", EntityType::Person)],
        )
        .await
        .unwrap();
    let second = store
        .insert_memory(
            &fact("ana", "SARAH CONNOR called; the cafe was closed"),
            &[entity("SARAH CONNOR", "sarah connor", EntityType::Person)],
        )
        .await
        .unwrap();
    let third = store
        .insert_memory(
            &fact("ana", "Sal said hi"),
            &[
                entity("Sal", "SARAH", EntityType::Person),
                entity("Sal", "Sal Paradise", EntityType::Other),
            ],
        )
        .await
        .unwrap();
    // Another owner's Sarah is another entity.
    store
        .insert_memory(&fact("bo", "Sarah"), &[person("Sarah Connor")])
        .await
        .unwrap();
    let sarah = store
        .entities_named(Some("ana"), &[" sarah ".into(), "SARAH CONNOR".into()])
        .await
        .unwrap();
    assert_eq!(sarah.len(), 1, "{sarah:?}");
    let sarah = &sarah[0];
    let (name, aliases): (String, String) =
        sqlx::query_as("SELECT canonical_name, aliases FROM entities WHERE id = $1")
            .bind(sarah)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(name, "Sarah Connor");
    assert_eq!(aliases, r#"["Sarah","Sal"]"#);
    assert_eq!(mention_count(&store, sarah).await, 3);
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM entities WHERE owner_id = 'ana'"
        )
        .await,
        2,
        "one person and one other"
    );
    assert_eq!(
        store
            .entities_named(None, &["sal".into()])
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(store
        .entities_named(Some("ana"), &["  ".into()])
        .await
        .unwrap()
        .is_empty());
    for id in [&first, &second] {
        assert_eq!(entity_ids(&store, id).await, format!(r#"["{sarah}"]"#));
    }
    assert_eq!(
        store.add_entities(&third, &[], None).await.unwrap(),
        2,
        "the person and the other"
    );
    let names = store
        .entity_names(&[sarah.clone(), "ent_none".into()])
        .await
        .unwrap();
    assert_eq!(names.len(), 1);
    assert_eq!(names[sarah], "Sarah Connor");
    let counts = store
        .entity_link_counts(&[sarah.clone(), "ent_none".into()])
        .await
        .unwrap();
    assert_eq!(counts.len(), 1);
    assert_eq!(counts[sarah], 3);
    assert_eq!(store.linked_memory_count(None).await.unwrap(), 4);
    assert_eq!(store.linked_memory_count(Some("nobody")).await.unwrap(), 0);
}

/// Enrichment adds links and records when it ran; a failure is counted; an unknown memory is
/// an error.
#[tokio::test]
async fn enrichment_adds_links_and_counts_failures() {
    let store = open_fresh().await;
    let id = store
        .insert_memory(&fact("ana", "Lunch at Acme"), &[])
        .await
        .unwrap();
    let linked = store
        .add_entities(
            &id,
            &[entity("Acme", "Acme", EntityType::Organization)],
            Some(at(3, 0)),
        )
        .await
        .unwrap();
    assert_eq!(linked, 1);
    store.record_enrichment_failure(&id).await.unwrap();
    store.record_enrichment_failure(&id).await.unwrap();
    store.record_enrichment_failure("ep_none").await.unwrap();
    let attributes: String = sqlx::query_scalar("SELECT attributes FROM memories WHERE id = $1")
        .bind(&id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    let attributes: serde_json::Value = serde_json::from_str(&attributes).unwrap();
    assert_eq!(
        attributes,
        serde_json::json!({"enriched_at": at(3, 0).timestamp(), "enrichment_attempts": 2})
    );
    assert!(matches!(
        store.add_entities("ep_none", &[], None).await,
        Err(crate::error::MemoryError::NotFound(_))
    ));
}

/// A new person, place, organisation or project is linked to the owner's earlier active
/// memories naming it as a phrase, and later memories naming it are linked without NER.
#[tokio::test]
async fn a_new_entity_links_earlier_and_later_mentions() {
    let store = open_fresh().await;
    let earlier = store
        .insert_memory(&fact("ana", "Dana Scully is vegetarian"), &[])
        .await
        .unwrap();
    let apart = store
        .insert_memory(&fact("ana", "Dana met Scully"), &[])
        .await
        .unwrap();
    let deleted = store
        .insert_memory(&fact("ana", "Dana Scully moved"), &[])
        .await
        .unwrap();
    sqlx::query("UPDATE memories SET valid_until = 1 WHERE id = $1")
        .bind(&deleted)
        .execute(store.pool())
        .await
        .unwrap();
    let others = store
        .insert_memory(&fact("bo", "Dana Scully is bo's friend"), &[])
        .await
        .unwrap();
    let named = store
        .insert_memory(
            &fact("ana", "Dinner with Dana Scully"),
            &[person("Dana Scully")],
        )
        .await
        .unwrap();
    let dana = store
        .entities_named(Some("ana"), &["dana scully".into()])
        .await
        .unwrap()
        .remove(0);
    // Created (1), then linked to the earlier memory and the new one by phrase.
    assert_eq!(mention_count(&store, &dana).await, 3);
    for id in [&earlier, &named] {
        assert_eq!(entity_ids(&store, id).await, format!(r#"["{dana}"]"#));
    }
    for id in [&apart, &deleted, &others] {
        assert_eq!(entity_ids(&store, id).await, "[]", "{id}");
    }
    // Later: named without NER, at the start of a sentence, in another case.
    let later = store
        .insert_memory(&fact("ana", "DANA SCULLY called twice"), &[])
        .await
        .unwrap();
    assert_eq!(entity_ids(&store, &later).await, format!(r#"["{dana}"]"#));
    assert_eq!(mention_count(&store, &dana).await, 4);
    // A date is not linked by name.
    let date = store
        .insert_memory(
            &fact("ana", "tuesday plans"),
            &[entity("tuesday", "tuesday", EntityType::Date)],
        )
        .await
        .unwrap();
    let plans = store
        .insert_memory(&fact("ana", "tuesday again"), &[])
        .await
        .unwrap();
    assert_ne!(entity_ids(&store, &date).await, "[]");
    assert_eq!(entity_ids(&store, &plans).await, "[]");
    // Names PostgreSQL's English stop words would shorten ('don draper' to 'draper', 'don' to
    // nothing) are matched whole, as FTS5 matches them.
    let draper = store
        .insert_memory(&fact("ana", "Don Draper smokes"), &[])
        .await
        .unwrap();
    let betty = store
        .insert_memory(&fact("ana", "Betty Draper rides"), &[])
        .await
        .unwrap();
    let donna = store
        .insert_memory(&fact("ana", "Donna called"), &[])
        .await
        .unwrap();
    for name in ["Don Draper", "Don"] {
        store
            .insert_memory(&fact("ana", "a meeting"), &[person(name)])
            .await
            .unwrap();
    }
    let mut dons = store
        .entities_named(Some("ana"), &["don draper".into(), "don".into()])
        .await
        .unwrap();
    dons.sort();
    assert_eq!(dons.len(), 2);
    assert_eq!(
        entity_ids(&store, &draper).await,
        format!(r#"["{}","{}"]"#, dons[0], dons[1])
    );
    assert_eq!(entity_ids(&store, &betty).await, "[]");
    assert_eq!(entity_ids(&store, &donna).await, "[]");
}

/// An entity's memories are its active, unsuperseded ones in scope, newest first; links are
/// walked newest first, and co-mentions count the other entities a memory names.
#[tokio::test]
async fn entity_info_and_link_order() {
    let store = open_fresh().await;
    let (a, b, c) = (
        entity("Apollo", "Apollo", EntityType::Project),
        person("Bea"),
        person("Cy"),
    );
    let mut old = fact("ana", "Apollo with Bea");
    old.event_time = at(1, 0);
    let m1 = store
        .insert_memory(&old, &[a.clone(), b.clone()])
        .await
        .unwrap();
    let mut newer = fact("ana", "Apollo alone");
    newer.event_time = at(3, 0);
    let m2 = store
        .insert_memory(&newer, std::slice::from_ref(&a))
        .await
        .unwrap();
    let mut mid = fact("ana", "Apollo with Bea and Cy");
    mid.event_time = at(2, 0);
    let m3 = store
        .insert_memory(&mid, &[a.clone(), b.clone(), c.clone()])
        .await
        .unwrap();
    let mut elsewhere = fact("ana", "Apollo in the team chat");
    elsewhere.chat_id = Some("team".into());
    elsewhere.event_time = at(4, 0);
    let m4 = store
        .insert_memory(&elsewhere, std::slice::from_ref(&a))
        .await
        .unwrap();
    let mut gone = fact("ana", "Apollo superseded");
    gone.event_time = at(5, 0);
    let m5 = store
        .insert_memory(&gone, std::slice::from_ref(&a))
        .await
        .unwrap();
    sqlx::query("UPDATE memories SET superseded_at = 1 WHERE id = $1")
        .bind(&m5)
        .execute(store.pool())
        .await
        .unwrap();

    let info = store
        .entity_info(Some("ana"), None, "APOLLO", 10)
        .await
        .unwrap()
        .expect("Apollo is known");
    assert_eq!(
        (info.name.as_str(), info.entity_type.as_str()),
        ("Apollo", "project")
    );
    // Created (1) and linked to its own memory by phrase, then four more memories.
    assert_eq!(info.mention_count, 6);
    let ids: Vec<&str> = info.memories.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [m2.as_str(), m3.as_str(), m1.as_str()]);
    let in_chat = store
        .entity_info(Some("ana"), Some("team"), "apollo", 2)
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<&str> = in_chat.memories.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [m4.as_str(), m2.as_str()]);
    assert!(store
        .entity_info(Some("bo"), None, "apollo", 10)
        .await
        .unwrap()
        .is_none());
    assert!(store
        .entity_info_by_id(Some("bo"), None, &info.id, 10)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        store
            .entity_info_by_id(None, None, &info.id, 10)
            .await
            .unwrap()
            .map(|found| found.memories.len()),
        Some(4)
    );

    let ids = store
        .entities_named(Some("ana"), &["bea".into(), "cy".into()])
        .await
        .unwrap();
    let names = store.entity_names(&ids).await.unwrap();
    let id_of = |name: &str| {
        names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(id, _)| id.clone())
            .unwrap()
    };
    let (bea, cy) = (id_of("Bea"), id_of("Cy"));

    let links = store.newest_links(&info.id, 3).await.unwrap();
    let memories: Vec<&str> = links.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(memories, [m5.as_str(), m4.as_str(), m3.as_str()]);
    assert!(links.windows(2).all(|w| w[0].1 > w[1].1), "{links:?}");
    assert_eq!(store.newest_links(&info.id, -1).await.unwrap().len(), 5);

    let co = store
        .co_mentions(&info.id, &[bea.clone(), cy.clone()], 10, 10)
        .await
        .unwrap();
    let co: Vec<(&str, i64)> = co.iter().map(|(m, _, n)| (m.as_str(), *n)).collect();
    assert_eq!(co, [(m3.as_str(), 3), (m1.as_str(), 2)]);
    // Only the newest three links of Apollo are scanned: m1 is out of reach.
    let co = store
        .co_mentions(&info.id, std::slice::from_ref(&bea), 3, 10)
        .await
        .unwrap();
    assert_eq!(co.len(), 1);
    assert_eq!(co[0].0, m3);
    assert_eq!(co[0].1, links[2].1, "the link's position");
    let co = store
        .co_mentions(&info.id, &[bea.clone(), cy.clone()], 10, 1)
        .await
        .unwrap();
    assert_eq!(co.len(), 1);
    assert!(store
        .co_mentions(&info.id, &[], 10, 10)
        .await
        .unwrap()
        .is_empty());
}

/// Two servers storing turns of one user at once, both naming the same new entity: no error,
/// one entity, both memories linked to it.
#[tokio::test]
async fn concurrent_turns_create_one_entity() {
    let url = mnemo_pg_fixture::fresh_database();
    let options = PostgresOptions {
        url,
        max_connections: 4,
        lock_timeout: Duration::from_secs(10),
        ef_search: 100,
        synchronous_commit: true,
    };
    let one = PostgresStore::open(&options).await.unwrap();
    let two = PostgresStore::open(&options).await.unwrap();
    for round in 0..5 {
        let name = format!("Project Nova {round}");
        let first = turn("ana", "s1", &format!("working on {name}"));
        let second = turn("ana", "s1", &format!("{name} is late"));
        let nova = entity(&name, &name, EntityType::Project);
        let (event_a, event_b) = (format!("a{round}"), format!("b{round}"));
        let (a, b) = tokio::join!(
            one.insert_turn(&first, std::slice::from_ref(&nova), Some(&event_a), true),
            two.insert_turn(&second, std::slice::from_ref(&nova), Some(&event_b), true),
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.new_session != b.new_session || round > 0);
        let ids = one
            .entities_named(Some("ana"), std::slice::from_ref(&name))
            .await
            .unwrap();
        assert_eq!(ids.len(), 1, "{ids:?}");
        for memory in [a.memory_id.unwrap(), b.memory_id.unwrap()] {
            assert_eq!(
                entity_ids(&one, &memory).await,
                format!(r#"["{}"]"#, ids[0])
            );
        }
    }
    assert_eq!(
        count(&one, "SELECT COUNT(*) FROM sessions_consolidations").await,
        1
    );
}

/// A writer that does not hold the owner's lock and finds the entity being created by another
/// waits for it, then links the entity the other made.
#[tokio::test]
async fn find_or_create_survives_a_writer_without_the_lock() {
    let store = open_fresh().await;
    for id in ["m1", "m2"] {
        sqlx::query(
            "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
             VALUES ($1, 'fact', 'x', 'ana', 0, 0)",
        )
        .bind(id)
        .execute(store.pool())
        .await
        .unwrap();
    }
    let nova = [entity("Nova", "Nova", EntityType::Project)];
    let mut first = store.pool().begin().await.unwrap();
    link_entities::<PostgresStore>(&mut first, "m1", "ana", &nova, None)
        .await
        .unwrap();
    let pool = store.pool().clone();
    let racer = tokio::spawn(async move {
        let mut second = pool.begin().await.unwrap();
        let linked = link_entities::<PostgresStore>(
            &mut second,
            "m2",
            "ana",
            &[entity("the Nova project", "NOVA", EntityType::Project)],
            None,
        )
        .await;
        second.commit().await.unwrap();
        linked
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.commit().await.unwrap();
    assert_eq!(racer.await.unwrap().unwrap(), 1);
    let (id, aliases, mentions): (String, String, i64) =
        sqlx::query_as("SELECT id, aliases, mention_count FROM entities")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!((aliases.as_str(), mentions), (r#"["the Nova project"]"#, 2));
    assert_eq!(entity_ids(&store, "m2").await, format!(r#"["{id}"]"#));
}
