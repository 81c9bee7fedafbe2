//! Administration: closing the store cleanly, and the integrity check behind `mnemo check`:
//! SQLite's own checks of its pages and full-text index, then the counts both backends make
//! (`store/sql/admin.rs`), under the write lock.

use async_trait::async_trait;
use sqlx::Sqlite;

use super::checkpoint::checkpoint;
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::StoreAdmin;
use crate::store::sql::integrity_counts;
use crate::store::IntegrityReport;

/// Tries of the closing checkpoint while readers keep the log busy.
const CLOSE_CHECKPOINT_TRIES: u32 = 10;
/// The pause between two of them.
const CLOSE_CHECKPOINT_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

#[async_trait]
impl StoreAdmin for MemoryStore {
    async fn close(&self) {
        self.checkpointer.abort();
        let _write = self.write_lock.lock().await;
        // What the last removals left in the full-text index goes before the log is emptied.
        let started = std::time::Instant::now();
        match super::index_merge::merge_if_due(&self.pool).await {
            Ok(merged) => tracing::debug!(
                merged,
                micros = started.elapsed().as_micros() as u64,
                "full-text index merged at close"
            ),
            Err(error) => {
                tracing::warn!(%error, "index merge at close failed; the next open merges it");
            }
        }
        // A reader finishing, or the checkpointer's last statement still running on its
        // connection (an aborted task does not stop a statement under way), makes the first
        // try busy; a few more tries within a quarter of a second empty the log.
        for attempt in 1..=CLOSE_CHECKPOINT_TRIES {
            match checkpoint(&self.pool, "TRUNCATE").await {
                Ok((false, _)) => break,
                Ok((true, log_frames)) if attempt == CLOSE_CHECKPOINT_TRIES => {
                    tracing::info!(
                        log_frames,
                        "readers kept the wal at close; the next open checkpoints it"
                    );
                }
                Ok((true, _)) => tokio::time::sleep(CLOSE_CHECKPOINT_PAUSE).await,
                Err(error) => {
                    tracing::warn!(%error, "closing checkpoint failed; the next open recovers the log");
                    break;
                }
            }
        }
        self.pool.close().await;
    }

    async fn check_integrity(&self) -> Result<IntegrityReport> {
        let _write = self.write_lock.lock().await;
        let mut connection = self.pool.acquire().await?;
        // With rank 1, FTS5 also compares the index with the content table. It runs first: it
        // reloads the connection's cached index structure, which `PRAGMA integrity_check` does
        // not, and which is stale on this connection when another one merged the index (as a
        // purge does): the pragma then reports a sound index as malformed.
        let full_text = sqlx::query(
            "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)",
        )
        .execute(&mut *connection)
        .await
        .err()
        .map(|error| error.to_string());
        let database: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_all(&mut *connection)
            .await?
            .into_iter()
            .filter(|finding: &String| finding != "ok")
            .collect();
        let has_vectors = self.vector_table_exists(&mut connection).await?;
        let counts = integrity_counts::<Sqlite>(&mut connection, has_vectors).await?;
        Ok(IntegrityReport {
            database,
            full_text,
            ..counts
        })
    }

    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    fn unreachable(&self) -> Option<String> {
        None
    }

    async fn database_bytes(&self) -> Result<u64> {
        let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(&self.pool)
            .await?;
        let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(pages.saturating_mul(page_size)).unwrap_or_default())
    }
}
