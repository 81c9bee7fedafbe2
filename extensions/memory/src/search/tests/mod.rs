//! The [`Searcher`] over a fake store (`fake.rs`): the real gathering, fusion and ranking, with
//! only storage and the embedder faked.

mod fake;

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use mnemo_embedding_api::EmbeddingApi;
use mnemo_kernel::host::VirtualClock;

use self::fake::{memory, FakeEmbedder, FakeStore};
use super::{SearchConfig, Searcher};
use crate::config::MemoryConfig;
use crate::error::MemoryError;
use crate::types::{FusionMethod, MemoryKind, SearchHit, SearchMode, SearchRequest};

/// The time the searches are made at.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 6, 15, 12, 0, 0).unwrap()
}

/// The default settings.
fn defaults() -> SearchConfig {
    SearchConfig::from(&MemoryConfig::default())
}

/// A searcher over `store`, with `embedder` if any, `config`, and a clock standing at `at`.
fn searcher(
    store: FakeStore,
    embedder: Option<&Arc<FakeEmbedder>>,
    config: SearchConfig,
    at: DateTime<Utc>,
) -> Searcher<FakeStore> {
    let embedder = embedder.map(|embedder| Arc::clone(embedder) as Arc<dyn EmbeddingApi>);
    let clock = Arc::new(VirtualClock::new(at));
    Searcher::new(Arc::new(store), config, embedder, None, clock)
}

/// Alice's hybrid search for `query`, at most `limit` hits.
fn request(query: &str, limit: usize) -> SearchRequest {
    SearchRequest {
        query: query.to_owned(),
        user_id: Some("alice".to_owned()),
        limit,
        mode: SearchMode::Hybrid,
        ..SearchRequest::default()
    }
}

fn ids(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.memory.id.as_str()).collect()
}

fn lists(hit: &SearchHit) -> Vec<&str> {
    hit.why
        .lists
        .iter()
        .map(|list| list.list.as_str())
        .collect()
}

/// Three facts about boots: the best text match, the nearest in meaning, and one that is the
/// runner-up in both lists. The query "hiking boots" embeds to [1, 0, 0].
fn boots() -> (FakeStore, Arc<FakeEmbedder>) {
    let at = now() - Duration::days(30);
    let store = FakeStore::new(
        vec![
            memory(
                "text",
                MemoryKind::Fact,
                "hiking boots and more hiking boots",
                at,
            ),
            memory(
                "both",
                MemoryKind::Fact,
                "new hiking boots for the hiking trip",
                at,
            ),
            memory(
                "meaning",
                MemoryKind::Fact,
                "a walk up the mountain trail",
                at,
            ),
        ],
        &[
            ("text", vec![0.0, 0.0, 1.0]),
            ("both", vec![0.92, 0.39, 0.0]),
            ("meaning", vec![0.95, 0.312, 0.0]),
        ],
        3,
    );
    let embedder = FakeEmbedder::new(3, &[("hiking boots", vec![1.0, 0.0, 0.0])]);
    (store, embedder)
}

#[tokio::test]
async fn a_memory_both_lists_find_ranks_above_each_list_s_best() {
    for fusion in [FusionMethod::Scores, FusionMethod::Rrf] {
        let (store, embedder) = boots();
        let config = SearchConfig {
            fusion,
            ..defaults()
        };
        let searcher = searcher(store, Some(&embedder), config, now());
        let query = request("hiking boots", 3);
        // Each list alone puts another memory first.
        let gathered = searcher.gather(&query, 10).await.unwrap();
        let first = |name: &str| {
            let list = gathered.lists.iter().find(|list| list.name == name);
            list.and_then(|list| list.hits.first())
                .map(|(id, _)| id.clone())
        };
        assert_eq!(first("fts").as_deref(), Some("text"), "{fusion:?}");
        assert_eq!(first("vector").as_deref(), Some("meaning"), "{fusion:?}");
        let hits = searcher.search(&query).await.unwrap();
        assert_eq!(ids(&hits)[0], "both", "{fusion:?}: {hits:?}");
        assert!(lists(&hits[0]).contains(&"fts") && lists(&hits[0]).contains(&"vector"));
        assert_eq!(hits[0].why.fusion, fusion);
        assert_eq!(hits.len(), 3, "{fusion:?}");
    }
}

