//! Vectors: following the embedding provider, searching one user's vectors among many, and
//! the HNSW index against exact search.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::super::open_fresh;
use super::{ana, count, insert, row, sql};
use crate::store::backend::{IndexReads, VectorIndex, VectorSearch};
use crate::store::postgres::vectors::vector_text;
use crate::store::postgres::PostgresStore;
use crate::store::PostgresOptions;
use crate::store::VectorStatus;
use crate::types::{MemoryKind, SearchRequest};
use crate::vector_index::tests::pseudo;

/// Stores memories with their vectors: (id, owner, kind, vector).
async fn insert_vectors(store: &PostgresStore, rows: &[(String, String, &str, Vec<f32>)]) {
    let ids: Vec<String> = rows.iter().map(|row| row.0.clone()).collect();
    let users: Vec<String> = rows.iter().map(|row| row.1.clone()).collect();
    let kinds: Vec<String> = rows.iter().map(|row| row.2.to_owned()).collect();
    let vectors: Vec<String> = rows.iter().map(|row| vector_text(&row.3)).collect();
    sqlx::query(
        "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
         SELECT id, kind, 'a memory', user_id, 1, 1 \
         FROM unnest($1::text[], $2::text[], $3::text[]) AS r (id, user_id, kind)",
    )
    .bind(&ids)
    .bind(&users)
    .bind(&kinds)
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO memory_vectors (memory_id, embedding, user_id, kind) \
         SELECT id, embedding::vector, user_id, kind \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r (id, embedding, user_id, kind)",
    )
    .bind(&ids)
    .bind(&vectors)
    .bind(&users)
    .bind(&kinds)
    .execute(store.pool())
    .await
    .unwrap();
}

async fn indexes(store: &PostgresStore) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE tablename = 'memory_vectors' \
         AND indexname <> 'memory_vectors_pkey' ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap()
}

fn recall(found: &[(String, f32)], exact: &[(String, f32)]) -> f64 {
    let truth: HashSet<&String> = exact.iter().map(|(id, _)| id).collect();
    let hits = found.iter().filter(|(id, _)| truth.contains(id)).count();
    hits as f64 / truth.len().max(1) as f64
}

#[tokio::test]
async fn the_vector_index_follows_the_provider() {
    let store = open_fresh().await;
    assert!(matches!(
        store.vector_status(),
        VectorStatus::Disabled { .. }
    ));
    let enabled = |dimensions, model: &str| VectorStatus::Enabled {
        dimensions,
        model_id: model.to_owned(),
    };
    assert_eq!(
        store.ensure_vector_index(4, "small").await.unwrap(),
        enabled(4, "small")
    );
    assert_eq!(store.vector_status(), enabled(4, "small"));
    assert_eq!(
        indexes(&store).await,
        ["memory_vectors_hnsw_4", "memory_vectors_user"]
    );
    assert_eq!(
        store.ensure_vector_index(4, "small").await.unwrap(),
        enabled(4, "small")
    );
    insert_vectors(
        &store,
        &[("m1".into(), "ana".into(), "fact", vec![1.0, 0.0, 0.0, 0.0])],
    )
    .await;
    sql(
        &store,
        "INSERT INTO memories (id, kind, content, user_id, event_time, created_at, valid_until) \
         VALUES ('old', 'fact', 'x', 'ana', 1, 1, 5)",
    )
    .await;
    insert(&store, &row("queued", "x")).await;
    sql(
        &store,
        "INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES ('queued', 1)",
    )
    .await;

    // Another provider: vector search is off, nothing is deleted.
    let VectorStatus::Disabled { reason } = store.ensure_vector_index(8, "large").await.unwrap()
    else {
        panic!("a mismatch disables vector search");
    };
    assert!(
        reason.contains("4-dimension") && reason.contains("`large`"),
        "{reason}"
    );
    assert!(matches!(
        store.vector_status(),
        VectorStatus::Disabled { .. }
    ));
    assert_eq!(store.mirror_size().await.unwrap().memory_rows, 1);
    let found = store
        .search_vector(&ana(), &[1.0, 0.0, 0.0, 0.0], 5, -1.0)
        .await
        .unwrap();
    assert!(found.is_empty());
    assert!(matches!(
        store.ensure_vector_index(4, "other").await.unwrap(),
        VectorStatus::Disabled { .. }
    ));

    // Rebuilt for the new provider: every active memory queued once, old vectors gone.
    assert_eq!(store.reset_vector_index(8, "large").await.unwrap(), 1);
    assert_eq!(store.vector_status(), enabled(8, "large"));
    assert_eq!(store.pending_index().await.unwrap(), 2);
    assert_eq!(store.mirror_size().await.unwrap().memory_rows, 0);
    assert_eq!(
        indexes(&store).await,
        ["memory_vectors_hnsw_8", "memory_vectors_user"]
    );
    assert_eq!(
        store.ensure_vector_index(8, "large").await.unwrap(),
        enabled(8, "large")
    );
    // A store copied from SQLite has the provider recorded but no index: it is made.
    sql(&store, "DROP INDEX memory_vectors_hnsw_8").await;
    assert_eq!(
        store.ensure_vector_index(8, "large").await.unwrap(),
        enabled(8, "large")
    );
    assert_eq!(
        indexes(&store).await,
        ["memory_vectors_hnsw_8", "memory_vectors_user"]
    );
}

