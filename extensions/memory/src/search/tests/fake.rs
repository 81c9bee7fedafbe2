//! A small in-memory store and embedder for the search tests: only storage is faked. Full
//! text is matched word by word (a memory's score: how many of its words are query terms,
//! repeats counted),
//! vectors are given by hand, and every read keeps to the request's owner and kinds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_embedding_api::{EmbeddingApi, EmbeddingError, EmbeddingHealth};

use crate::error::{MemoryError, Result};
use crate::search::source::SearchSource;
use crate::store::{FirstPass, RankKey, TextScope, VectorStatus};
use crate::types::{EntityInfo, Memory, MemoryKind, Person, SearchRequest};

/// The model id of [`FakeEmbedder`] and of [`FakeStore`]'s vector index.
const MODEL: &str = "fake-model";

/// A memory of `kind` owned by `alice`, said at `at`, with confidence 1.
pub(super) fn memory(id: &str, kind: MemoryKind, content: &str, at: DateTime<Utc>) -> Memory {
    Memory {
        id: id.to_owned(),
        kind,
        content: content.to_owned(),
        session_id: None,
        user_id: Some("alice".to_owned()),
        chat_id: None,
        event_time: at,
        created_at: at,
        valid_until: None,
        confidence: 1.0,
        access_count: 0,
        last_accessed: None,
        decay_rate: 0.0,
        source_ids: Vec::new(),
        source_role: None,
        entity_ids: Vec::new(),
        tags: Vec::new(),
        attributes: serde_json::Map::new(),
        memory_type: None,
        expires_at: None,
        shared: false,
        superseded_at: None,
        superseded_by_id: None,
        faded_at: None,
        subject_ids: Vec::new(),
        quarantine: None,
        origin: crate::types::Origin::User,
        valid_from: None,
        valid_to: None,
    }
}

/// Memories, the vectors of some of them, and a vector index of `dimensions`.
#[derive(Debug)]
pub(super) struct FakeStore {
    memories: Vec<Memory>,
    vectors: HashMap<String, Vec<f32>>,
    dimensions: usize,
}

impl FakeStore {
    /// A store of `memories`, with `vectors` (by memory id) in a vector index of `dimensions`.
    pub(super) fn new(
        memories: Vec<Memory>,
        vectors: &[(&str, Vec<f32>)],
        dimensions: usize,
    ) -> Self {
        let vectors = vectors
            .iter()
            .map(|(id, vector)| ((*id).to_owned(), vector.clone()))
            .collect();
        Self {
            memories,
            vectors,
            dimensions,
        }
    }

    /// The memories that pass the request's filters this store knows: owner and kinds.
    fn visible<'a>(&'a self, request: &'a SearchRequest) -> impl Iterator<Item = &'a Memory> {
        self.memories.iter().filter(move |memory| {
            (request.kinds.is_empty() || request.kinds.contains(&memory.kind))
                && (request.user_id.is_none() || memory.user_id == request.user_id)
        })
    }

    /// Those of `ids` that pass the request's filters.
    fn among<'a>(
        &'a self,
        ids: &'a [String],
        request: &'a SearchRequest,
    ) -> impl Iterator<Item = &'a Memory> {
        self.visible(request)
            .filter(move |memory| ids.contains(&memory.id))
    }

    /// The memories matching a full-text query (quoted terms, as `fts_query` writes them),
    /// each scored by how many of its words are the query's terms, best first.
    fn text_matches(&self, query: &str, request: &SearchRequest) -> Vec<(String, f64)> {
        let wanted: Vec<String> = query
            .split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        let mut scored: Vec<(String, f64)> = self
            .visible(request)
            .map(|memory| {
                let content = memory.content.to_lowercase();
                let hits = content
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|word| wanted.iter().any(|term| term == word))
                    .count();
                (memory.id.clone(), hits as f64)
            })
            .filter(|(_, score)| *score > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored
    }
}

/// The cosine similarity of two vectors (0 when either is zero).
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let norms = norm(a) * norm(b);
    if norms > 0.0 {
        dot / norms
    } else {
        0.0
    }
}

#[async_trait]
impl SearchSource for FakeStore {
    async fn rank_keys(
        &self,
        ids: &[String],
        request: &SearchRequest,
        _neighbours: bool,
    ) -> Result<HashMap<String, RankKey>> {
        Ok(self
            .among(ids, request)
            .map(|memory| {
                let key = RankKey {
                    confidence: memory.confidence,
                    event_time: memory.event_time.timestamp(),
                    previous: None,
                    next: None,
                    session: None,
                    origin: memory.origin,
                };
                (memory.id.clone(), key)
            })
            .collect())
    }

    async fn load_filtered(
        &self,
        ids: &[String],
        request: &SearchRequest,
    ) -> Result<HashMap<String, Memory>> {
        Ok(self
            .among(ids, request)
            .map(|memory| (memory.id.clone(), memory.clone()))
            .collect())
    }

