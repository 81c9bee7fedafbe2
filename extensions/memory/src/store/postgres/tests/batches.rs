//! Turns stored in batches: one transaction for all of them, as in SQLite.

use super::ingest_and_entities::turn;
use super::open_fresh;
use crate::store::backend::*;

/// A batch of turns is one transaction, as in SQLite: when the database refuses one of them,
/// none is stored.
#[tokio::test]
async fn a_batch_of_turns_is_stored_whole_or_not_at_all() {
    let store = open_fresh().await;
    sqlx::query(
        "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN \
         IF NEW.content = 'refused' THEN RAISE EXCEPTION 'refused by the test'; END IF; \
         RETURN NEW; END $$ LANGUAGE plpgsql",
    )
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "CREATE TRIGGER refuse BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let turns = [
        turn("ana", "s1", "one"),
        turn("ana", "s1", "two"),
        turn("bo", "s1", "refused"),
        turn("bo", "s1", "four"),
    ];
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
    let rows = [rows[0], rows[1], rows[3], rows[0]];
    let stored = store.insert_turns(&rows).await.unwrap();
    let kept: Vec<bool> = stored.iter().map(|turn| turn.memory_id.is_some()).collect();
    assert_eq!(kept, [true, true, true, false]);
}
