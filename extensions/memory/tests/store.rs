//! The store on a real SQLite file: the vector dimension lock, soft deletes, and the index queue.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use mnemo_memory::{MemoryKind, MemoryStore, SearchRequest, VectorStatus};

async fn open(path: &std::path::Path) -> MemoryStore {
    MemoryStore::open(
        path,
        &mnemo_memory::StoreOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous: "full".into(),
            max_connections: 2,
        },
    )
    .await
    .unwrap()
}

fn fact(content: &str) -> mnemo_memory::NewMemory {
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    mnemo_memory::NewMemory {
        kind: MemoryKind::Fact,
        content: content.into(),
        session_id: Some("s1".into()),
        user_id: Some("ana".into()),
        chat_id: None,
        event_time: at,
        created_at: at,
        source_role: None,
        source_ids: Vec::new(),
        tags: Vec::new(),
        attributes: serde_json::Map::new(),
        decay_rate: 0.1,
        confidence: 1.0,
        memory_type: None,
        expires_at: None,
        shared: false,
        subject_ids: Vec::new(),
    }
}

#[tokio::test]
async fn a_dimension_or_model_change_disables_vectors_and_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    {
        let store = open(&path).await;
        let status = store.ensure_vector_index(4, "model-a").await.unwrap();
        assert_eq!(
            status,
            VectorStatus::Enabled {
                dimensions: 4,
                model_id: "model-a".into()
            }
        );
        let id = store
            .insert_memory(&fact("the sky is green"), &[])
            .await
            .unwrap();
        let batch = store.next_index_batch(10).await.unwrap();
        assert_eq!(batch.len(), 1);
        store
            .store_vectors(&[(batch[0].clone(), Some(vec![1.0, 0.0, 0.0, 0.0]))])
            .await
            .unwrap();
        assert_eq!(store.pending_index().await.unwrap(), 0);
        let request = SearchRequest {
            user_id: Some("ana".into()),
            limit: 5,
            ..SearchRequest::default()
        };
        let found = store
            .search_vector(&request, &[0.9, 0.1, 0.0, 0.0], 5, -1.0)
            .await
            .unwrap();
        let found: Vec<String> = found.into_iter().map(|(id, _)| id).collect();
        assert_eq!(found, vec![id]);
        // Another owner never sees it.
        let other = SearchRequest {
            user_id: Some("ben".into()),
            ..request.clone()
        };
        assert!(store
            .search_vector(&other, &[0.9, 0.1, 0.0, 0.0], 5, -1.0)
            .await
            .unwrap()
            .is_empty());
        store.close().await;
    }
    let store = open(&path).await;
    for (dimensions, model) in [(8, "model-a"), (4, "model-b")] {
        match store.ensure_vector_index(dimensions, model).await.unwrap() {
            VectorStatus::Disabled { reason } => {
                assert!(reason.contains("mnemo reindex"), "{reason}");
                assert!(reason.contains("Nothing is lost"), "{reason}");
            }
            enabled => panic!("expected vector search off, got {enabled:?}"),
        }
    }
    let request = SearchRequest {
        query: "sky".into(),
        user_id: Some("ana".into()),
        limit: 5,
        ..SearchRequest::default()
    };
    assert_eq!(
        store.search_fts(&request, 5).await.unwrap().len(),
        1,
        "the memory is still there"
    );
    assert!(store
        .search_vector(&request, &[1.0; 8], 5, -1.0)
        .await
        .unwrap()
        .is_empty());
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM vec_memories")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(count, 1, "the old vectors are kept for a re-index");
}

#[tokio::test]
async fn soft_delete_hides_a_row_from_every_list_but_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("memory.db")).await;
    store.ensure_vector_index(2, "m").await.unwrap();
    let id = store
        .insert_memory(&fact("the boiler code is 1234"), &[])
        .await
        .unwrap();
    let batch = store.next_index_batch(10).await.unwrap();
    store
        .store_vectors(&[(batch[0].clone(), Some(vec![1.0, 0.0]))])
        .await
        .unwrap();
    let at = Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap();
    assert!(store.soft_delete(&id, at).await.unwrap());
    assert!(
        !store.soft_delete(&id, at).await.unwrap(),
        "already deleted"
    );
    let request = SearchRequest {
        query: "boiler".into(),
        user_id: Some("ana".into()),
        limit: 5,
        ..SearchRequest::default()
    };
    assert!(store.search_fts(&request, 5).await.unwrap().is_empty());
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
    let found: Vec<String> = store
        .search_fts(&with_deleted, 5)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(found, vec![id]);
}