    async fn fts_best_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let mut matches = self.text_matches(query, request);
        matches.truncate(limit);
        Ok(matches)
    }

    async fn fts_first_pass_matches(
        &self,
        pass: &FirstPass,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        self.fts_best_matches(&pass.query, request, limit).await
    }

    async fn fts_all_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        self.fts_best_matches(query, request, limit).await
    }

    async fn fts_document_count(&self, _scope: TextScope<'_>) -> Result<i64> {
        Ok(self.memories.len() as i64)
    }

    async fn fts_match_count(&self, query: &str, _scope: TextScope<'_>) -> Result<i64> {
        Ok(self.text_matches(query, &SearchRequest::default()).len() as i64)
    }

    fn vector_status(&self) -> VectorStatus {
        VectorStatus::Enabled {
            dimensions: self.dimensions,
            model_id: MODEL.to_owned(),
        }
    }

    async fn ensure_vector_index(&self, _dimensions: usize, _model: &str) -> Result<VectorStatus> {
        Ok(self.vector_status())
    }

    async fn search_vector(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>> {
        if vector.len() != self.dimensions {
            return Err(MemoryError::Invalid(format!(
                "a {}-dimension query vector for a {}-dimension vector index",
                vector.len(),
                self.dimensions
            )));
        }
        let mut nearest: Vec<(String, f32)> = self
            .visible(request)
            .filter_map(|memory| {
                let similarity = cosine(self.vectors.get(&memory.id)?, vector);
                Some((memory.id.clone(), similarity))
            })
            .filter(|(_, similarity)| *similarity >= min_similarity)
            .collect();
        nearest.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        nearest.truncate(limit);
        Ok(nearest)
    }

    async fn search_sentences(
        &self,
        _request: &SearchRequest,
        _vector: &[f32],
        _limit: usize,
        _min_similarity: f32,
    ) -> Result<Vec<(String, f32)>> {
        Ok(Vec::new())
    }

    async fn stored_vectors(&self, ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        Ok(ids
            .iter()
            .filter_map(|id| Some((id.clone(), self.vectors.get(id)?.clone())))
            .collect())
    }

    async fn entities_named(&self, _owner: Option<&str>, _names: &[String]) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn entity_info_by_id(
        &self,
        _owner: Option<&str>,
        _chat_id: Option<&str>,
        _id: &str,
        _memory_limit: usize,
    ) -> Result<Option<EntityInfo>> {
        Ok(None)
    }

    async fn entity_link_counts(&self, _entity_ids: &[String]) -> Result<HashMap<String, i64>> {
        Ok(HashMap::new())
    }

    async fn linked_memory_count(&self, _owner: Option<&str>) -> Result<i64> {
        Ok(0)
    }

    async fn co_mentions(
        &self,
        _driver: &str,
        _others: &[String],
        _scan: i64,
        _limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        Ok(Vec::new())
    }

    async fn newest_links(&self, _entity_id: &str, _depth: i64) -> Result<Vec<(String, i64)>> {
        Ok(Vec::new())
    }

    async fn person_by_relation(&self, _owner: &str, _relation: &str) -> Result<Option<Person>> {
        Ok(None)
    }
}

/// An embedder that gives each query text the vector it was told, or fails; it counts the
/// texts it was asked to embed.
#[derive(Debug)]
pub(super) struct FakeEmbedder {
    vectors: HashMap<String, Vec<f32>>,
    dimensions: usize,
    embedded: AtomicUsize,
}

impl FakeEmbedder {
    /// An embedder of `dimensions` that embeds each text of `vectors` so, and fails on
    /// any other.
    pub(super) fn new(dimensions: usize, vectors: &[(&str, Vec<f32>)]) -> Arc<Self> {
        let vectors = vectors
            .iter()
            .map(|(text, vector)| ((*text).to_owned(), vector.clone()))
            .collect();
        Arc::new(Self {
            vectors,
            dimensions,
            embedded: AtomicUsize::new(0),
        })
    }

    /// How many texts it was asked to embed.
    pub(super) fn embedded(&self) -> usize {
        self.embedded.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl EmbeddingApi for FakeEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn model_id(&self) -> &str {
        MODEL
    }

    fn health(&self) -> EmbeddingHealth {
        EmbeddingHealth::Ready
    }

    async fn embed(&self, text: &str) -> std::result::Result<Vec<f32>, EmbeddingError> {
        self.embedded.fetch_add(1, Ordering::SeqCst);
        self.vectors
            .get(text)
            .cloned()
            .ok_or_else(|| EmbeddingError::Failed(format!("no vector for {text:?}")))
    }

    async fn embed_batch(
        &self,
        texts: &[String],
    ) -> std::result::Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for text in texts {
            vectors.push(self.embed(text).await?);
        }
        Ok(vectors)
    }
}
