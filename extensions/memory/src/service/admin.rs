//! Administration through the service, for the `mnemo` commands, the inspector and the
//! benchmark: statistics, owners and their entities, integrity, export and import, retrying given-up jobs, and driving the vector index directly.

use serde_json::Value;

use super::MemoryService;
use crate::error::Result;
use crate::store::{EntitySummary, IndexItem, IntegrityReport, OwnerSummary, VectorStatus};
use crate::types::{Memory, MemoryStats, SessionKey};

impl MemoryService {
    /// Gives the sessions and memories that the maintenance jobs gave up on after repeated
    /// failures a fresh start (`mnemo jobs retry`); returns how many sessions and memories.
    ///
    /// # Errors
    /// The store fails; nothing is changed then.
    pub async fn retry_given_up(&self) -> Result<(u64, u64)> {
        self.store()?.reset_failed_attempts().await
    }

    /// Why the store's database does not answer, when its probe found so (a PostgreSQL server
    /// down or unreachable); `None` while it answers, and always for a SQLite file. Reads no
    /// database: a server checks it before each request, to refuse at once.
    pub fn store_unreachable(&self) -> Option<String> {
        self.store().ok().and_then(|store| store.unreachable())
    }

    /// Counts of active memories, entities and the index queue; only `user_id`'s if given.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats> {
        self.store()?.stats(user_id).await
    }

    /// The owners with memories and how many each has, by user id, at most `limit`; for an
    /// admin choosing whose memory to inspect.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn owners(&self, limit: usize) -> Result<Vec<OwnerSummary>> {
        self.store()?.owners(limit).await
    }

    /// The owner's entities (people too), most mentioned first, at most `limit`.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn owner_entities(&self, owner: &str, limit: usize) -> Result<Vec<EntitySummary>> {
        self.store()?.owner_entities(owner, limit).await
    }

    /// The memories that `id` replaced, oldest first: a fact's earlier versions.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn replaced_by(&self, id: &str) -> Result<Vec<Memory>> {
        self.store()?.replaced_by(id).await
    }

    /// The messaging provider `session` came through (`telegram`), as its user's turns named
    /// it; `None` when none did.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn session_provider(&self, session: &SessionKey) -> Result<Option<String>> {
        self.store()?.session_provider(session).await
    }

    /// The storage backend (`sqlite` or `postgres`) and the bytes its database takes (see
    /// the store's `database_bytes`).
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn database_size(&self) -> Result<(&'static str, u64)> {
        let store = self.store()?;
        Ok((store.backend_name(), store.database_bytes().await?))
    }

    /// Checks the store: the database file, the full-text index against the memories, and the
    /// vector index and indexer queue against the active memories (`mnemo check`). Writers
    /// wait while it runs.
    ///
    /// # Errors
    /// The store is not open, or cannot be read at all.
    pub async fn check_integrity(&self) -> Result<IntegrityReport> {
        self.store()?.check_integrity().await
    }

    /// Every stored row as `{"type": table, "row": {column: value}}`, ordered by key: a lossless
    /// export (`mnemo export`); with `user_id`, only that user's.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>> {
        self.store()?.export_rows(user_id).await
    }

    /// Imports one exported row unless a row with its key exists; returns whether it was new.
    ///
    /// # Errors
    /// [`crate::MemoryError::Invalid`] for an unknown table or a malformed row; the store fails.
    pub async fn import_row(&self, table: &str, row: &Value) -> Result<bool> {
        self.store()?.import_row(table, row).await
    }

    /// Memories waiting for a vector.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn pending_index(&self) -> Result<i64> {
        self.store()?.pending_index().await
    }

    /// Checks the vector index against an embedding model, creating it on first use (see
    /// [`Self::prepare_reindex`] for rebuilding it); for hosts that embed themselves.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn ensure_vector_index(
        &self,
        dimensions: usize,
        model_id: &str,
    ) -> Result<VectorStatus> {
        self.store()?
            .ensure_vector_index(dimensions, model_id)
            .await
    }

    /// The next memories waiting for a vector, oldest first, for hosts that embed them
    /// themselves (the benchmark) and hand them back through [`Self::store_vectors`].
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn next_index_batch(&self, limit: usize) -> Result<Vec<IndexItem>> {
        self.store()?.next_index_batch(limit).await
    }

    /// Stores vectors made outside the indexer and takes their memories off the queue; an item
    /// without a vector only leaves the queue.
    ///
    /// # Errors
    /// The store is not open, or fails; the queue is unchanged then.
    pub async fn store_vectors(&self, items: &[(IndexItem, Option<Vec<f32>>)]) -> Result<()> {
        self.store()?.store_vectors(items).await
    }

    /// [`Self::store_vectors`] with the sentence keys of the items the user spoke: by memory
    /// id, the vectors of [`crate::sentence_keys`]'s sentences of its text, in order.
    ///
    /// # Errors
    /// The store is not open, or fails; nothing changes then.
    pub async fn store_vectors_and_sentences(
        &self,
        items: &[(IndexItem, Option<Vec<f32>>)],
        sentences: &std::collections::HashMap<String, Vec<Vec<f32>>>,
    ) -> Result<()> {
        self.store()?
            .store_vectors_and_sentences(items, sentences)
            .await
    }

    /// Rows and approximate heap bytes of the in-memory vector index, loading it if needed.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn vector_mirror_size(&self) -> Result<crate::store::MirrorSize> {
        self.store()?.mirror_size().await
    }

    /// The `k` stored vectors nearest to `vector` (only `owner`'s, of `kind`, when given) with
    /// their cosine similarity, found exactly: the benchmark measures recall against it.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn nearest_exact(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        self.store()?.nearest_exact(vector, owner, kind, k).await
    }

    /// As [`Self::nearest_exact`], from the approximate index vector search uses.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn nearest_approximate(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        self.store()?
            .nearest_approximate(vector, owner, kind, k)
            .await
    }
}

#[async_trait::async_trait]
impl mnemo_kernel::JobClaims for MemoryService {
    async fn claim_run(
        &self,
        job: &str,
        due: chrono::DateTime<chrono::Utc>,
    ) -> std::result::Result<bool, mnemo_kernel::BoxError> {
        Ok(self
            .store()?
            .claim_job_run(job, due, chrono::Utc::now())
            .await?)
    }
}

#[async_trait::async_trait]
impl mnemo_kernel::JobHistory for MemoryService {
    async fn record_run(
        &self,
        run: &mnemo_kernel::host::JobRun,
    ) -> std::result::Result<(), mnemo_kernel::BoxError> {
        Ok(self.store()?.record_job_run(run).await?)
    }

    async fn recent_runs(
        &self,
        limit: usize,
    ) -> std::result::Result<Vec<mnemo_kernel::host::JobRun>, mnemo_kernel::BoxError> {
        Ok(self.store()?.recent_job_runs(limit).await?)
    }
}
