//! The PostgreSQL store against the SQLite store: the same rows in both, the same call, then the
//! same export; and exports copied between the two backends and back without a difference.

use serde_json::Value;

use super::*;
use crate::types::DecayAction;
/// Runs the same call on a SQLite and a PostgreSQL store and checks that both return the same
/// and leave the same rows.
macro_rules! same_on_both {
    ($sqlite:expr, $postgres:expr, |$store:ident| $call:expr) => {{
        let from_sqlite = {
            let $store = &$sqlite;
            $call.await
        };
        let from_postgres = {
            let $store = &$postgres;
            $call.await
        };
        assert_eq!(
            format!("{from_sqlite:?}"),
            format!("{from_postgres:?}"),
            "{}",
            stringify!($call)
        );
        assert_eq!(
            comparable($sqlite.export_rows(None).await.unwrap()),
            comparable($postgres.export_rows(None).await.unwrap()),
            "after {}",
            stringify!($call)
        );
    }};
}

/// Exported records without what two stores cannot share: a forget receipt's id and time.
fn comparable(mut records: Vec<Value>) -> Vec<Value> {
    for record in &mut records {
        if record["type"] != "forget_receipts" {
            continue;
        }
        let row = &mut record["row"];
        let mut receipt: Value =
            serde_json::from_str(row["receipt"].as_str().unwrap_or_default()).unwrap();
        for unique in ["id", "at"] {
            receipt[unique] = Value::Null;
        }
        row["receipt"] = receipt;
        row["id"] = Value::Null;
        row["created_at"] = Value::Null;
    }
    // Receipts are exported in the order of their ids, which differ.
    let (mut receipts, mut rest): (Vec<Value>, Vec<Value>) = records
        .into_iter()
        .partition(|record| record["type"] == "forget_receipts");
    receipts.sort_by_key(Value::to_string);
    rest.extend(receipts);
    rest
}

#[tokio::test]
async fn every_lifecycle_and_removal_call_leaves_what_sqlite_leaves() {
    let (_dir, sqlite) = open_sqlite().await;
    fill(&sqlite).await;
    let postgres = open_fresh().await;
    fill(&postgres).await;
    assert_eq!(
        sqlite.export_rows(None).await.unwrap(),
        postgres.export_rows(None).await.unwrap()
    );
    same_on_both!(sqlite, postgres, |store| store.decay(
        0.3,
        DecayAction::Archive,
        at(BASE + 10 * DAY)
    ));
    same_on_both!(sqlite, postgres, |store| store.decay(
        0.3,
        DecayAction::SoftDelete,
        at(BASE + 13 * DAY)
    ));
    same_on_both!(sqlite, postgres, |store| store.expire(at(BASE + 5 * DAY)));
    let old = ["fact_a1".to_owned(), "fact_b1".to_owned()];
    same_on_both!(sqlite, postgres, |store| store.supersede(
        &old,
        "fact_a3",
        at(BASE + 11 * DAY)
    ));
    same_on_both!(sqlite, postgres, |store| store
        .confirm("fact_a2", Some("ana")));
    same_on_both!(sqlite, postgres, |store| store
        .confirm("fact_b1", Some("ana")));
    same_on_both!(sqlite, postgres, |store| store.confirm("fact_a4", None));
    same_on_both!(sqlite, postgres, |store| store
        .resolve_conflict("fact_a1", "fact_b1"));
    same_on_both!(sqlite, postgres, |store| store
        .resolve_conflict("fact_a1", "nope"));
    for user in ["ana", "bob"] {
        assert_eq!(
            sqlite.export_rows(Some(user)).await.unwrap(),
            postgres.export_rows(Some(user)).await.unwrap(),
            "{user}"
        );
    }
    let ids = ["fact_b2", "nope", "ep_a1", "fact_b2"].map(String::from);
    same_on_both!(sqlite, postgres, |store| crate::store::purge(store, &ids));
    // The receipts' ids and times differ; what was removed does not.
    for user in ["bob", "nobody"] {
        same_on_both!(sqlite, postgres, |store| async {
            store
                .erase_user(user)
                .await
                .map(|erasure| (erasure.erased, erasure.receipt.removed))
        });
    }
}

