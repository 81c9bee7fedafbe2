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
    ReceiptEntry::new(id, kind, why)
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

/// A turn of `ana`'s ("I go to the gym every morning, locker by the door") and the facts drawn
/// from it and from the turn `locker` ("My locker code is tok123 …"): one from `locker` alone,
/// one from both that stands on the gym turn alone, one from both that does not (it holds the
/// code). Their ids: the gym turn's first.
async fn locker_facts<S: Conformant>(store: &S, locker: &str) -> (String, String, String, String) {
    let gym = turn(
        "ana",
        "s1",
        "I go to the gym every morning, locker by the door",
    );
    let gym = stored(store, gym).await;
    let fact = MemoryKind::Fact;
    let code = derived("The user's locker code is tok123", fact, &[locker]);
    let mornings = derived(
        "The user goes to the gym every morning",
        fact,
        &[locker, &gym],
    );
    let leaky = derived(
        "The user's locker by the door has code tok123",
        fact,
        &[locker, &gym],
    );
    (
        gym,
        stored(store, code).await,
        stored(store, mornings).await,
        stored(store, leaky).await,
    )
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
    let tea = stored(store, turn("ana", "s1", "I love oolong tea from Taiwan")).await;
    let (gym, code, mornings, leaky) = locker_facts(store, &locker).await;
    let fact = MemoryKind::Fact;
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
    assert_eq!(
        receipt.changed,
        [ReceiptEntry {
            lost_sources: vec![locker.clone()],
            ..entry(&mornings, "fact", "lost_sources")
        }]
    );
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

/// Whether the memory `id` is active (stored and not soft-deleted).
async fn active<S: Conformant>(store: &S, id: &str) -> bool {
    let memory = store.get(id).await.unwrap().expect("the row stays");
    memory.valid_until.is_none()
}

pub(super) async fn restoring_a_soft_forget_undoes_what_it_took<S: Conformant>(store: &S) {
    let locker = stored(store, turn("ana", "s1", "My locker code is tok123")).await;
    let (gym, code, mornings, leaky) = locker_facts(store, &locker).await;
    let weekly = stored(
        store,
        derived(
            "Ana guards her gym locker",
            MemoryKind::Reflection,
            &[&code],
        ),
    )
    .await;

    let asked = [locker.clone()];
    let soft = ForgetRequest {
        soft: true,
        ..forget_request(&asked, super::at(3, 0))
    };
    let forgetting = store.forget(&soft).await.unwrap();
    assert_eq!(forgetting.receipt.action, "forget_soft");
    for retired in [&locker, &code, &leaky, &weekly] {
        assert!(!active(store, retired).await, "{retired} is soft-deleted");
    }
    let kept = store.get(&mornings).await.unwrap().unwrap();
    assert_eq!(kept.source_ids, [gym.as_str()]);

    // A memory the forget took with it comes back alone: it was not what the forget asked for.
    let alone = store.restore(&code).await.unwrap();
    assert_eq!(alone.restored, [code.as_str()]);
    assert!(alone.sources_back.is_empty());
    assert!(!active(store, &leaky).await, "the rest stays retired");

    // The memory the forget asked for comes back with the rest of what it took.
    let undone = store.restore(&locker).await.unwrap();
    assert_eq!(
        undone.restored,
        [locker.as_str(), leaky.as_str(), weekly.as_str()]
    );
    assert_eq!(undone.sources_back, [mornings.as_str()]);
    for back in [&locker, &code, &leaky, &weekly, &mornings, &gym] {
        assert!(active(store, back).await, "{back} is active");
    }
    let mornings = store.get(&mornings).await.unwrap().unwrap();
    assert_eq!(mornings.source_ids, [gym.as_str(), locker.as_str()]);
    for queued in [&locker, &leaky, &weekly] {
        let sql = format!("SELECT COUNT(*) AS n FROM embedding_queue WHERE memory_id = '{queued}'");
        assert_eq!(
            super::count(store, &sql).await,
            1,
            "{queued} waits for its vector"
        );
    }

    // Active again, so there is nothing more to restore; and a memory retired otherwise (a
    // soft forget of it alone, later) comes back by its own receipt, not the first one's.
    assert!(store.restore(&locker).await.unwrap().restored.is_empty());
    let leaky_alone = [leaky.clone()];
    let later = ForgetRequest {
        soft: true,
        ..forget_request(&leaky_alone, super::at(4, 0))
    };
    store.forget(&later).await.unwrap();
    let again = store.restore(&leaky).await.unwrap();
    assert_eq!(again.restored, [leaky.as_str()]);
    assert!(again.sources_back.is_empty());
    assert!(active(store, &code).await && active(store, &locker).await);
}
