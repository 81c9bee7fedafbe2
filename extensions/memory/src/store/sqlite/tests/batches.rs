//! Turns stored in batches: one transaction for all of them.

use super::{fact, open};
use crate::store::backend::*;
use crate::types::MemoryKind;

/// A batch of turns is one transaction: when the database refuses one of them, none is stored,
/// not even those before it.
#[tokio::test]
async fn a_batch_of_turns_is_stored_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("memory.db")).await;
    // The database refuses one text (as a full disk or a constraint would refuse a write).
    sqlx::query(
        "CREATE TRIGGER refuse BEFORE INSERT ON memories WHEN NEW.content = 'refused' \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let turn = |content: &str| {
        let mut memory = fact(content);
        memory.kind = MemoryKind::Episode;
        memory.user_id = Some("ana".into());
        memory.session_id = Some("s1".into());
        memory
    };
    let turns = [turn("one"), turn("two"), turn("refused"), turn("four")];
    let ids = ["e1", "e2", "e3", "e4"];
    let rows: Vec<crate::store::TurnRow<'_>> = turns
        .iter()
        .zip(ids)
        .map(|(memory, id)| crate::store::TurnRow {
            memory,
            entities: &[],
            event_id: Some(id),
            record_session: true,
        })
        .collect();
    let error = store.insert_turns(&rows).await.unwrap_err();
    assert!(error.to_string().contains("refused by the test"), "{error}");
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ingested_events")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!((count, events), (0, 0));
    // Without the refused one, all are stored at once, and an id twice in a batch once.
    let rows = [rows[0], rows[1], rows[3], rows[0]];
    let stored = store.insert_turns(&rows).await.unwrap();
    let kept: Vec<bool> = stored.iter().map(|turn| turn.memory_id.is_some()).collect();
    assert_eq!(kept, [true, true, true, false]);
}