/// Imports `records` into `store`, checking that each is new.
async fn import_all(store: &dyn MemoryExport, records: &[Value]) {
    for record in records {
        let inserted = store
            .import_row(record["type"].as_str().unwrap(), &record["row"])
            .await
            .unwrap();
        assert!(inserted, "{record}");
    }
}

#[tokio::test]
async fn export_imports_into_another_database_as_it_was() {
    let first = open_fresh().await;
    fill(&first).await;
    sqlx::query(
        "INSERT INTO memory_entities (memory_id, entity_id) VALUES ('ep_b1', 'ent_chess'), \
         ('fact_a3', 'ent_tea')",
    )
    .execute(first.pool())
    .await
    .unwrap();
    sqlx::query(
        "UPDATE entities SET embedding = $1, summary = 'Ünïcødé \"q\"\n' WHERE id = 'ent_tea'",
    )
    .bind(vec![0_u8, 0xff, 0x10])
    .execute(first.pool())
    .await
    .unwrap();
    let exported = first.export_rows(None).await.unwrap();
    assert_eq!(exported.len(), 9 + 2 + 5 + 3 + 3);
    let tea = exported
        .iter()
        .find(|record| record["row"]["id"] == "ent_tea")
        .unwrap();
    assert_eq!(tea["row"]["embedding"], "00ff10");
    assert_eq!(tea["row"]["mention_count"], Value::from(2));
    // Memories come in the order they were stored, as SQLite gives them.
    assert_eq!(exported[0]["row"]["id"], "fact_a1");
    let episode = &exported
        .iter()
        .find(|record| record["row"]["id"] == "ep_a1")
        .unwrap()["row"];
    assert_eq!(episode["confidence"], Value::from(1.0));
    assert!(episode["confidence"].is_f64() && episode["event_time"].is_i64());
    assert!(episode["valid_until"].is_null() && episode.get("search_text").is_none());

    let second = open_fresh().await;
    import_all(&second, &exported).await;
    assert_eq!(second.export_rows(None).await.unwrap(), exported);
    // The links are made again in export order.
    let links: Vec<(String, String)> =
        sqlx::query_as("SELECT memory_id, entity_id FROM memory_entities ORDER BY position")
            .fetch_all(second.pool())
            .await
            .unwrap();
    let in_export: Vec<(String, String)> = exported
        .iter()
        .filter(|record| record["type"] == "memory_entities")
        .map(|record| {
            let row = &record["row"];
            (
                row["memory_id"].as_str().unwrap().to_owned(),
                row["entity_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(links, in_export);
    // Every active memory waits for its vector again.
    let queued = count(
        second.pool(),
        "SELECT COUNT(*) FROM embedding_queue q JOIN memories m ON m.id = q.memory_id \
         WHERE m.valid_until IS NULL AND $1 = ''",
        "",
    )
    .await;
    assert_eq!(queued, 9);
    // A record met again is skipped.
    assert!(!second
        .import_row("memories", &exported[0]["row"])
        .await
        .unwrap());
    // One user's export is theirs alone.
    let bob = first.export_rows(Some("bob")).await.unwrap();
    assert_eq!(bob.len(), 3 + 1 + 2 + 1 + 1);
}

#[tokio::test]
async fn import_takes_what_sqlite_takes_and_refuses_the_rest() {
    let store = open_fresh().await;
    let (_dir, sqlite) = open_sqlite().await;
    let invalid = [
        (
            "vec_memories",
            serde_json::json!({"memory_id": "m"}),
            "vec_memories",
        ),
        ("memories", serde_json::json!([1]), "object"),
        ("memories", serde_json::json!({}), "column"),
        (
            "memory_entities",
            serde_json::json!({"memory_id": "m", "entity_id": "e", "position": 1}),
            "position",
        ),
        (
            "memories",
            serde_json::json!({"id": "m", "search_text": "x"}),
            "search_text",
        ),
        (
            "entities",
            serde_json::json!({"id": "e", "aliases": ["a"]}),
            "aliases",
        ),
        (
            "entities",
            serde_json::json!({"id": "e", "mention_count": 1.5}),
            "mention_count",
        ),
        (
            "entities",
            serde_json::json!({"id": "e", "mention_count": "2"}),
            "mention_count",
        ),
        (
            "entities",
            serde_json::json!({"id": "e", "embedding": "xyz"}),
            "embedding",
        ),
    ];
    for (table, row, named) in invalid {
        let error = store.import_row(table, &row).await.unwrap_err();
        assert!(
            matches!(&error, MemoryError::Invalid(message) if message.contains(named)),
            "{table} {row}: {error}"
        );
    }
    // A NULL in a NOT NULL column, or a kind the CHECK refuses: SQLite's INSERT OR IGNORE
    // skips the row, and so does PostgreSQL's import.
    for row in [
        serde_json::json!({"id": "m1", "kind": "fact", "content": null, "event_time": 1, "created_at": 1}),
        serde_json::json!({"id": "m2", "kind": "dream", "content": "x", "event_time": 1, "created_at": 1}),
    ] {
        assert!(!sqlite.import_row("memories", &row).await.unwrap(), "{row}");
        assert!(!store.import_row("memories", &row).await.unwrap(), "{row}");
    }
    // Converted as SQLite's column affinity converts: a whole real into an integer column, a
    // number into a text column; sessions of before schema 6 get '' keys.
    let records = [
        (
            "entities",
            serde_json::json!({"id": "e1", "canonical_name": 7, "type": "other", "mention_count": 3.0, "embedding": null}),
        ),
        (
            "sessions_consolidations",
            serde_json::json!({"user_id": null, "chat_id": null, "session_id": "s", "first_seen_at": 5}),
        ),
    ];
    for (table, row) in &records {
        assert!(sqlite.import_row(table, row).await.unwrap());
        assert!(store.import_row(table, row).await.unwrap());
    }
    // In one transaction: a row either store skips spoils nothing around it; a row it refuses
    // leaves nothing of the batch.
    let kept = serde_json::json!({"id": "m3", "kind": "fact", "content": "kept", "event_time": 1, "created_at": 1});
    let skipped = serde_json::json!({"id": "m4", "kind": "dream", "content": "x", "event_time": 1, "created_at": 1});
    let after = serde_json::json!({"id": "m5", "kind": "fact", "content": "after", "event_time": 1, "created_at": 1});
    let batch = [
        ("memories", &kept),
        ("memories", &skipped),
        ("memories", &after),
    ];
    assert_eq!(sqlite.import_rows(&batch).await.unwrap(), 2);
    assert_eq!(store.import_rows(&batch).await.unwrap(), 2);
    let refused = serde_json::json!({"id": "m6", "search_text": "x"});
    let fresh = serde_json::json!({"id": "m7", "kind": "fact", "content": "never", "event_time": 1, "created_at": 1});
    let batch = [("memories", &fresh), ("memories", &refused)];
    assert!(sqlite.import_rows(&batch).await.is_err());
    assert!(store.import_rows(&batch).await.is_err());
    assert_eq!(
        sqlite.export_rows(None).await.unwrap(),
        store.export_rows(None).await.unwrap()
    );
    let exported = serde_json::Value::from(store.export_rows(None).await.unwrap()).to_string();
    assert!(
        exported.contains("after") && !exported.contains("never"),
        "{exported}"
    );
}

/// Fills a store as the service does, through its own methods; returns the turns' ids.
async fn fill_through_methods(store: &dyn MemoryBackend) -> Vec<String> {
    let mut ids = Vec::new();
    for (index, text) in [
        "Maria met Jonas in Porto",
        "Jonas likes sailing",
        "Café ☕ \"quoted\"\nnext line",
    ]
    .into_iter()
    .enumerate()
    {
        let mut turn = new_memory(MemoryKind::Episode, text, Some("ana"), BASE + index as i64);
        turn.chat_id = (index == 2).then(|| "chat-1".to_owned());
        let entities: Vec<_> = ["Maria", "Jonas"]
            .into_iter()
            .filter(|name| text.contains(name))
            .map(|name| person(name, text))
            .collect();
        let stored = store
            .insert_turn(&turn, &entities, Some(&format!("ev{index}")), true)
            .await
            .unwrap();
        ids.push(stored.memory_id.unwrap());
    }
    let fact_text = "Jonas sails every weekend";
    let fact = store
        .insert_memory(
            &new_memory(MemoryKind::Fact, fact_text, Some("ana"), BASE + 10),
            &[person("Jonas", fact_text)],
        )
        .await
        .unwrap();
    let bob = store
        .insert_memory(
            &new_memory(MemoryKind::Fact, "Bob naps", Some("bob"), BASE + 11),
            &[],
        )
        .await
        .unwrap();
    store
        .insert_memory(
            &new_memory(MemoryKind::Reflection, "All calm", None, BASE + 12),
            &[],
        )
        .await
        .unwrap();
    let correction_text = "Jonas sails on Sundays";
    store
        .correct(
            &fact,
            Some("ana"),
            &new_memory(MemoryKind::Fact, correction_text, Some("ana"), BASE + 20),
            &[person("Jonas", correction_text)],
        )
        .await
        .unwrap();
    store
        .supersede(&ids[..1], &ids[1], at(BASE + 30))
        .await
        .unwrap();
    store.resolve_conflict(&bob, &ids[1]).await.unwrap();
    store
        .decay(0.1, DecayAction::Archive, at(BASE + 50 * DAY))
        .await
        .unwrap();
    ids
}

/// What plain SQL can put in either store and the methods do not: a big integer, a real that
/// needs all its digits, a legacy event, a consolidated session.
const ODD_VALUES: [&str; 3] = [
    "UPDATE memories SET confidence = 0.30000000000000004, event_time = 9007199254740993 \
     WHERE user_id = 'bob'",
    "INSERT INTO ingested_events (user_id, event_id, memory_id) VALUES ('', 'old', 'gone')",
    "UPDATE sessions_consolidations SET consolidated_at = 7, attempts = 2, \
     last_error = 'timeout', provider = 'p'",
];

/// A SQLite store as the service fills it, with the odd values plain SQL can put there.
async fn filled_sqlite(store: &MemoryStore) {
    let ids = fill_through_methods(store).await;
    store.touch(&ids[1..2], 1, at(BASE + 40)).await.unwrap();
    for statement in ODD_VALUES.into_iter().chain([
        "UPDATE entities SET embedding = X'00ff10', summary = 'sum' WHERE canonical_name = 'Maria'",
    ]) {
        sqlx::query(statement).execute(store.pool()).await.unwrap();
    }
}

#[tokio::test]
async fn a_postgres_store_moves_to_sqlite_and_back_without_a_difference() {
    let postgres = open_fresh().await;
    fill_through_methods(&postgres).await;
    for statement in ODD_VALUES {
        sqlx::query(statement)
            .execute(postgres.pool())
            .await
            .unwrap();
    }
    sqlx::query("UPDATE entities SET embedding = $1 WHERE canonical_name = 'Maria'")
        .bind(vec![0_u8, 0xff, 0x10])
        .execute(postgres.pool())
        .await
        .unwrap();
    let from_postgres = postgres.export_rows(None).await.unwrap();
    // 7 memories, 2 entities, 5 links, 2 sessions, 4 events.
    assert_eq!(from_postgres.len(), 20);
    let (_dir, sqlite) = open_sqlite().await;
    import_all(&sqlite, &from_postgres).await;
    assert_eq!(sqlite.export_rows(None).await.unwrap(), from_postgres);
    let back = open_fresh().await;
    import_all(&back, &sqlite.export_rows(None).await.unwrap()).await;
    assert_eq!(back.export_rows(None).await.unwrap(), from_postgres);
}

#[tokio::test]
async fn a_sqlite_store_moves_to_postgres_and_back_without_a_difference() {
    let (_dir, sqlite) = open_sqlite().await;
    filled_sqlite(&sqlite).await;
    let from_sqlite = sqlite.export_rows(None).await.unwrap();
    for table in [
        "memories",
        "entities",
        "memory_entities",
        "sessions_consolidations",
        "ingested_events",
    ] {
        assert!(
            from_sqlite.iter().any(|record| record["type"] == table),
            "no {table} record"
        );
    }
    let postgres = open_fresh().await;
    import_all(&postgres, &from_sqlite).await;
    let from_postgres = postgres.export_rows(None).await.unwrap();
    assert_eq!(from_postgres, from_sqlite);
    // The same text, not only the same values.
    assert_eq!(
        serde_json::to_string(&from_postgres).unwrap(),
        serde_json::to_string(&from_sqlite).unwrap()
    );
    for user in ["ana", "bob", "nobody"] {
        assert_eq!(
            postgres.export_rows(Some(user)).await.unwrap(),
            sqlite.export_rows(Some(user)).await.unwrap(),
            "{user}"
        );
    }
    let (_back_dir, back) = open_sqlite().await;
    import_all(&back, &from_postgres).await;
    assert_eq!(back.export_rows(None).await.unwrap(), from_sqlite);
}

#[tokio::test]
async fn inspection_queries_and_list_filters_answer_as_sqlite_does() {
    let (_dir, sqlite) = open_sqlite().await;
    fill(&sqlite).await;
    let postgres = open_fresh().await;
    fill(&postgres).await;
    let old = ["fact_a1".to_owned(), "fact_a2".to_owned()];
    same_on_both!(sqlite, postgres, |store| store.supersede(
        &old,
        "fact_a3",
        at(BASE + DAY)
    ));

    let owners = sqlite.owners(100).await.unwrap();
    assert_eq!(
        owners
            .iter()
            .map(|owner| owner.user_id.as_str())
            .collect::<Vec<_>>(),
        vec!["ana", "bob"]
    );
    same_on_both!(sqlite, postgres, |store| store.owners(100));
    same_on_both!(sqlite, postgres, |store| store.owners(1));

    let entities = sqlite.owner_entities("ana", 10).await.unwrap();
    assert_eq!(entities.len(), 1, "{entities:?}");
    assert_eq!(
        (entities[0].name.as_str(), entities[0].memories),
        ("green tea", 2)
    );
    same_on_both!(sqlite, postgres, |store| store.owner_entities("ana", 10));
    same_on_both!(sqlite, postgres, |store| store.owner_entities("nobody", 10));

    let replaced = sqlite.replaced_by("fact_a3").await.unwrap();
    let mut ids: Vec<&str> = replaced.iter().map(|memory| memory.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["fact_a1", "fact_a2"]);
    same_on_both!(sqlite, postgres, |store| store.replaced_by("fact_a3"));
    same_on_both!(sqlite, postgres, |store| store.replaced_by("fact_a1"));

    let about_tea = ListRequest {
        entity_id: Some("ent_tea".into()),
        include_inactive: true,
        ..ListRequest::active("ana", 100)
    };
    let listed = sqlite.list_memories(&about_tea, at(BASE)).await.unwrap();
    let mut ids: Vec<&str> = listed.iter().map(|memory| memory.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["ep_a1", "fact_a1"]);
    same_on_both!(sqlite, postgres, |store| store
        .list_memories(&about_tea, at(BASE)));
    for (since, until) in [
        (Some(BASE), None),
        (None, Some(BASE)),
        (Some(BASE), Some(BASE + 1)),
    ] {
        let window = ListRequest {
            since: since.map(at),
            until: until.map(at),
            include_inactive: true,
            ..ListRequest::active("ana", 100)
        };
        same_on_both!(sqlite, postgres, |store| store
            .list_memories(&window, at(BASE)));
    }
}

#[tokio::test]
async fn job_history_is_kept_newest_first_as_in_sqlite() {
    let (_dir, sqlite) = open_sqlite().await;
    let postgres = open_fresh().await;
    let run =
        |job: &str, second: i64, outcome: Result<String, String>| mnemo_kernel::host::JobRun {
            job: job.to_owned(),
            at: DateTime::from_timestamp_millis(second * 1_000 + 250).unwrap(),
            finished_at: DateTime::from_timestamp_millis(second * 1_000 + 1_750).unwrap(),
            outcome,
            failed_items: 2,
        };
    let runs = [
        run("execute_decay", BASE, Ok("3 facts faded".into())),
        run(
            "execute_consolidation",
            BASE + 60,
            Err("the model is down".into()),
        ),
    ];
    for store in [&sqlite as &dyn JobRecords, &postgres] {
        assert!(store.recent_job_runs(10).await.unwrap().is_empty());
        for each in &runs {
            store.record_job_run(each).await.unwrap();
        }
        let newest_first: Vec<_> = runs.iter().rev().cloned().collect();
        assert_eq!(store.recent_job_runs(10).await.unwrap(), newest_first);
        assert_eq!(store.recent_job_runs(1).await.unwrap(), newest_first[..1]);
    }
}