#[tokio::test]
async fn the_kind_filter_and_the_limit_are_kept() {
    let at = now() - Duration::days(3);
    let store = FakeStore::new(
        vec![
            memory(
                "episode",
                MemoryKind::Episode,
                "boots boots boots boots",
                at,
            ),
            memory("fact-1", MemoryKind::Fact, "red boots", at),
            memory("fact-2", MemoryKind::Fact, "blue boots", at),
            memory("fact-3", MemoryKind::Fact, "green boots", at),
        ],
        &[],
        3,
    );
    let searcher = searcher(store, None, defaults(), now());
    // Unfiltered, the episode is the best match.
    let everything = searcher.search(&request("boots", 10)).await.unwrap();
    assert_eq!(everything.len(), 4);
    assert_eq!(ids(&everything)[0], "episode");
    let facts = SearchRequest {
        kinds: vec![MemoryKind::Fact],
        ..request("boots", 2)
    };
    let hits = searcher.search(&facts).await.unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().all(|hit| hit.memory.kind == MemoryKind::Fact));
}

#[tokio::test]
async fn no_search_returns_more_than_the_configured_most() {
    let (store, embedder) = boots();
    let config = SearchConfig {
        max_search_limit: 2,
        ..defaults()
    };
    let searcher = searcher(store, Some(&embedder), config, now());
    let hits = searcher.search(&request("hiking boots", 10)).await.unwrap();
    assert_eq!(ids(&hits), ["both", "text"]);
}

#[tokio::test]
async fn a_query_vector_the_index_cannot_take_fails_the_search() {
    let (store, _) = boots();
    let embedder = FakeEmbedder::new(2, &[("hiking boots", vec![1.0, 0.0])]);
    let searcher = searcher(store, Some(&embedder), defaults(), now());
    let error = searcher
        .search(&request("hiking boots", 3))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, MemoryError::Invalid(message) if message.contains("2-dimension query vector")),
        "{error:?}"
    );
    // Full text alone does not reach the vector index.
    let text_only = SearchRequest {
        mode: SearchMode::Fts,
        ..request("hiking boots", 3)
    };
    assert_eq!(ids(&searcher.search(&text_only).await.unwrap())[0], "text");
}

#[tokio::test]
async fn a_failing_embedder_leaves_the_text_lists() {
    let (store, _) = boots();
    let embedder = FakeEmbedder::new(3, &[]);
    let searcher = searcher(store, Some(&embedder), defaults(), now());
    let hits = searcher.search(&request("hiking boots", 3)).await.unwrap();
    assert_eq!(embedder.embedded(), 1);
    assert_eq!(ids(&hits), ["text", "both"]);
    assert!(hits.iter().all(|hit| !lists(hit).contains(&"vector")));
}

#[tokio::test]
async fn a_query_is_embedded_once_until_its_vector_is_forgotten() {
    let (store, embedder) = boots();
    let searcher = searcher(store, Some(&embedder), defaults(), now());
    let query = request("hiking boots", 3);
    let first = searcher.search(&query).await.unwrap();
    assert_eq!(embedder.embedded(), 1);
    assert_eq!(searcher.search(&query).await.unwrap(), first);
    assert_eq!(embedder.embedded(), 1);
    searcher.forget_query_vectors();
    searcher.search(&query).await.unwrap();
    assert_eq!(embedder.embedded(), 2);
}

#[tokio::test]
async fn what_was_said_on_the_day_the_query_names_is_lifted_by_the_clock() {
    let memories = || {
        vec![
            memory(
                "older",
                MemoryKind::Episode,
                "buy boots buy socks buy hats",
                now() - Duration::days(5),
            ),
            memory(
                "yesterday",
                MemoryKind::Episode,
                "buy boots buy socks",
                now() - Duration::days(1),
            ),
        ]
    };
    let query = request("what should we buy yesterday", 2);
    let today = searcher(FakeStore::new(memories(), &[], 3), None, defaults(), now());
    let hits = today.search(&query).await.unwrap();
    assert_eq!(ids(&hits), ["yesterday", "older"]);
    assert!(hits[0].why.period > 1.0, "{:?}", hits[0].why);
    // A week later, "yesterday" is another day: the better text match leads.
    let later = now() + Duration::days(7);
    let week_on = searcher(FakeStore::new(memories(), &[], 3), None, defaults(), later);
    let hits = week_on.search(&query).await.unwrap();
    assert_eq!(ids(&hits), ["older", "yesterday"]);
    assert!((hits[1].why.period - 1.0).abs() < 1e-12);
}
