//! [`Searcher`]: hybrid search as a type of its own, over the store as search sees it
//! ([`SearchSource`]), with the embedder and NER it asks, the settings it reads, the clock it
//! judges expiry and periods by, and what it keeps between searches (corpus statistics, recent
//! query vectors). The service holds one over its backend and calls it; the search tests hold
//! one over a small in-memory store (`tests/`).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use mnemo_embedding_api::EmbeddingApi;
use mnemo_kernel::Clock;
use mnemo_ner_api::NerApi;

use super::query_vectors::QueryVectorCache;
use super::source::SearchSource;
use super::stats::CorpusStats;
use crate::config::MemoryConfig;
use crate::store::MemoryBackend;
use crate::types::FusionMethod;
use crate::types::OriginWeights;

/// Searches a store: gathering the candidate lists (`candidates.rs`), fusing and ranking them
/// (`ranking.rs`, `fusion.rs`), pseudo-relevance feedback (`feedback.rs`), and the query's
/// vector (`query_vectors.rs`). Recording what a search recalled is the caller's.
pub(crate) struct Searcher<S: ?Sized = dyn MemoryBackend> {
    pub(super) store: Arc<S>,
    /// Corpus statistics that steer search, cleared when memories are removed for good.
    pub(super) stats: CorpusStats,
    pub(super) config: SearchConfig,
    pub(super) embedder: Option<Arc<dyn EmbeddingApi>>,
    /// Names in queries, besides their word n-grams.
    pub(super) ner: Option<Arc<dyn NerApi>>,
    /// The time a search is made at, when the request does not say.
    pub(super) clock: Arc<dyn Clock>,
    /// Whether the vector index was checked against the provider (once it is ready).
    pub(super) vector_checked: tokio::sync::Mutex<bool>,
    /// Recent query vectors: a search never writes to the database.
    pub(super) query_vectors: Mutex<QueryVectorCache>,
    /// Whether "vector search unavailable" was logged as a warning yet (later, as debug).
    pub(super) fallback_warned: AtomicBool,
}

impl<S: SearchSource + ?Sized> Searcher<S> {
    /// A searcher over `store` with these parts; nothing is read until a search.
    pub(crate) fn new(
        store: Arc<S>,
        config: SearchConfig,
        embedder: Option<Arc<dyn EmbeddingApi>>,
        ner: Option<Arc<dyn NerApi>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            stats: CorpusStats::default(),
            config,
            embedder,
            ner,
            clock,
            vector_checked: tokio::sync::Mutex::new(false),
            query_vectors: Mutex::new(QueryVectorCache::default()),
            fallback_warned: AtomicBool::new(false),
        }
    }

    /// The corpus statistics it keeps, which the search for a fact's near-duplicates reads too
    /// and a removal for good clears.
    pub(crate) fn stats(&self) -> &CorpusStats {
        &self.stats
    }
}

/// The settings search reads, each as [`MemoryConfig`] documents it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SearchConfig {
    pub(crate) max_search_limit: usize,
    pub(crate) candidates_per_list: usize,
    pub(crate) fusion: FusionMethod,
    pub(crate) vector_weight: f64,
    pub(crate) context_weight: f64,
    pub(crate) speaker_weight: f64,
    pub(crate) period_weight: f64,
    pub(crate) entity_weight: f64,
    pub(crate) rrf_k: f64,
    pub(crate) previous_turn_weight: f64,
    pub(crate) next_turn_weight: f64,
    pub(crate) session_weight: f64,
    pub(crate) feedback_weight: f64,
    pub(crate) sentence_weight: f64,
    pub(crate) sentence_floor: f32,
    pub(crate) feedback_matches: usize,
    pub(crate) feedback_shift: f64,
    pub(crate) min_similarity: f32,
    pub(crate) origin_weights: OriginWeights,
}

impl From<&MemoryConfig> for SearchConfig {
    fn from(config: &MemoryConfig) -> Self {
        Self {
            max_search_limit: config.max_search_limit,
            candidates_per_list: config.candidates_per_list,
            fusion: config.fusion,
            vector_weight: config.vector_weight,
            context_weight: config.context_weight,
            speaker_weight: config.speaker_weight,
            period_weight: config.period_weight,
            entity_weight: config.entity_weight,
            rrf_k: config.rrf_k,
            previous_turn_weight: config.previous_turn_weight,
            next_turn_weight: config.next_turn_weight,
            session_weight: config.session_weight,
            feedback_weight: config.feedback_weight,
            sentence_weight: config.sentence_weight,
            sentence_floor: config.sentence_floor,
            feedback_matches: config.feedback_matches,
            feedback_shift: config.feedback_shift,
            min_similarity: config.min_similarity,
            origin_weights: config.origin_weights,
        }
    }
}
