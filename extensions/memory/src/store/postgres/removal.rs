//! Removing memories for good: purging some of them, and erasing everything about a user. The
//! SQLite store's removal (`../sqlite/removal.rs`) in PostgreSQL's words: the full text is a
//! generated column and the vectors a plain table, so deleting the rows is all there is to do;
//! no index to merge, no mirror to move along.

use async_trait::async_trait;
use sqlx::{Postgres, Transaction};

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::MemoryRemoval;
use crate::store::sql::{
    erase_owned_rows, forget_cached_vectors, forget_user_cached_vectors, forgotten, user_sessions,
    WriteScope, FORGOTTEN_COLUMNS,
};
use crate::types::{MemoryForgotten, UserErased};

/// Removes the memories `ids` with their entity links, queue entries, vectors and the cached
/// vectors of their texts, inside `tx`; returns what was removed, in the order of `ids`, each
/// once. Unknown ids are skipped; the event ids the memories were stored from stay recorded.
async fn purge_in_tx(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[String],
) -> Result<Vec<MemoryForgotten>> {
    let rows = sqlx::query(&format!(
        "SELECT {FORGOTTEN_COLUMNS} FROM memories WHERE id = ANY($1) FOR UPDATE"
    ))
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let memory = forgotten::<Postgres>(row)?;
        found.insert(memory.memory_id.clone(), memory);
    }
    // In the order of `ids`; `remove`: an id named twice is announced once.
    let removed: Vec<MemoryForgotten> = ids.iter().filter_map(|id| found.remove(id)).collect();
    if removed.is_empty() {
        return Ok(removed);
    }
    let gone: Vec<String> = removed
        .iter()
        .map(|memory| memory.memory_id.clone())
        .collect();
    // Links and the queue first: they reference the rows.
    for statement in [
        "DELETE FROM memory_entities WHERE memory_id = ANY($1)",
        "DELETE FROM embedding_queue WHERE memory_id = ANY($1)",
        "DELETE FROM memory_vectors WHERE memory_id = ANY($1)",
        "DELETE FROM memory_sentence_vectors WHERE memory_id = ANY($1)",
        "DELETE FROM memories WHERE id = ANY($1)",
    ] {
        sqlx::query(statement)
            .bind(&gone)
            .execute(&mut **tx)
            .await?;
    }
    let texts: Vec<String> = removed
        .iter()
        .map(|memory| memory.content.clone())
        .collect();
    forget_cached_vectors::<Postgres>(tx, &texts).await?;
    Ok(removed)
}

#[async_trait]
impl MemoryRemoval for PostgresStore {
    async fn purge(&self, ids: &[String]) -> Result<Vec<MemoryForgotten>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // The ids may be anyone's: the whole store waits.
        let mut tx = self.begin_write(WriteScope::Store).await?;
        let removed = purge_in_tx(&mut tx, ids).await?;
        tx.commit().await?;
        Ok(removed)
    }

    async fn erase_user(&self, user_id: &str) -> Result<UserErased> {
        let mut tx = self.begin_write(WriteScope::Owner(user_id)).await?;
        let removed =
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM memories WHERE user_id = $1")
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await?;
        let session_ids = user_sessions::<Postgres>(&mut tx, user_id).await?;
        forget_user_cached_vectors::<Postgres>(&mut tx, user_id).await?;
        // Set-based, as in SQLite; what references a row goes before it (foreign keys).
        for statement in [
            // Each condition its own statement, so that each can use its index.
            "DELETE FROM ingested_events WHERE user_id = $1",
            "DELETE FROM ingested_events WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1)",
            "DELETE FROM memory_entities WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1)",
            "DELETE FROM embedding_queue WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1)",
            // The vector rows carry their memory's owner; the memory ids catch any without.
            "DELETE FROM memory_vectors WHERE user_id = $1",
            "DELETE FROM memory_vectors WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1)",
            "DELETE FROM memory_sentence_vectors WHERE user_id = $1",
            "DELETE FROM memory_sentence_vectors WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1)",
        ] {
            sqlx::query(statement)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        erase_owned_rows::<Postgres>(&mut tx, user_id, chrono::Utc::now()).await?;
        tx.commit().await?;
        // The planner's statistics are samples of rows: they would keep the erased user's id
        // and words (most common values, histograms) until autovacuum analyses the tables
        // again. Taken again now, from what is left; the erasure stands whether or not this
        // succeeds (autovacuum analyses the tables later), so a failure is only logged.
        let analysed = sqlx::query(
            "ANALYZE memories, entities, memory_entities, ingested_events, \
             sessions_consolidations, memory_vectors, memory_sentence_vectors, embedding_cache, \
             api_keys, chat_members",
        )
        .execute(&self.pool)
        .await;
        if let Err(error) = analysed {
            tracing::warn!(%error, "erased; the planner's statistics are refreshed by autovacuum");
        }
        Ok(UserErased {
            user_id: user_id.to_owned(),
            session_ids,
            memories_removed: u64::try_from(removed).unwrap_or_default(),
        })
    }
}
