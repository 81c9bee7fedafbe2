//! Trust by source (issue #47): each memory keeps its origin, ranking reads it, a model's fact
//! that contradicts a stated one only contests it, and the user's confirmation settles it.

use super::{fact, turn, Conformant};
use crate::store::NewMemory;
use crate::types::{Origin, SearchRequest, CONTRADICTS};

pub(super) async fn origins_are_kept_and_a_contest_waits_for_the_users_confirmation<
    S: Conformant,
>(
    store: &S,
) {
    let said = store
        .insert_memory(&turn("ana", "s1", "I work at Globex"), &[])
        .await
        .unwrap();
    let answered = store
        .insert_memory(
            &NewMemory {
                source_role: Some("assistant".into()),
                origin: Origin::Agent,
                ..turn("ana", "s1", "Congratulations on Globex")
            },
            &[],
        )
        .await
        .unwrap();
    let stated = store
        .insert_memory(&fact("ana", "Ana works at Globex"), &[])
        .await
        .unwrap();
    let inferred = store
        .insert_memory(
            &NewMemory {
                origin: Origin::Inferred,
                ..fact("ana", "Ana works at Initech")
            },
            &[],
        )
        .await
        .unwrap();
    for (id, origin) in [
        (&said, Origin::User),
        (&answered, Origin::Agent),
        (&stated, Origin::Told),
        (&inferred, Origin::Inferred),
    ] {
        assert_eq!(store.get(id).await.unwrap().unwrap().origin, origin, "{id}");
    }
    let keys = store
        .rank_keys(
            &[said.clone(), answered.clone(), inferred.clone()],
            &SearchRequest {
                user_id: Some("ana".into()),
                ..SearchRequest::default()
            },
            true,
        )
        .await
        .unwrap();
    assert_eq!(keys[&said].origin, Origin::User);
    assert_eq!(keys[&answered].origin, Origin::Agent);
    assert_eq!(keys[&inferred].origin, Origin::Inferred);

    // Contesting twice lists the stated fact once and leaves it whole.
    store.contest(&stated, &inferred).await.unwrap();
    store.contest(&stated, &inferred).await.unwrap();
    let contested = store.get(&inferred).await.unwrap().unwrap();
    assert_eq!(
        contested.attributes[CONTRADICTS],
        serde_json::json!([stated.clone()])
    );
    let untouched = store.get(&stated).await.unwrap().unwrap();
    assert_eq!(
        (untouched.confidence, untouched.superseded_by_id),
        (1.0, None)
    );
    assert!(store.contest("missing", &inferred).await.is_err());

    // The user's confirmation makes the model's fact theirs and settles the contest.
    let superseded = store.confirm(&inferred, Some("ana")).await.unwrap();
    assert_eq!(superseded, vec![stated.clone()]);
    let confirmed = store.get(&inferred).await.unwrap().unwrap();
    assert_eq!(confirmed.origin, Origin::Told);
    assert_eq!(
        confirmed.attributes.get("confirmed_origin"),
        Some(&serde_json::json!("inferred"))
    );
    assert!(!confirmed.attributes.contains_key(CONTRADICTS));
    assert_eq!(
        confirmed.attributes.get("supersedes"),
        Some(&serde_json::json!(stated.clone()))
    );
    assert_eq!(store.get(&stated).await.unwrap().unwrap().confidence, 0.3);
    // Confirming again changes nothing more.
    assert_eq!(
        store.confirm(&inferred, Some("ana")).await.unwrap(),
        Vec::<String>::new()
    );
}
