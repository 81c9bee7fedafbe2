//! Storing turns: each user's event once, and a batch of turns in one transaction.

use super::{count, first_row, turn, Conformant};
use crate::store::sql::Driver;
use crate::store::TurnRow;

/// An event is stored once per user: replayed, it stores nothing; another user's event of the
/// same id is theirs; an event recorded for no user ('') stands for every user's.
pub(super) async fn insert_turn_stores_each_users_event_once<S: Conformant>(store: &S) {
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
    super::execute(
        store,
        "INSERT INTO ingested_events (user_id, event_id, memory_id) VALUES ('', 'old', 'x')",
        None,
    )
    .await;
    let old = store
        .insert_turn(&turn("cy", "s1", "hello"), &[], Some("old"), false)
        .await
        .unwrap();
    // A record whose memory is gone names none.
    assert_eq!((old.memory_id, old.earlier), (None, None));
    assert_eq!(count(store, "SELECT COUNT(*) AS n FROM memories").await, 2);
    assert_eq!(
        count(store, "SELECT COUNT(*) AS n FROM embedding_queue").await,
        2
    );
    assert_eq!(
        count(
            store,
            "SELECT COUNT(*) AS n FROM ingested_events WHERE event_id = 'e1'"
        )
        .await,
        2
    );
    // Without a session record, no session row is written.
    assert_eq!(
        count(store, "SELECT COUNT(*) AS n FROM sessions_consolidations").await,
        0
    );
    let row = first_row(
        store,
        "SELECT kind, source_role, shared, source_ids, attributes FROM memories WHERE id = ",
        Some(&id),
    )
    .await;
    let text = |column| S::Db::text(&row, column).unwrap();
    assert_eq!(
        [
            text("kind"),
            text("source_role"),
            text("source_ids"),
            text("attributes")
        ],
        ["episode", "user", "[]", "{}"]
    );
    assert_eq!(S::Db::int(&row, "shared").unwrap(), 0);
}

/// A batch of turns is one transaction: when the database refuses one of them, none is stored,
/// not even those before it; without it, all are stored at once, and an event twice in a batch
/// once.
pub(super) async fn a_batch_of_turns_is_stored_whole_or_not_at_all<S: Conformant>(store: &S) {
    store.refuse_content("refused").await;
    let turns = [
        turn("ana", "s1", "one"),
        turn("ana", "s1", "two"),
        turn("bo", "s1", "refused"),
        turn("bo", "s1", "four"),
    ];
    let rows: Vec<TurnRow<'_>> = turns
        .iter()
        .zip(["e1", "e2", "e3", "e4"])
        .map(|(memory, id)| TurnRow {
            memory,
            entities: &[],
            event_id: Some(id),
            record_session: true,
            provider: None,
        })
        .collect();
    let error = store.insert_turns(&rows).await.unwrap_err();
    assert!(error.to_string().contains("refused by the test"), "{error}");
    for table in ["memories", "ingested_events", "sessions_consolidations"] {
        let sql = format!("SELECT COUNT(*) AS n FROM {table}");
        assert_eq!(count(store, &sql).await, 0, "{table}");
    }
    let rows = [rows[0], rows[1], rows[3], rows[0]];
    let stored = store.insert_turns(&rows).await.unwrap();
    let kept: Vec<bool> = stored.iter().map(|turn| turn.memory_id.is_some()).collect();
    assert_eq!(kept, [true, true, true, false]);
}
