//! A fact's lifecycle on a fixture of two users' rows written in SQL both databases read:
//! decay, supersession, confirmation and resolving a conflict, with what each writes.

use chrono::{DateTime, TimeZone, Utc};

use super::{execute, fact, first_row, soft_delete, Conformant};
use crate::error::MemoryError;
use crate::search::CorpusStats;
use crate::store::sql::{Driver, SqlStore};
use crate::types::{DecayAction, SearchRequest};

/// 2026-01-01 00:00:00 UTC, the fixture's clock.
pub(crate) const BASE: i64 = 1_767_225_600;
pub(crate) const DAY: i64 = 86_400;

pub(crate) fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(seconds, 0).unwrap()
}

/// Rows of two users, a reflection of nobody, entities, links, sessions and events, in SQL that
/// SQLite and PostgreSQL both read.
pub(crate) fn fixture() -> Vec<String> {
    // id | kind | text | owner | chat | confidence | decay rate | last accessed | decayed at |
    // expires at | shared | attributes; `+Nd` is N days after `BASE`.
    let memories = [
        r#"fact_a1|fact|Ana likes green tea|ana||0.9|0.1|NULL|NULL|NULL|0|{"topic":"drinks"}"#,
        "fact_a2|fact|Ana works at Acme|ana||1.0|0.0|NULL|NULL|NULL|0|{}",
        r#"fact_a3|fact|Ana lives in Lisbon|ana||0.8|0.5|+2d|NULL|NULL|0|{"b":1,"a":[2,3]}"#,
        "fact_a4|fact|Ana is in Paris this week|ana||1.0|0.1|NULL|+1d|+3d|0|{}",
        "ep_a1|episode|I like green tea|ana||1.0|0.1|NULL|NULL|NULL|0|{}",
        r#"fact_b1|fact|Bob plays chess|bob|c1|0.7|0.2|NULL|NULL|NULL|1|{"zeta":true}"#,
        "fact_b2|fact|Bob has a cat|bob|c1|0.6|0.2|+20d|NULL|NULL|0|{}",
        "ep_b1|episode|Hello there|bob|c1|1.0|0.1|NULL|NULL|NULL|0|{}",
        "ref_x|reflection|Everyone likes tea|||1.0|0.1|NULL|NULL|NULL|0|{}",
    ];
    let mut statements: Vec<String> = memories
        .iter()
        .map(|row| {
            let fields: Vec<String> = row
                .split('|')
                .map(|field| match field.strip_prefix('+').and_then(|n| n.strip_suffix('d')) {
                    Some(days) => (BASE + days.parse::<i64>().unwrap() * DAY).to_string(),
                    None => field.to_owned(),
                })
                .collect();
            let [id, kind, content, owner, chat, confidence, rate, accessed, decayed, expires, shared, attributes] =
                &fields[..]
            else {
                panic!("a fixture row has 12 fields: {row}");
            };
            let session = match owner.as_str() {
                "ana" => "'s1'",
                "bob" => "'s2'",
                _ => "NULL",
            };
            format!(
                "INSERT INTO memories (id, kind, content, session_id, user_id, chat_id, \
                 event_time, created_at, confidence, decay_rate, last_accessed, decayed_at, \
                 expires_at, shared, attributes, tags) VALUES ('{id}', '{kind}', '{content}', \
                 {session}, NULLIF('{owner}', ''), NULLIF('{chat}', ''), {BASE}, {BASE}, \
                 {confidence}, {rate}, {accessed}, {decayed}, {expires}, {shared}, \
                 '{attributes}', '[\"x\"]')"
            )
        })
        .collect();
    statements.extend([
        "INSERT INTO entities (id, owner_id, canonical_name, type, aliases, mention_count) VALUES \
         ('ent_tea', 'ana', 'green tea', 'other', '[\"tea\"]', 2), \
         ('ent_chess', 'bob', 'chess', 'other', '[]', 1)"
            .into(),
        "INSERT INTO memory_entities (memory_id, entity_id) VALUES \
         ('fact_a1', 'ent_tea'), ('ep_a1', 'ent_tea'), ('fact_b1', 'ent_chess')"
            .into(),
        format!(
            "INSERT INTO sessions_consolidations (user_id, chat_id, session_id, first_seen_at) \
             VALUES ('ana', '', 's1', {BASE}), ('bob', 'c1', 's2', {BASE}), ('ana', 'c9', 's9', {BASE})"
        ),
        "INSERT INTO ingested_events (user_id, event_id, memory_id) VALUES \
         ('ana', 'e1', 'ep_a1'), ('bob', 'e2', 'ep_b1'), ('', 'e0', 'ep_a1')"
            .into(),
        "INSERT INTO embedding_queue (memory_id, enqueued_at) SELECT id, created_at FROM memories"
            .into(),
    ]);
    statements
}

