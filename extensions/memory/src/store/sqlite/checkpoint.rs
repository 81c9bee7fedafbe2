//! The background WAL checkpointer, which keeps the write-ahead log short without a writer
//! paying for it, and merges the full-text index after removals (see `index_merge`).

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqlitePool;

use super::index_merge;

/// How often the write-ahead log is checkpointed.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// Log frames (pages; 4 KB each by default, so 64 MB) past which the checkpointer truncates
/// the log. Also the size SQLite trims the log file to when it restarts it (`journal_size_limit`).
pub(crate) const DEFAULT_WAL_TRUNCATE_FRAMES: i64 = 16_384;

/// How long a truncation waits for readers still on the log before it gives up for now.
const TRUNCATE_WAIT: Duration = Duration::from_millis(200);

/// Checkpoint rounds skipped after readers kept a truncation from finishing (1 s): writers
/// then wait at most 200 ms in every 1.5 s for a reader that never lets go, and the log grows
/// for at most a second between attempts.
const TRUNCATE_BACKOFF_ROUNDS: u32 = 2;

/// Copies committed WAL frames into the database file in the background (PASSIVE: it never
/// blocks readers or the writer), so that the log stays short without a writer doing it.
///
/// Under a writer that never pauses, passive checkpoints never catch the log's end, so SQLite
/// never restarts the log and it grows without bound (400 MB in a 100k-memory bench; at a
/// million memories, closing the store then took longer than the next open waits). Past
/// `wal_truncate_frames` ([`DEFAULT_WAL_TRUNCATE_FRAMES`]) the checkpointer therefore takes the store's write lock, so that
/// writers queue in the process instead of spinning on SQLITE_BUSY, and runs a TRUNCATE
/// checkpoint: it copies the few frames left, waits up to [`TRUNCATE_WAIT`] for the readers
/// still on the log (searches take milliseconds) and empties the log file. A long reader (an
/// export) makes it give up and try again [`TRUNCATE_BACKOFF_ROUNDS`] rounds later, so writers
/// are never held longer than that wait.
pub(super) async fn checkpoint_loop(
    pool: SqlitePool,
    write_lock: Arc<tokio::sync::Mutex<()>>,
    busy_timeout: Duration,
    truncate_frames: i64,
) {
    let mut interval = tokio::time::interval(CHECKPOINT_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backoff = 0;
    loop {
        interval.tick().await;
        if pool.is_closed() {
            break;
        }
        let log_frames = match checkpoint(&pool, "PASSIVE").await {
            Ok((_, log_frames)) => log_frames,
            Err(error) if pool.is_closed() => {
                tracing::trace!(%error, "checkpointer stopped with the pool");
                break;
            }
            Err(error) => {
                tracing::warn!(%error, "wal checkpoint failed; retrying");
                continue;
            }
        };
        merge_index_if_due(&pool, &write_lock).await;
        if backoff > 0 {
            backoff -= 1;
            continue;
        }
        if log_frames > truncate_frames {
            let started = std::time::Instant::now();
            let _write = write_lock.lock().await;
            match truncate_log(&pool, busy_timeout).await {
                Ok(true) => tracing::debug!(
                    log_frames,
                    micros = started.elapsed().as_micros() as u64,
                    "wal truncated"
                ),
                Ok(false) => {
                    tracing::debug!(log_frames, "readers kept the wal; truncating later");
                    backoff = TRUNCATE_BACKOFF_ROUNDS;
                }
                Err(_) if pool.is_closed() => break,
                Err(error) => tracing::warn!(%error, log_frames, "wal truncation failed; retrying"),
            }
        }
    }
}

/// Merges the full-text index if a removal marked it due (see `index_merge`), under the
/// store's write lock; a failure is logged and the next round tries again.
async fn merge_index_if_due(pool: &SqlitePool, write_lock: &tokio::sync::Mutex<()>) {
    match index_merge::merge_due(pool).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(error) => {
            if !pool.is_closed() {
                tracing::warn!(%error, "checking for a due index merge failed; retrying");
            }
            return;
        }
    }
    let started = std::time::Instant::now();
    let _write = write_lock.lock().await;
    match index_merge::merge_if_due(pool).await {
        Ok(merged) => tracing::debug!(
            merged,
            micros = started.elapsed().as_micros() as u64,
            "full-text index merged after a removal"
        ),
        Err(_) if pool.is_closed() => {}
        Err(error) => tracing::warn!(%error, "full-text index merge failed; retrying"),
    }
}

/// Runs `PRAGMA wal_checkpoint(mode)`; returns whether it was kept from finishing (by the
/// writer or readers) and the log's length in frames.
pub(super) async fn checkpoint(
    pool: &SqlitePool,
    mode: &str,
) -> std::result::Result<(bool, i64), sqlx::Error> {
    let (busy, log_frames, checkpointed) = sqlx::query_as::<_, (i64, i64, i64)>(
        sqlx::AssertSqlSafe(format!("PRAGMA wal_checkpoint({mode})")),
    )
    .fetch_one(pool)
    .await?;
    tracing::trace!(mode, busy, log_frames, checkpointed, "wal checkpoint");
    Ok((busy != 0, log_frames))
}

/// A TRUNCATE checkpoint that waits at most [`TRUNCATE_WAIT`] for readers; true when the log
/// was emptied. The connection gets `busy_timeout` back afterwards.
pub(super) async fn truncate_log(
    pool: &SqlitePool,
    busy_timeout: Duration,
) -> std::result::Result<bool, sqlx::Error> {
    let mut connection = pool.acquire().await?;
    let set_timeout = |timeout: Duration| format!("PRAGMA busy_timeout = {}", timeout.as_millis());
    sqlx::query(sqlx::AssertSqlSafe(set_timeout(TRUNCATE_WAIT)))
        .execute(&mut *connection)
        .await?;
    let outcome = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(&mut *connection)
        .await;
    sqlx::query(sqlx::AssertSqlSafe(set_timeout(busy_timeout)))
        .execute(&mut *connection)
        .await?;
    let (busy, log_frames, checkpointed) = outcome?;
    tracing::trace!(busy, log_frames, checkpointed, "wal truncation");
    Ok(busy == 0)
}
