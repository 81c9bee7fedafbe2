//! What a removal leaves in the full-text index, and the merge that takes it out.
//!
//! The index deletes with FTS5's `secure-delete` (migration 0025): a removed row's terms and
//! positions leave the segments that hold them in the removal's own transaction, at a cost
//! that follows the row. One trace stays: the b-tree over each segment's leaf pages is keyed
//! by a short prefix of each leaf's first term (a few letters: the part it shares with the
//! leaf before, and one more), and FTS5 rewrites that key only when the leaf empties. So a
//! removal marks a merge due (`memory_metadata`, in its transaction), and the checkpointer
//! merges the index into one segment within a round (half a second), which rebuilds every key
//! from the terms left; closing the store merges too, and a mark left by a process that died
//! is merged by the next one that opens the store.
//!
//! A removal of many rows ([`BULK_ROWS`], an erasure of a user with many memories) deletes
//! without `secure-delete` and merges in its transaction instead: deleting row by row costs
//! more than one merge (50k rows of a 100k index: 6.4 s against 0.24 s).

use sqlx::sqlite::SqlitePool;
use sqlx::SqliteConnection;

/// Rows from which a removal merges instead of deleting row by row.
pub(super) const BULK_ROWS: usize = 1_000;

/// The `memory_metadata` key of a due merge.
const MERGE_DUE: &str = "fts_merge_due";

/// Starts a removal of `rows` memories, inside its transaction: from [`BULK_ROWS`] on, the
/// index deletes without `secure-delete` until [`end_removal`] merges it.
pub(super) async fn begin_removal(
    connection: &mut SqliteConnection,
    rows: usize,
) -> sqlx::Result<()> {
    if rows >= BULK_ROWS {
        set_secure_delete(connection, false).await?;
    }
    Ok(())
}

/// Ends a removal inside its transaction, once the rows are gone: a bulk removal merges the
/// index now and turns `secure-delete` back on; any other that removed rows marks a merge due.
pub(super) async fn end_removal(
    connection: &mut SqliteConnection,
    removed: bool,
) -> sqlx::Result<()> {
    let secure: Option<i64> =
        sqlx::query_scalar("SELECT v FROM memories_fts_config WHERE k = 'secure-delete'")
            .fetch_optional(&mut *connection)
            .await?;
    if secure == Some(0) {
        merge(connection).await?;
        return set_secure_delete(connection, true).await;
    }
    if removed {
        sqlx::query(
            "INSERT INTO memory_metadata (key, value) VALUES (?, '1') ON CONFLICT (key) DO NOTHING",
        )
        .bind(MERGE_DUE)
        .execute(&mut *connection)
        .await?;
    }
    Ok(())
}

/// Merges the index if a merge is due, in a transaction of its own that clears the mark; the
/// caller holds the store's write lock. True when it merged.
pub(super) async fn merge_if_due(pool: &SqlitePool) -> sqlx::Result<bool> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    // Another process may have merged it meanwhile.
    if !merge_due(&mut *tx).await? {
        return Ok(false);
    }
    merge(&mut tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// Whether a removal marked a merge due (a read: the checkpointer's test each round).
pub(super) async fn merge_due<'c, E>(executor: E) -> sqlx::Result<bool>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite>,
{
    let due: Option<i64> = sqlx::query_scalar("SELECT 1 FROM memory_metadata WHERE key = ?")
        .bind(MERGE_DUE)
        .fetch_optional(executor)
        .await?;
    Ok(due.is_some())
}

/// Merges the index into one segment and clears the mark, inside the caller's transaction.
async fn merge(connection: &mut SqliteConnection) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
        .execute(&mut *connection)
        .await?;
    sqlx::query("DELETE FROM memory_metadata WHERE key = ?")
        .bind(MERGE_DUE)
        .execute(&mut *connection)
        .await?;
    Ok(())
}

/// Turns FTS5's `secure-delete` on or off, inside the caller's transaction.
async fn set_secure_delete(connection: &mut SqliteConnection, on: bool) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO memories_fts(memories_fts, rank) VALUES ('secure-delete', ?)")
        .bind(i64::from(on))
        .execute(&mut *connection)
        .await?;
    Ok(())
}
