//! The query's vector: whether vector search can run (the embedder is ready and the store's
//! vector index matches it, checked the first time it is ready), the vectors of recent
//! queries, and saying once why search falls back to full text and entities.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use mnemo_embedding_api::{EmbeddingApi, EmbeddingHealth};

use super::searcher::Searcher;
use super::source::SearchSource;
use crate::error::Result;
use crate::store::{content_hash, VectorStatus};

/// The vectors of the last [`QueryVectorCache::CAPACITY`] distinct queries, keyed by model and
/// text hash; the oldest goes first.
#[derive(Default)]
pub(super) struct QueryVectorCache {
    vectors: HashMap<(String, String), Vec<f32>>,
    order: VecDeque<(String, String)>,
}

impl QueryVectorCache {
    const CAPACITY: usize = 512;

    fn get(&self, key: &(String, String)) -> Option<Vec<f32>> {
        self.vectors.get(key).cloned()
    }

    fn insert(&mut self, key: (String, String), vector: Vec<f32>) {
        if self.vectors.insert(key.clone(), vector).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > Self::CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.vectors.remove(&oldest);
            }
        }
    }
}

impl<S: SearchSource + ?Sized> Searcher<S> {
    /// The embedder, if it is ready and the vector index matches it. Checks the vector index
    /// the first time the embedder is ready.
    pub(crate) async fn vector_embedder(&self) -> Option<Arc<dyn EmbeddingApi>> {
        let embedder = self.embedder.clone()?;
        if embedder.health() != EmbeddingHealth::Ready {
            return None;
        }
        let mut checked = self.vector_checked.lock().await;
        if !*checked {
            match self
                .store
                .ensure_vector_index(embedder.dimensions(), embedder.model_id())
                .await
            {
                Ok(VectorStatus::Enabled {
                    dimensions,
                    model_id,
                }) => {
                    tracing::info!(dimensions, %model_id, "vector search enabled");
                }
                Ok(VectorStatus::Disabled { reason }) => {
                    tracing::warn!(%reason, "vector search disabled")
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot prepare the vector index; will retry");
                    return None;
                }
            }
            *checked = true;
        }
        match self.store.vector_status() {
            VectorStatus::Enabled { .. } => Some(embedder),
            VectorStatus::Disabled { .. } => None,
        }
    }

    /// Records that the vector index was checked against the provider (a re-index did).
    pub(crate) async fn vector_index_checked(&self) {
        *self.vector_checked.lock().await = true;
    }

    fn warn_fallback(&self, why: &str) {
        if !self.fallback_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(reason = %why, "vector search unavailable; searching with FTS5 and entities");
        } else {
            tracing::debug!(reason = %why, "vector search unavailable");
        }
    }

    /// Why vector search is off right now, if it is.
    fn vector_unavailable_reason(&self) -> String {
        match &self.embedder {
            None => "the embedding extension is not enabled".to_owned(),
            Some(embedder) => match embedder.health() {
                EmbeddingHealth::Unavailable { reason } => reason,
                EmbeddingHealth::Ready => match self.store.vector_status() {
                    VectorStatus::Disabled { reason } => reason,
                    VectorStatus::Enabled { .. } => "vector search is available".to_owned(),
                },
            },
        }
    }

    /// The query's embedding; `None` when vector search is unavailable (the reason is logged
    /// once) or the query embeds to nothing.
    pub(super) async fn query_embedding(&self, text: &str) -> Result<Option<Vec<f32>>> {
        let Some(embedder) = self.vector_embedder().await else {
            let reason = self.vector_unavailable_reason();
            self.warn_fallback(&reason);
            return Ok(None);
        };
        self.query_vector(&embedder, text).await
    }

    /// The query's vector, from the cache or the embedder.
    pub(crate) async fn query_vector(
        &self,
        embedder: &Arc<dyn EmbeddingApi>,
        query: &str,
    ) -> Result<Option<Vec<f32>>> {
        let key = (embedder.model_id().to_owned(), content_hash(query));
        let recent = self
            .query_vectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key);
        if let Some(vector) = recent {
            return Ok(Some(vector));
        }
        let vector = match embedder.embed(query).await {
            Ok(vector) => vector,
            Err(error) => {
                self.warn_fallback(&error.to_string());
                return Ok(None);
            }
        };
        self.query_vectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, vector.clone());
        Ok(Some(vector))
    }

    /// Forgets the recent query vectors, whoever asked them; how many there were.
    pub(crate) fn forget_query_vectors(&self) -> u64 {
        let forgotten = std::mem::take(
            &mut *self
                .query_vectors
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        forgotten.vectors.len() as u64
    }
}