/// Writes [`fixture`] into the store's database.
pub(crate) async fn fill<S: SqlStore>(store: &S) {
    for statement in fixture() {
        execute(store, &statement, None).await;
    }
}

/// Decay lowers each unprotected fact's confidence from its last access, last decay or creation,
/// and fades those that fall below the floor; a faded fact is not decayed again.
pub(super) async fn decay_fades_and_spares_protected_facts<S: Conformant>(store: &S) {
    fill(store).await;
    let report = store
        .decay(0.3, DecayAction::Archive, at(BASE + 10 * DAY))
        .await
        .unwrap();
    assert_eq!((report.decayed, report.faded), (2, 2));
    let rows = store
        .read(sqlx::QueryBuilder::new(
            "SELECT id, confidence, decayed_at, faded_at FROM memories WHERE kind = 'fact' \
             ORDER BY id",
        ))
        .await
        .unwrap();
    let now = BASE + 10 * DAY;
    let expected = [
        // From creation, 10 days at 0.1.
        ("fact_a1", 0.9 * (-0.1_f64 * 10.0).exp(), Some(now), None),
        // Protected.
        ("fact_a2", 1.0, None, None),
        // From the last access, 8 days at 0.5: faded.
        (
            "fact_a3",
            0.8 * (-0.5_f64 * 8.0).exp(),
            Some(now),
            Some(now),
        ),
        // From the last decay, 9 days at 0.1.
        ("fact_a4", (-0.1_f64 * 9.0).exp(), Some(now), None),
        (
            "fact_b1",
            0.7 * (-0.2_f64 * 10.0).exp(),
            Some(now),
            Some(now),
        ),
        // Accessed after `now`: no day has passed.
        ("fact_b2", 0.6, None, None),
    ];
    assert_eq!(rows.len(), expected.len());
    for (row, (id, confidence, decayed, faded)) in rows.iter().zip(expected) {
        assert_eq!(S::Db::text(row, "id").unwrap(), id);
        let stored = S::Db::float(row, "confidence").unwrap();
        assert_eq!(stored.to_bits(), confidence.to_bits(), "{id}");
        let times = (
            S::Db::opt_int(row, "decayed_at").unwrap(),
            S::Db::opt_int(row, "faded_at").unwrap(),
        );
        assert_eq!(times, (decayed, faded), "{id}");
    }
    // A faded fact is not decayed again; the same moment decays nothing.
    let report = store
        .decay(0.3, DecayAction::Archive, at(now))
        .await
        .unwrap();
    assert_eq!((report.decayed, report.faded), (0, 0));
}

/// The ids of `user`'s memories vector search finds near `[1, 0]`.
async fn vector_hits<S: Conformant>(store: &S, user: &str) -> Vec<String> {
    let request = SearchRequest {
        user_id: Some(user.into()),
        limit: 20,
        ..SearchRequest::default()
    };
    let mut ids: Vec<String> = store
        .search_vector(&request, &[1.0, 0.0], 20, -1.0)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    ids.sort();
    ids
}

