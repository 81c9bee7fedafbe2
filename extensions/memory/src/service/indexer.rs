//! The background indexer: embedding queued memories in batches, and re-indexing.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use mnemo_embedding_api::{EmbeddingApi, EmbeddingHealth};
use mnemo_kernel::KernelContext;
use tracing::Instrument;

use super::MemoryService;
use crate::error::{MemoryError, Result};
use crate::sentence_keys::sentence_keys;
use crate::store::{content_hash, IndexItem, MemoryBackend, VectorStatus};

impl MemoryService {
    /// Starts the background indexer ([`MemoryService::run_indexer`]); [`MemoryService::close`]
    /// ends it.
    pub(crate) fn start_indexer(self: &Arc<Self>, ctx: &KernelContext) {
        let task = tokio::spawn(
            self.clone()
                .run_indexer(ctx.clone())
                .instrument(tracing::info_span!("indexer", extension = crate::NAME)),
        );
        let previous = self
            .indexer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(task);
        if let Some(previous) = previous {
            previous.abort();
        }
    }

    /// Embeds every queued memory now, in batches, until the queue is empty or the embedder
    /// cannot help; returns how many memories got a vector.
    pub async fn index_pending(&self) -> usize {
        let Some(embedder) = self.vector_embedder().await else {
            return 0;
        };
        let Ok(store) = self.store() else {
            return 0;
        };
        let _one_pass = self.indexing.lock().await;
        let mut indexed = 0;
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                return indexed;
            }
            let batch = match store.next_index_batch(self.config.index_batch_size).await {
                Ok(batch) if batch.is_empty() => return indexed,
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "indexer cannot read its queue");
                    return indexed;
                }
            };
            match self.index_batch(&embedder, store.as_ref(), batch).await {
                Ok(count) => indexed += count,
                Err(error) => {
                    tracing::warn!(%error, "indexing failed; the memories stay queued");
                    return indexed;
                }
            }
        }
    }

    pub(super) async fn index_batch(
        &self,
        embedder: &Arc<dyn EmbeddingApi>,
        store: &dyn MemoryBackend,
        batch: Vec<IndexItem>,
    ) -> Result<usize> {
        let model = embedder.model_id().to_owned();
        // Each active item's own text, and a user's turn's sentence keys, by content hash.
        let keys: Vec<Vec<String>> = batch
            .iter()
            .map(|item| {
                if item.active && item.spoken_by_user {
                    sentence_keys(&item.content)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let hashes: Vec<String> = batch
            .iter()
            .map(|item| content_hash(&item.content))
            .collect();
        let key_hashes: Vec<Vec<String>> = keys
            .iter()
            .map(|texts| texts.iter().map(|text| content_hash(text)).collect())
            .collect();
        let wanted: Vec<String> = hashes
            .iter()
            .chain(key_hashes.iter().flatten())
            .cloned()
            .collect();
        let mut known = store.cached_vectors(&wanted, &model).await?;
        let mut missing_texts = Vec::new();
        let mut missing_hashes: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for ((item, hash), (texts, text_hashes)) in
            batch.iter().zip(&hashes).zip(keys.iter().zip(&key_hashes))
        {
            if !item.active {
                continue;
            }
            let own = std::iter::once((&item.content, hash));
            for (text, hash) in own.chain(texts.iter().zip(text_hashes)) {
                if !known.contains_key(hash) && seen.insert(hash.clone()) {
                    missing_texts.push(text.clone());
                    missing_hashes.push(hash.clone());
                }
            }
        }
        if !missing_texts.is_empty() {
            let vectors = embedder
                .embed_batch(&missing_texts)
                .await
                .map_err(|error| MemoryError::Invalid(error.to_string()))?;
            let fresh: Vec<(String, Vec<f32>)> = missing_hashes.into_iter().zip(vectors).collect();
            store.cache_vectors(&fresh, &model, self.now()?).await?;
            known.extend(fresh);
        }
        let mut count = 0;
        let mut sentences: HashMap<String, Vec<Vec<f32>>> = HashMap::new();
        let items: Vec<(IndexItem, Option<Vec<f32>>)> = batch
            .into_iter()
            .zip(hashes)
            .zip(key_hashes)
            .map(|((item, hash), text_hashes)| {
                let vector = if item.active {
                    known.get(&hash).cloned()
                } else {
                    None
                };
                count += usize::from(vector.is_some());
                let keyed: Vec<Vec<f32>> = text_hashes
                    .iter()
                    .filter_map(|hash| known.get(hash).cloned())
                    .collect();
                if vector.is_some() && !keyed.is_empty() {
                    sentences.insert(item.memory_id.clone(), keyed);
                }
                (item, vector)
            })
            .collect();
        store
            .store_vectors_and_sentences(&items, &sentences)
            .await?;
        Ok(count)
    }

    /// Prepares a re-index: with `all`, or when `vec_memories` does not match the embedding
    /// provider, rebuilds the vector table and queues every active memory; otherwise keeps what
    /// is indexed (a re-index that was stopped resumes where it was), and takes over the batches
    /// other processes took and did not finish (see `release_index_leases`). Returns the queue
    /// length.
    ///
    /// # Errors
    /// No embedding provider is ready, or the store fails.
    pub async fn prepare_reindex(&self, all: bool) -> Result<i64> {
        let state = self.state()?;
        let embedder = state.embedder.clone().ok_or_else(|| {
            MemoryError::Invalid("the embedding extension is not enabled".to_owned())
        })?;
        if let EmbeddingHealth::Unavailable { reason } = embedder.health() {
            return Err(MemoryError::Invalid(format!(
                "embeddings are unavailable: {reason}"
            )));
        }
        let status = state
            .store
            .ensure_vector_index(embedder.dimensions(), embedder.model_id())
            .await?;
        if all || matches!(status, VectorStatus::Disabled { .. }) {
            let queued = state
                .store
                .reset_vector_index(embedder.dimensions(), embedder.model_id())
                .await?;
            tracing::info!(queued, model = %embedder.model_id(), "vector index rebuilt; memories queued");
        }
        state.searcher.vector_index_checked().await;
        // Batches a process that died had taken are this run's to embed now, not once their
        // leases run out.
        let freed = state.store.release_index_leases().await?;
        if freed > 0 {
            tracing::info!(
                freed,
                "batches other processes had taken are indexed by this run"
            );
        }
        state.store.pending_index().await
    }

    /// Embeds one batch of the queue; returns how many memories it took off (0 when done).
    ///
    /// # Errors
    /// The embedder or the store fails; the batch stays queued.
    pub async fn index_one_batch(&self) -> Result<usize> {
        let Some(embedder) = self.vector_embedder().await else {
            return Err(MemoryError::Invalid(
                "vector search is not available".to_owned(),
            ));
        };
        let store = self.store()?;
        let _one_pass = self.indexing.lock().await;
        if self.stopping.load(Ordering::SeqCst) {
            return Ok(0);
        }
        let batch = store.next_index_batch(self.config.index_batch_size).await?;
        let taken = batch.len();
        if taken > 0 {
            self.index_batch(&embedder, store.as_ref(), batch).await?;
        }
        Ok(taken)
    }

    /// The background indexer: wakes on new memories (or every few seconds) until shutdown.
    pub(crate) async fn run_indexer(self: Arc<Self>, ctx: KernelContext) {
        let shutdown = ctx.shutdown_token();
        let mut mirror_loaded = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.index_wakeup.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            self.index_pending().await;
            // Load the vector mirror here, once the model is ready, rather than in the first
            // search (about 0.5 s per 100k vectors).
            if !mirror_loaded && self.vector_embedder().await.is_some() {
                if let Ok(store) = self.store() {
                    match store.mirror_size().await {
                        Ok(size) => tracing::debug!(
                            rows = size.memory_rows,
                            sentence_rows = size.sentence_rows,
                            "vector mirror ready"
                        ),
                        Err(error) => tracing::warn!(%error, "cannot load the vector mirror"),
                    }
                }
                mirror_loaded = true;
            }
        }
    }
}