/// `users` users with `per_user` random 384-dimension vectors each, each user's kinds
/// alternating.
fn random_rows(users: usize, per_user: usize) -> Vec<(String, String, &'static str, Vec<f32>)> {
    (0..users * per_user)
        .map(|n| {
            (
                format!("m{n}"),
                format!("u{}", n % users),
                if (n / users).is_multiple_of(2) {
                    "fact"
                } else {
                    "episode"
                },
                pseudo(n as u64 + 1, 384),
            )
        })
        .collect()
}

#[tokio::test]
async fn vector_search_for_one_user_among_many_finds_their_nearest() {
    let store = open_fresh().await;
    insert_vectors(&store, &random_rows(30, 100)).await;
    let started = Instant::now();
    store.ensure_vector_index(384, "test").await.unwrap();
    eprintln!("HNSW index over 3,000 vectors: {:?}", started.elapsed());
    let mut search_recall = 0.0;
    let mut kind_recall = 0.0;
    let mut hnsw_found = [0usize; 2];
    let mut deepest_recall = 0.0;
    let mut search_time = Duration::ZERO;
    let mut hnsw_time = Duration::ZERO;
    let queries = 30;
    let started = Instant::now();
    for q in 0..queries {
        let query = pseudo(100_000 + q as u64, 384);
        let user = format!("u{q}");
        let request = SearchRequest {
            user_id: Some(user.clone()),
            ..SearchRequest::default()
        };
        let exact = store
            .nearest_exact(&query, Some(&user), None, 10)
            .await
            .unwrap();
        assert_eq!(exact.len(), 10);
        let searched = Instant::now();
        let found = store
            .search_vector(&request, &query, 10, -1.0)
            .await
            .unwrap();
        search_time += searched.elapsed();
        assert_eq!(found.len(), 10);
        search_recall += recall(&found, &exact);
        let facts = SearchRequest {
            kinds: vec![MemoryKind::Fact],
            ..request.clone()
        };
        let exact_facts = store
            .nearest_exact(&query, Some(&user), Some("fact"), 10)
            .await
            .unwrap();
        let found_facts = store.search_vector(&facts, &query, 10, -1.0).await.unwrap();
        kind_recall += recall(&found_facts, &exact_facts);
        // What the HNSW scan alone gives for one user among 30 (pgvector filters after it).
        for (slot, ef_search) in [100, 1_000].into_iter().enumerate() {
            let scanned = Instant::now();
            let hnsw = store
                .nearest_hnsw(&query, 384, Some(&user), None, 10, ef_search)
                .await
                .unwrap();
            hnsw_found[slot] += hnsw.len();
            if ef_search == 1_000 {
                hnsw_time += scanned.elapsed();
            }
            if ef_search == 1_000 {
                deepest_recall += recall(&hnsw, &exact);
            }
        }
    }
    let elapsed = started.elapsed();
    search_recall /= queries as f64;
    kind_recall /= queries as f64;
    eprintln!(
        "one user of 30: recall@10 {search_recall:.3}, with a kind {kind_recall:.3}; \
         HNSW scan alone finds {:.1} of 10 at ef_search 100, {:.1} at 1000 (recall {:.3}); \
         a search {:?} (that HNSW scan {:?}); {:?} for {queries} rounds",
        hnsw_found[0] as f64 / queries as f64,
        hnsw_found[1] as f64 / queries as f64,
        deepest_recall / queries as f64,
        search_time / queries as u32,
        hnsw_time / queries as u32,
        elapsed
    );
    assert!(search_recall >= 0.9, "recall {search_recall}");
    assert!(kind_recall >= 0.9, "recall {kind_recall}");
    assert!(
        hnsw_found[0] < 10 * queries,
        "the filtered scan falls short"
    );

    // Similarity cut-off, and the request's filters after the search.
    let query = pseudo(7, 384);
    let request = SearchRequest {
        user_id: Some("u6".into()),
        ..SearchRequest::default()
    };
    let found = store
        .search_vector(&request, &query, 10, 0.99)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "only itself");
    assert_eq!(found[0].0, "m6");
    assert!((found[0].1 - 1.0).abs() < 1e-4);
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'm6'",
    )
    .await;
    let found = store
        .search_vector(&request, &query, 10, -1.0)
        .await
        .unwrap();
    assert_eq!(found.len(), 10);
    assert!(found.iter().all(|(id, _)| id != "m6"));
    assert!(store
        .search_vector(&request, &[0.5; 8], 10, -1.0)
        .await
        .is_err());
}

