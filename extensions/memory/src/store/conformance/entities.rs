//! Entities: found by name and alias whatever the case, enriched, linked to their earlier and
//! later mentions, and read back with their memories, links and co-mentions.

use mnemo_ner_api::EntityType;

use super::{
    at, count, entity, entity_ids, execute, fact, first_row, mention_count, person, Conformant,
};
use crate::store::sql::Driver;

/// An entity is found by its name or an alias whatever the case; a new surface form becomes
/// an alias, and the memory's `entity_ids` lists its links.
pub(super) async fn entities_are_found_by_name_and_alias_whatever_the_case<S: Conformant>(
    store: &S,
) {
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
    let row = first_row(
        store,
        "SELECT canonical_name, aliases FROM entities WHERE id = ",
        Some(sarah),
    )
    .await;
    let text = |column| S::Db::text(&row, column).unwrap();
    assert_eq!(
        [text("canonical_name"), text("aliases")],
        ["Sarah Connor", r#"["Sarah","Sal"]"#]
    );
    assert_eq!(mention_count(store, sarah).await, 3);
    assert_eq!(
        count(
            store,
            "SELECT COUNT(*) AS n FROM entities WHERE owner_id = 'ana'"
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
        assert_eq!(entity_ids(store, id).await, format!(r#"["{sarah}"]"#));
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
pub(super) async fn enrichment_adds_links_and_counts_failures<S: Conformant>(store: &S) {
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
    let row = first_row(
        store,
        "SELECT attributes FROM memories WHERE id = ",
        Some(&id),
    )
    .await;
    let attributes: serde_json::Value =
        serde_json::from_str(&S::Db::text(&row, "attributes").unwrap()).unwrap();
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
pub(super) async fn a_new_entity_links_earlier_and_later_mentions<S: Conformant>(store: &S) {
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
    execute(
        store,
        "UPDATE memories SET valid_until = 1 WHERE id = ",
        Some(&deleted),
    )
    .await;
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
    assert_eq!(mention_count(store, &dana).await, 3);
    for id in [&earlier, &named] {
        assert_eq!(entity_ids(store, id).await, format!(r#"["{dana}"]"#));
    }
    for id in [&apart, &deleted, &others] {
        assert_eq!(entity_ids(store, id).await, "[]", "{id}");
    }
    // Later: named without NER, at the start of a sentence, in another case.
    let later = store
        .insert_memory(&fact("ana", "DANA SCULLY called twice"), &[])
        .await
        .unwrap();
    assert_eq!(entity_ids(store, &later).await, format!(r#"["{dana}"]"#));
    assert_eq!(mention_count(store, &dana).await, 4);
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
    assert_ne!(entity_ids(store, &date).await, "[]");
    assert_eq!(entity_ids(store, &plans).await, "[]");
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
        entity_ids(store, &draper).await,
        format!(r#"["{}","{}"]"#, dons[0], dons[1])
    );
    assert_eq!(entity_ids(store, &betty).await, "[]");
    assert_eq!(entity_ids(store, &donna).await, "[]");
}

/// An entity's memories are its active, unsuperseded ones in scope, newest first; links are
/// walked newest first, and co-mentions count the other entities a memory names.
pub(super) async fn entity_info_and_link_order<S: Conformant>(store: &S) {
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
    execute(
        store,
        "UPDATE memories SET superseded_at = 1 WHERE id = ",
        Some(&m5),
    )
    .await;

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
