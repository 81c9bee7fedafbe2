//! Forgetting follows lineage (issue #47): what was derived from a forgotten memory goes with
//! it, what still stands on other sources stays without it, corrections and other sources'
//! facts are untouched, and every forget and erasure leaves a receipt in the audit table.

use chrono::{DateTime, Utc};
use mnemo_ner_api::EntityType;
use serde_json::{json, Map};

use super::{entity, fact, turn, Conformant};
use crate::store::{ForgetRequest, NewMemory};
use crate::types::{MemoryKind, ReceiptEntry};

async fn stored<S: Conformant>(store: &S, memory: NewMemory) -> String {
    store.insert_memory(&memory, &[]).await.unwrap()
}

fn derived(content: &str, kind: MemoryKind, sources: &[&str]) -> NewMemory {
    NewMemory {
        kind,
        source_ids: sources.iter().map(|id| (*id).to_owned()).collect(),
        ..fact("ana", content)
    }
}

fn entry(id: &str, kind: &str, why: &str) -> ReceiptEntry {
    ReceiptEntry {
        id: id.into(),
        kind: kind.into(),
        why: why.into(),
    }
}

fn forget_request(ids: &[String], at: DateTime<Utc>) -> ForgetRequest<'_> {
    ForgetRequest {
        ids,
        soft: false,
        user_id: Some("ana"),
        at,
        query_vectors: 3,
    }
}

pub(super) async fn forgetting_follows_lineage_and_leaves_a_receipt<S: Conformant>(store: &S) {
    let locker = store
        .insert_memory(
            &turn(
                "ana",
                "s1",
                "My locker code is tok123, Zorblax keeps the spare key",
            ),
            &[entity("Zorblax", "Zorblax", EntityType::Person)],
        )
        .await
        .unwrap();
    let gym = stored(
        store,
        turn(
            "ana",
            "s1",
            "I go to the gym every morning, locker by the door",
        ),
    )
    .await;
    let tea = stored(store, turn("ana", "s1", "I love oolong tea from Taiwan")).await;
    let fact = MemoryKind::Fact;
    let code = stored(
        store,
        derived("The user's locker code is tok123", fact, &[&locker]),
    )
    .await;
    let mornings = stored(
        store,
        derived(
            "The user goes to the gym every morning",
            fact,
            &[&locker, &gym],
        ),
    )
    .await;
    let leaky = stored(
        store,
        derived(
            "The user's locker by the door has code tok123",
            fact,
            &[&locker, &gym],
        ),
    )
    .await;
    let oolong = stored(store, derived("The user loves oolong tea", fact, &[&tea])).await;
    // A correction names the fact it corrects, but is the user's own word.
    let mut corrects = Map::new();
    corrects.insert("corrects".into(), json!(oolong));
    let green = stored(
        store,
        NewMemory {
            attributes: corrects,
            ..derived("The user now prefers green tea", fact, &[&oolong])
        },
    )
    .await;
    let weekly = stored(
        store,
        derived(
            "Ana guards her gym locker",
            MemoryKind::Reflection,
            &[&code, &oolong],
        ),
    )
    .await;

    let at = super::at(3, 0);
    let asked = [locker.clone()];
    let forgetting = store.forget(&forget_request(&asked, at)).await.unwrap();
    let receipt = &forgetting.receipt;
    assert_eq!(receipt.action, "forget");
    assert_eq!(receipt.user_id.as_deref(), Some("ana"));
    assert_eq!(receipt.requested, asked);
    let mut removed = receipt.removed.clone();
    let zorblax = removed.pop().expect("the entity");
    assert_eq!(
        (zorblax.kind.as_str(), zorblax.why.as_str()),
        ("entity", "no_mentions_left")
    );
    assert_eq!(
        removed,
        [
            entry(&locker, "episode", "forgotten"),
            entry(&code, "fact", "all_sources_forgotten"),
            entry(&leaky, "fact", "not_grounded_without_source"),
            entry(&weekly, "reflection", "built_on_removed"),
        ]
    );
    assert_eq!(receipt.changed, [entry(&mornings, "fact", "lost_sources")]);
    assert_eq!(receipt.artefacts["memory_rows"], 4);
    assert_eq!(receipt.artefacts["entity_links"], 1);
    assert_eq!(receipt.artefacts["query_vectors"], 3);
    assert_eq!(receipt.artefacts["copies_announced"], 4);
    assert_eq!(forgetting.forgotten.len(), 4);

    for gone in [&locker, &code, &leaky, &weekly] {
        assert!(store.get(gone).await.unwrap().is_none(), "{gone} is gone");
    }
    let kept = store.get(&mornings).await.unwrap().unwrap();
    assert_eq!(
        kept.source_ids,
        [gym.as_str()],
        "it lost the forgotten source"
    );
    for untouched in [&gym, &tea, &oolong, &green] {
        assert!(
            store.get(untouched).await.unwrap().is_some(),
            "{untouched} stays"
        );
    }
    assert!(store
        .entities_named(Some("ana"), &["Zorblax".to_owned()])
        .await
        .unwrap()
        .is_empty());

    // The audit table keeps the receipt; forgetting the corrected fact spares its correction.
    let oolong_gone = [oolong.clone()];
    let second = store
        .forget(&forget_request(&oolong_gone, at))
        .await
        .unwrap();
    assert_eq!(
        second.receipt.removed,
        [entry(&oolong, "fact", "forgotten")]
    );
    assert!(
        store.get(&green).await.unwrap().is_some(),
        "the correction stays"
    );
    let kept: Vec<String> = store
        .receipts(Some("ana"), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|receipt| receipt.id)
        .collect();
    let mut both = vec![receipt.id.clone(), second.receipt.id.clone()];
    both.sort();
    let mut found = kept.clone();
    found.sort();
    assert_eq!(found, both);

    // Erasing the user leaves only the erasure's receipt.
    let erasure = store.erase_user("ana").await.unwrap();
    assert_eq!(erasure.receipt.action, "erase_user");
    assert!(erasure
        .receipt
        .removed
        .iter()
        .any(|entry| entry.id == green && entry.why == "erased"));
    let left: Vec<String> = store
        .receipts(Some("ana"), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|receipt| receipt.id)
        .collect();
    assert_eq!(left, [erasure.receipt.id]);
}
