//! Entities found or created under writers running at once, on PostgreSQL (what both stores do
//! is checked in `store/conformance`); the helpers the store's tests share.

use std::time::Duration;

use mnemo_ner_api::EntityType;

use super::super::PostgresStore;
use super::{open_at, open_fresh};
use crate::store::backend::*;
use crate::store::sql::link_entities;

use crate::store::conformance::{entity, entity_ids, turn};

pub(super) async fn count(store: &PostgresStore, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// Two servers storing turns of one user at once, both naming the same new entity: no error,
/// one entity, both memories linked to it.
#[tokio::test]
async fn concurrent_turns_create_one_entity() {
    let url = mnemo_pg_fixture::fresh_database();
    let (one, two) = (open_at(&url).await, open_at(&url).await);
    for round in 0..5 {
        let name = format!("Project Nova {round}");
        let first = turn("ana", "s1", &format!("working on {name}"));
        let second = turn("ana", "s1", &format!("{name} is late"));
        let nova = entity(&name, &name, EntityType::Project);
        let (event_a, event_b) = (format!("a{round}"), format!("b{round}"));
        let (a, b) = tokio::join!(
            one.insert_turn(&first, std::slice::from_ref(&nova), Some(&event_a), true),
            two.insert_turn(&second, std::slice::from_ref(&nova), Some(&event_b), true),
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.new_session != b.new_session || round > 0);
        let ids = one
            .entities_named(Some("ana"), std::slice::from_ref(&name))
            .await
            .unwrap();
        assert_eq!(ids.len(), 1, "{ids:?}");
        for memory in [a.memory_id.unwrap(), b.memory_id.unwrap()] {
            assert_eq!(
                entity_ids(&one, &memory).await,
                format!(r#"["{}"]"#, ids[0])
            );
        }
    }
    assert_eq!(
        count(&one, "SELECT COUNT(*) FROM sessions_consolidations").await,
        1
    );
}

/// A writer that does not hold the owner's lock and finds the entity being created by another
/// waits for it, then links the entity the other made.
#[tokio::test]
async fn find_or_create_survives_a_writer_without_the_lock() {
    let store = open_fresh().await;
    for id in ["m1", "m2"] {
        sqlx::query(
            "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
             VALUES ($1, 'fact', 'x', 'ana', 0, 0)",
        )
        .bind(id)
        .execute(store.pool())
        .await
        .unwrap();
    }
    let nova = [entity("Nova", "Nova", EntityType::Project)];
    let mut first = store.pool().begin().await.unwrap();
    link_entities::<PostgresStore>(&mut first, "m1", "ana", &nova, None)
        .await
        .unwrap();
    let pool = store.pool().clone();
    let racer = tokio::spawn(async move {
        let mut second = pool.begin().await.unwrap();
        let linked = link_entities::<PostgresStore>(
            &mut second,
            "m2",
            "ana",
            &[entity("the Nova project", "NOVA", EntityType::Project)],
            None,
        )
        .await;
        second.commit().await.unwrap();
        linked
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.commit().await.unwrap();
    assert_eq!(racer.await.unwrap().unwrap(), 1);
    let (id, aliases, mentions): (String, String, i64) =
        sqlx::query_as("SELECT id, aliases, mention_count FROM entities")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!((aliases.as_str(), mentions), (r#"["the Nova project"]"#, 2));
    assert_eq!(entity_ids(&store, "m2").await, format!(r#"["{id}"]"#));
}