/// With `decay_action = "soft_delete"` (the reference design's "facts with confidence < 0.05
/// are soft-deleted during the nightly execute_decay task"), a fact below the floor is
/// soft-deleted (`valid_until`, no `faded_at`) and loses its vector; the row stays. A fact an
/// earlier run faded is soft-deleted too; a protected fact is untouched.
pub(super) async fn decay_soft_deletes_below_the_floor_and_drops_vectors<S: Conformant>(store: &S) {
    fill(store).await;
    store.ensure_vector_index(2, "m").await.unwrap();
    let batch = store.next_index_batch(20).await.unwrap();
    let items: Vec<_> = batch
        .into_iter()
        .map(|item| (item, Some(vec![1.0, 0.0])))
        .collect();
    store.store_vectors(&items).await.unwrap();
    assert_eq!(
        vector_hits(store, "ana").await,
        ["ep_a1", "fact_a1", "fact_a2", "fact_a3", "fact_a4"]
    );
    let now = BASE + 10 * DAY;
    let report = store
        .decay(0.3, DecayAction::SoftDelete, at(now))
        .await
        .unwrap();
    assert_eq!(
        (report.decayed, report.faded, report.soft_deleted),
        (2, 0, 2)
    );
    let rows = store
        .read(sqlx::QueryBuilder::new(
            "SELECT id, confidence, valid_until, faded_at FROM memories WHERE kind = 'fact' \
             ORDER BY id",
        ))
        .await
        .unwrap();
    let expected = [
        ("fact_a1", 0.9 * (-0.1_f64 * 10.0).exp(), None),
        ("fact_a2", 1.0, None),
        // Below the floor: soft-deleted, its decayed confidence kept for audit.
        ("fact_a3", 0.8 * (-0.5_f64 * 8.0).exp(), Some(now)),
        ("fact_a4", (-0.1_f64 * 9.0).exp(), None),
        ("fact_b1", 0.7 * (-0.2_f64 * 10.0).exp(), Some(now)),
        ("fact_b2", 0.6, None),
    ];
    assert_eq!(rows.len(), expected.len());
    for (row, (id, confidence, retired)) in rows.iter().zip(expected) {
        assert_eq!(S::Db::text(row, "id").unwrap(), id);
        let stored = S::Db::float(row, "confidence").unwrap();
        assert_eq!(stored.to_bits(), confidence.to_bits(), "{id}");
        let times = (
            S::Db::opt_int(row, "valid_until").unwrap(),
            S::Db::opt_int(row, "faded_at").unwrap(),
        );
        assert_eq!(times, (retired, None), "{id}");
    }
    // The soft-deleted facts' vectors are gone; the others' stay.
    assert_eq!(
        vector_hits(store, "ana").await,
        ["ep_a1", "fact_a1", "fact_a2", "fact_a4"]
    );
    assert!(vector_hits(store, "bob")
        .await
        .iter()
        .all(|id| id != "fact_b1"));
    // A fact an earlier "archive" run faded is soft-deleted by the next "soft_delete" run.
    execute(
        store,
        "UPDATE memories SET faded_at = decayed_at, confidence = 0.2 WHERE id = 'fact_a1'",
        None,
    )
    .await;
    let later = now + DAY;
    let report = store
        .decay(0.3, DecayAction::SoftDelete, at(later))
        .await
        .unwrap();
    assert_eq!(
        (report.decayed, report.faded, report.soft_deleted),
        (1, 0, 1)
    );
    let row = first_row(
        store,
        "SELECT valid_until FROM memories WHERE id = 'fact_a1'",
        None,
    )
    .await;
    assert_eq!(S::Db::opt_int(&row, "valid_until").unwrap(), Some(later));
    assert_eq!(
        vector_hits(store, "ana").await,
        ["ep_a1", "fact_a2", "fact_a4"]
    );
}

