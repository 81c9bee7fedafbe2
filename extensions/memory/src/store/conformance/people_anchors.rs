//! Identity anchoring (seed 000: "identity anchoring via external_id/external_provider on
//! Person (for stable IDs across username changes)"): a person found by their external id
//! whatever they are called, an id unique within one owner's people and never matched across
//! owners, and a conflicting anchor refused with nothing changed.

use sqlx::QueryBuilder;

use super::Conformant;
use crate::error::MemoryError;
use crate::store::sql::{Bind, Run};
use crate::types::ExternalId;

/// Anchors, looks up by external id, keeps a new name as an alias, keeps owners apart, and
/// refuses an id that anchors another person or a person carrying another id, changing
/// nothing; the database's unique index refuses a second holder even past the store's checks.
pub(super) async fn people_are_anchored_by_external_id_per_owner<S: Conformant>(store: &S) {
    let telegram = ExternalId::new("Telegram", " 12345 ").unwrap();
    assert_eq!(
        (telegram.provider.as_str(), telegram.external_id.as_str()),
        ("telegram", "12345")
    );
    let sarah = store
        .upsert_person("ana", "Sarah", Some("wife"))
        .await
        .unwrap();
    assert_eq!(sarah.external_id, None);
    assert!(store
        .person_by_external_id("ana", &telegram)
        .await
        .unwrap()
        .is_none());

    let anchored = store
        .anchor_person("ana", &sarah.id, &telegram, None)
        .await
        .unwrap();
    assert_eq!(anchored.id, sarah.id);
    assert_eq!(anchored.external_id.as_deref(), Some("12345"));
    assert_eq!(anchored.provider.as_deref(), Some("telegram"));
    assert!(anchored.aliases.is_empty());
    let found = store
        .person_by_external_id("ana", &telegram)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, anchored);
    // Never across owners.
    assert!(store
        .person_by_external_id("bo", &telegram)
        .await
        .unwrap()
        .is_none());

    // Called by another name: the same person, the name an alias (once, whatever the case).
    for called in ["Sally", "SALLY", "sarah", " "] {
        let again = store
            .anchor_person("ana", &sarah.id, &telegram, Some(called))
            .await
            .unwrap();
        assert_eq!(again.aliases, ["Sally"], "{called}");
    }
    let sally = store.person_by_name("ana", "sally").await.unwrap().unwrap();
    assert_eq!(sally.id, sarah.id);
    assert_eq!(sally.external_id.as_deref(), Some("12345"));

    // The same id under another owner is another person.
    let bos = store.upsert_person("bo", "Sarah", None).await.unwrap();
    assert_ne!(bos.id, sarah.id);
    store
        .anchor_person("bo", &bos.id, &telegram, None)
        .await
        .unwrap();
    let (ana_found, bo_found) = (
        store.person_by_external_id("ana", &telegram).await.unwrap(),
        store.person_by_external_id("bo", &telegram).await.unwrap(),
    );
    assert_eq!(ana_found.map(|p| p.id), Some(sarah.id.clone()));
    assert_eq!(bo_found.map(|p| p.id), Some(bos.id.clone()));

    // An id that anchors another of the owner's people: refused, John unchanged.
    let john = store.upsert_person("ana", "John", None).await.unwrap();
    let refused = store
        .anchor_person("ana", &john.id, &telegram, Some("Johnny"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, MemoryError::Invalid(message) if message.contains("already anchors `Sarah`")),
        "{refused}"
    );
    assert_eq!(
        store.person_by_name("ana", "John").await.unwrap(),
        Some(john.clone())
    );
    assert!(store
        .person_by_name("ana", "Johnny")
        .await
        .unwrap()
        .is_none());

    // A person carrying another id: refused, Sarah unchanged.
    let other = ExternalId::new("telegram", "999").unwrap();
    let refused = store
        .anchor_person("ana", &sarah.id, &other, Some("Sal"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, MemoryError::Invalid(message) if message.contains("carries telegram id `12345`")),
        "{refused}"
    );
    assert_eq!(
        store.person_by_name("ana", "Sarah").await.unwrap(),
        Some(sally)
    );
    assert!(store
        .person_by_external_id("ana", &other)
        .await
        .unwrap()
        .is_none());

    // No such person of this owner: another owner's person is not one.
    let missing = store
        .anchor_person("ana", &bos.id, &other, None)
        .await
        .unwrap_err();
    assert!(matches!(missing, MemoryError::NotFound(_)), "{missing}");

    // The unique index holds whatever writes the row.
    let mut update =
        QueryBuilder::<S::Db>::new("UPDATE entities SET provider = 'telegram', external_id = ");
    update.text("12345").push(" WHERE id = ").text(&john.id);
    let mut connection = store.pool().acquire().await.unwrap();
    assert!(S::Db::execute(&mut connection, update).await.is_err());
}
