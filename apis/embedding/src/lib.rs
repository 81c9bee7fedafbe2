//! The embedding service's API: what the `embedding` extension publishes in the kernel's
//! `Services` as `dyn EmbeddingApi`, and what callers (the memory extension) depend on instead of
//! the implementation, so that they compile no model runtime.
#![warn(missing_docs)]

use async_trait::async_trait;

/// Whether the provider can embed right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbeddingHealth {
    /// Embeddings can be computed.
    Ready,
    /// Embeddings cannot be computed; the reason says what to do (e.g. run `scripts/fetch-model`).
    Unavailable {
        /// Why, and how to fix it.
        reason: String,
    },
}

/// Why an embedding call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingError {
    /// The provider is not ready (model missing, server unreachable at start).
    #[error("embedding provider unavailable: {0}")]
    Unavailable(String),
    /// The model or server failed on this input.
    #[error("embedding failed: {0}")]
    Failed(String),
    /// A remote provider did not answer in time.
    #[error("embedding provider timed out after {0} s")]
    Timeout(u64),
}

/// Sentence embeddings: text in, L2-normalised vectors out. Pure: no storage, no caching
/// (the memory extension caches vectors by content hash in its database).
#[async_trait]
pub trait EmbeddingApi: Send + Sync + 'static {
    /// Length of every vector this provider returns.
    fn dimensions(&self) -> usize;

    /// Identifies model and output size, e.g. `all-MiniLM-L6-v2` or `text-embedding-3-large@256`.
    /// Vectors from different model ids are never mixed.
    fn model_id(&self) -> &str;

    /// Whether embeddings can be computed now.
    fn health(&self) -> EmbeddingHealth;

    /// How many tokens the model reads of `text`, after its input limit cuts it; `None` when
    /// the provider cannot tell (a remote server's tokenizer is its own). For measuring
    /// throughput in tokens.
    fn token_count(&self, _text: &str) -> Option<usize> {
        None
    }

    /// Embeds one text (an empty text is allowed).
    ///
    /// # Errors
    /// [`EmbeddingError`]; callers fall back to non-vector search.
    async fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError>;

    /// Embeds several texts in one batch; the result has one vector per text, in order.
    ///
    /// # Errors
    /// As [`EmbeddingApi::embed`].
    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError>;
}