/// Supersession names the newer fact on the older ones (the first supersession stands) and
/// records `supersedes` in the newer one's attributes as SQLite's `json_set` writes it;
/// confirming protects a fact of the asker's; resolving a conflict lowers the loser.
pub(super) async fn supersede_confirm_and_resolve_conflict_write_what_they_say<S: Conformant>(
    store: &S,
) {
    fill(store).await;
    let old = ["fact_a1", "fact_a4"].map(String::from);
    store
        .supersede(&old, "fact_a3", at(BASE + DAY))
        .await
        .unwrap();
    store
        .supersede(&old, "fact_a2", at(BASE + 2 * DAY))
        .await
        .unwrap();
    store.supersede(&[], "fact_a2", at(BASE)).await.unwrap();
    for id in old {
        let row = first_row(
            store,
            "SELECT superseded_at, superseded_by_id FROM memories WHERE id = ",
            Some(&id),
        )
        .await;
        let superseded = (
            S::Db::opt_int(&row, "superseded_at").unwrap(),
            S::Db::opt_text(&row, "superseded_by_id").unwrap(),
        );
        assert_eq!(
            superseded,
            (Some(BASE + DAY), Some("fact_a3".into())),
            "{id}"
        );
    }
    let attributes = |id: &'static str| async move {
        let row = first_row(
            store,
            "SELECT attributes FROM memories WHERE id = ",
            Some(id),
        )
        .await;
        S::Db::text(&row, "attributes").unwrap()
    };
    // The other keys stay where they were.
    assert_eq!(
        attributes("fact_a3").await,
        r#"{"b":1,"a":[2,3],"supersedes":"fact_a1"}"#
    );

    store.confirm("fact_a3", Some("ana")).await.unwrap();
    let row = first_row(
        store,
        "SELECT decay_rate, confidence FROM memories WHERE id = 'fact_a3'",
        None,
    )
    .await;
    let protected = (
        S::Db::float(&row, "decay_rate").unwrap(),
        S::Db::float(&row, "confidence").unwrap(),
    );
    assert_eq!(protected, (0.0, 1.0));
    for (id, user) in [("fact_b1", Some("ana")), ("ep_a1", None), ("missing", None)] {
        let error = store.confirm(id, user).await.unwrap_err();
        assert!(matches!(error, MemoryError::NotFound(_)), "{id}: {error}");
    }

    store.resolve_conflict("fact_b1", "fact_a3").await.unwrap();
    let row = first_row(
        store,
        "SELECT confidence FROM memories WHERE id = 'fact_b1'",
        None,
    )
    .await;
    assert_eq!(S::Db::float(&row, "confidence").unwrap(), 0.3);
    assert_eq!(
        attributes("fact_a3").await,
        r#"{"b":1,"a":[2,3],"supersedes":"fact_b1"}"#
    );
    let error = store
        .resolve_conflict("fact_b1", "missing")
        .await
        .unwrap_err();
    assert!(matches!(error, MemoryError::NotFound(_)), "{error}");
}

/// Full-text candidates as a search reads them, with statistics read afresh.
async fn search_fts<S: Conformant>(
    store: &S,
    request: &SearchRequest,
    limit: usize,
) -> crate::error::Result<Vec<(String, f64)>> {
    crate::search::search_fts(store, &CorpusStats::default(), request, limit).await
}

/// A soft-deleted memory leaves full-text and vector search but keeps its row, which a request
/// including deleted memories finds.
pub(super) async fn soft_delete_hides_a_row_from_every_list_but_keeps_it<S: Conformant>(store: &S) {
    store.ensure_vector_index(2, "m").await.unwrap();
    let id = store
        .insert_memory(&fact("ana", "the boiler code is 1234"), &[])
        .await
        .unwrap();
    let batch = store.next_index_batch(10).await.unwrap();
    store
        .store_vectors(&[(batch[0].clone(), Some(vec![1.0, 0.0]))])
        .await
        .unwrap();
    let at = Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap();
    assert!(soft_delete(store, &id, at).await);
    assert!(!soft_delete(store, &id, at).await, "already deleted");
    let request = SearchRequest {
        query: "boiler".into(),
        user_id: Some("ana".into()),
        limit: 5,
        ..SearchRequest::default()
    };
    assert!(search_fts(store, &request, 5).await.unwrap().is_empty());
    assert!(store
        .search_vector(&request, &[1.0, 0.0], 5, -1.0)
        .await
        .unwrap()
        .is_empty());
    let kept = store.get(&id).await.unwrap().expect("the row is kept");
    assert_eq!(kept.valid_until, Some(at));
    let with_deleted = SearchRequest {
        include_deleted: true,
        ..request
    };
    let found: Vec<String> = search_fts(store, &with_deleted, 5)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(found, vec![id]);
}