/// A store on a fresh database whose vector searches keep `ef_search` HNSW candidates.
async fn open_with_ef_search(ef_search: usize) -> PostgresStore {
    PostgresStore::open(&PostgresOptions {
        url: mnemo_pg_fixture::fresh_database(),
        max_connections: 4,
        lock_timeout: Duration::from_secs(10),
        ef_search,
        synchronous_commit: true,
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn without_ef_search_vector_search_is_exact() {
    let store = open_with_ef_search(0).await;
    insert_vectors(&store, &random_rows(4, 50)).await;
    store.ensure_vector_index(384, "test").await.unwrap();
    let query = pseudo(99_999, 384);
    let request = SearchRequest {
        kinds: vec![MemoryKind::Fact, MemoryKind::Episode],
        ..SearchRequest::default()
    };
    let found = store
        .search_vector(&request, &query, 10, -1.0)
        .await
        .unwrap();
    let exact = store.nearest_exact(&query, None, None, 10).await.unwrap();
    assert_eq!(found, exact);
}

#[tokio::test]
async fn approximate_search_uses_the_hnsw_index_and_exact_search_does_not() {
    // Uniform random vectors are HNSW's hardest case: 100 candidates find about two thirds of
    // the true top 10 (see the sweep below), 400 over nine tenths.
    let store = open_with_ef_search(400).await;
    let mut rows = random_rows(3, 1_000);
    // One user with most of the vectors: more than are searched exactly.
    for row in rows.iter_mut().take(2_000) {
        row.1 = "big".into();
    }
    let extra: Vec<_> = (0..4_000)
        .map(|n| {
            (
                format!("b{n}"),
                "big".to_owned(),
                "fact",
                pseudo(50_000 + n, 384),
            )
        })
        .collect();
    insert_vectors(&store, &rows).await;
    insert_vectors(&store, &extra).await;
    store.ensure_vector_index(384, "test").await.unwrap();
    let mut unfiltered = 0.0;
    let mut big = 0.0;
    let queries = 20;
    let (mut exact_time, mut approximate_time, mut big_time) = Default::default();
    for q in 0..queries {
        let query = pseudo(200_000 + q, 384);
        let started = Instant::now();
        let exact = store.nearest_exact(&query, None, None, 10).await.unwrap();
        exact_time += started.elapsed();
        let started = Instant::now();
        let approximate = store
            .nearest_approximate(&query, None, None, 10)
            .await
            .unwrap();
        approximate_time += started.elapsed();
        assert_eq!(approximate.len(), 10);
        unfiltered += recall(&approximate, &exact);
        let exact = store
            .nearest_exact(&query, Some("big"), None, 10)
            .await
            .unwrap();
        let started = Instant::now();
        let approximate = store
            .nearest_approximate(&query, Some("big"), None, 10)
            .await
            .unwrap();
        big_time += started.elapsed();
        big += recall(&approximate, &exact);
    }
    // Recall of the HNSW scan alone against how many candidates it keeps.
    let mut sweep = Vec::new();
    for ef_search in [40, 100, 200, 400] {
        let mut total = 0.0;
        for q in 0..queries {
            let query = pseudo(200_000 + q, 384);
            let exact = store.nearest_exact(&query, None, None, 10).await.unwrap();
            let found = store
                .nearest_hnsw(&query, 384, None, None, 10, ef_search)
                .await
                .unwrap();
            total += recall(&found, &exact);
        }
        sweep.push(format!(
            "ef_search {ef_search}: {:.3}",
            total / queries as f64
        ));
    }
    eprintln!(
        "HNSW recall@10 over 7,000 random vectors: {}",
        sweep.join(", ")
    );
    unfiltered /= queries as f64;
    big /= queries as f64;
    let per = |total: std::time::Duration| total / queries as u32;
    eprintln!(
        "7,000 vectors: HNSW recall@10 {unfiltered:.3} in {:?}, exact {:?}; one user with \
         6,000 of them: recall@10 {big:.3} in {:?}",
        per(approximate_time),
        per(exact_time),
        per(big_time)
    );
    assert!(unfiltered >= 0.9, "recall {unfiltered}");
    assert!(big >= 0.9, "recall {big}");

    // The plans: the indexed expression uses the HNSW index, the column does not.
    let plan = |query: String| {
        let store = &store;
        async move {
            let mut tx = store.pool().begin().await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {query}")))
                .fetch_all(&mut *tx)
                .await
                .unwrap()
                .iter()
                .map(|row| sqlx::Row::get::<String, _>(row, 0))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let vector = vector_text(&pseudo(3, 384));
    let approximate = plan(format!(
        "SELECT memory_id FROM memory_vectors ORDER BY embedding::vector(384) <=> \
         '{vector}'::vector(384) LIMIT 10"
    ))
    .await;
    assert!(
        approximate.contains("memory_vectors_hnsw_384"),
        "{approximate}"
    );
    let exact = plan(format!(
        "SELECT memory_id FROM memory_vectors ORDER BY embedding <=> '{vector}'::vector LIMIT 10"
    ))
    .await;
    assert!(!exact.contains("hnsw"), "{exact}");
    let owner = plan(format!(
        "SELECT memory_id FROM memory_vectors WHERE user_id = 'u1' \
         ORDER BY embedding <=> '{vector}'::vector LIMIT 10"
    ))
    .await;
    assert!(owner.contains("memory_vectors_user"), "{owner}");
    // The filtered HNSW search keeps its filter outside the index scan.
    let filtered = plan(format!(
        "SELECT memory_id FROM (SELECT memory_id, user_id, embedding::vector(384) <=> \
         '{vector}'::vector(384) AS distance FROM memory_vectors ORDER BY distance LIMIT 1000) \
         nearest WHERE user_id = 'u1' ORDER BY distance LIMIT 10"
    ))
    .await;
    assert!(filtered.contains("memory_vectors_hnsw_384"), "{filtered}");
}

#[tokio::test]
async fn instances_starting_together_agree_on_one_provider() {
    let store = open_fresh().await;
    // A second instance on the same database (it shares the pool, not the vector status).
    let other = PostgresStore {
        pool: store.pool().clone(),
        vector: std::sync::RwLock::new(VectorStatus::Disabled {
            reason: "not checked".into(),
        }),
        ef_search: 100,
        index_cursor: Default::default(),
        reachability: Default::default(),
        probe: tokio::spawn(async {}),
    };
    let (first, second) = tokio::join!(
        store.ensure_vector_index(4, "small"),
        other.ensure_vector_index(8, "large")
    );
    let enabled = [first.unwrap(), second.unwrap()]
        .iter()
        .filter(|status| matches!(status, VectorStatus::Enabled { .. }))
        .count();
    assert_eq!(
        enabled, 1,
        "the first recorded provider wins; the other is refused"
    );
    let hnsw = count(
        &store,
        "SELECT COUNT(*) FROM pg_indexes WHERE indexname LIKE 'memory_vectors_hnsw_%'",
    )
    .await;
    assert_eq!(hnsw, 1);
}

#[tokio::test]
async fn stored_vectors_are_read_by_id() {
    let store = open_fresh().await;
    let rows: Vec<(String, String, &str, Vec<f32>)> = (0..5_u64)
        .map(|n| (format!("m{n}"), "ana".to_owned(), "fact", pseudo(n, 8)))
        .collect();
    insert_vectors(&store, &rows).await;
    let asked: Vec<String> = ["m1", "m2", "missing"].map(str::to_owned).to_vec();
    let stored = store.stored_vectors(&asked).await.unwrap();
    assert_eq!(stored.len(), 2, "only memories with a vector");
    for (id, vector) in [("m1", pseudo(1, 8)), ("m2", pseudo(2, 8))] {
        assert_eq!(
            stored[id], vector,
            "{id}: pgvector keeps single-precision floats exactly"
        );
    }
    assert!(store.stored_vectors(&[]).await.unwrap().is_empty());
}
