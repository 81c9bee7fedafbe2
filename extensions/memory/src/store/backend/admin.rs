//! The storage traits for export and import, and for administration.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_kernel::host::JobRun;
use serde_json::Value;

use crate::error::Result;
use crate::store::{IntegrityReport, KeyRecord, McpSessionRecord};

/// Lossless export of the stored memories as JSON records, and importing them back.
#[async_trait]
pub(crate) trait MemoryExport: Send + Sync {
    /// Every row of the memory tables as `{"type": table, "row": {column: value}}`, ordered by
    /// key: a lossless export (vectors and caches are rebuilt by the indexer after import).
    /// With `user_id`, only that user's memories, entities, links, sessions and events.
    ///
    /// # Errors
    /// The database fails.
    async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>>;

    /// Inserts one exported row unless a row with its key exists; returns whether it was new.
    /// Memories come back on the embedding queue.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for an unknown table or a row that is not an object of plain
    /// values; the database fails.
    async fn import_row(&self, table: &str, row: &Value) -> Result<bool>;

    /// [`Self::import_row`] for each `(table, row)`, all in one transaction (all or none);
    /// returns how many were new.
    ///
    /// # Errors
    /// As [`Self::import_row`], for the first row that fails; nothing is written then.
    async fn import_rows(&self, rows: &[(&str, &Value)]) -> Result<u64>;
}

/// Administration: closing the store cleanly, and checking it.
#[async_trait]
pub(crate) trait StoreAdmin: Send + Sync {
    /// Waits for the writer in progress, empties the write-ahead log into the database file
    /// and closes the pool, waiting for connections to finish. The next open then finds a
    /// short log, whatever was written before.
    async fn close(&self);

    /// Checks the database file, the full-text index against `memories`, and the vector index
    /// and indexer queue against the active memories. Holds the write lock (the FTS5 check is
    /// a write statement that changes nothing), so writers wait for it: seconds at 100k
    /// memories.
    ///
    /// # Errors
    /// The database cannot be read at all.
    async fn check_integrity(&self) -> Result<IntegrityReport>;

    /// Which backend this is: `sqlite` or `postgres`.
    fn backend_name(&self) -> &'static str;

    /// Why the database does not answer, when a probe found so (PostgreSQL's server is down or
    /// unreachable); `None` while it answers, and always for a SQLite file.
    fn unreachable(&self) -> Option<String>;

    /// Bytes the store takes in its database: SQLite's main file (pages in use and free, without
    /// the write-ahead log), or PostgreSQL's database (tables, indexes and TOAST).
    ///
    /// # Errors
    /// The database fails.
    async fn database_bytes(&self) -> Result<u64>;
}

/// How long a claimed run is remembered, in seconds: far longer than the period of any
/// schedule that matters here (a weekly reflection).
pub(crate) const JOB_CLAIMS_KEPT_SECS: i64 = 30 * 24 * 3600;

/// How many job runs the history keeps; older ones are dropped as new ones are recorded.
pub(crate) const JOB_HISTORY_KEPT: i64 = 10_000;

/// Runs of scheduled jobs: claimed across the instances that share the store, and the outcome
/// of each, kept.
#[async_trait]
pub(crate) trait JobRecords: Send + Sync {
    /// Records a finished run, dropping runs beyond the newest [`JOB_HISTORY_KEPT`].
    ///
    /// # Errors
    /// The database fails.
    async fn record_job_run(&self, run: &JobRun) -> Result<()>;

    /// The newest `limit` runs, newest first.
    ///
    /// # Errors
    /// The database fails.
    async fn recent_job_runs(&self, limit: usize) -> Result<Vec<JobRun>>;

    /// Claims the run of `job` due at `due` (at `now`, wall clock): true when no instance had
    /// claimed it. Claims older than 30 days are dropped on the way.
    ///
    /// # Errors
    /// The database fails.
    async fn claim_job_run(
        &self,
        job: &str,
        due: chrono::DateTime<chrono::Utc>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool>;
}

/// API keys and the store's one-off settings: kept in the store, so that every server on it
/// sees the same keys and a revocation reaches them all at their next lookup.
#[async_trait]
pub(crate) trait AccessRecords: Send + Sync {
    /// Stores `key` unless a key with its id exists; returns whether it was new.
    ///
    /// # Errors
    /// The database fails.
    async fn insert_key(&self, key: &KeyRecord) -> Result<bool>;

    /// Every key, revoked ones included, oldest first; with `id`, that key only.
    ///
    /// # Errors
    /// The database fails, or a stored key cannot be read.
    async fn keys(&self, id: Option<&str>) -> Result<Vec<KeyRecord>>;

    /// Revokes the key `id` at `at` (a second revocation keeps the first time); returns it as
    /// stored now, or `None` when there is no such key.
    ///
    /// # Errors
    /// The database fails.
    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>>;

    /// The store setting `name`, if set.
    ///
    /// # Errors
    /// The database fails.
    async fn setting(&self, name: &str) -> Result<Option<String>>;

    /// Sets the store setting `name` unless it is set (the first value stands); returns whether
    /// this call set it.
    ///
    /// # Errors
    /// The database fails.
    async fn set_setting(&self, name: &str, value: &str) -> Result<bool>;

    /// Records that the MCP session `id` was opened by the key `key_id` (the first binding
    /// stands), and forgets sessions older than a week.
    ///
    /// # Errors
    /// The database fails.
    async fn bind_mcp_session(&self, id: &str, key_id: &str, at: DateTime<Utc>) -> Result<()>;

    /// Keeps the client's `initialize` parameters (JSON) of the MCP session `id`.
    ///
    /// # Errors
    /// The database fails.
    async fn store_mcp_session(&self, id: &str, initialize: &str, at: DateTime<Utc>) -> Result<()>;

    /// The MCP session `id`: the key that opened it, and its `initialize` parameters.
    ///
    /// # Errors
    /// The database fails.
    async fn mcp_session(&self, id: &str) -> Result<Option<McpSessionRecord>>;

    /// Forgets the MCP session `id`.
    ///
    /// # Errors
    /// The database fails.
    async fn delete_mcp_session(&self, id: &str) -> Result<()>;

    /// Makes `user` a member of `chat` (`added_by`: `turn` or `admin`) unless they are one;
    /// returns whether this call made them one.
    ///
    /// # Errors
    /// The database fails.
    async fn add_chat_member(
        &self,
        chat: &str,
        user: &str,
        added_by: &str,
        at: DateTime<Utc>,
    ) -> Result<bool>;

    /// Removes `user` from `chat`; returns whether they were a member.
    ///
    /// # Errors
    /// The database fails.
    async fn remove_chat_member(&self, chat: &str, user: &str) -> Result<bool>;

    /// Whether `user` is a member of `chat`.
    ///
    /// # Errors
    /// The database fails.
    async fn is_chat_member(&self, chat: &str, user: &str) -> Result<bool>;
}
