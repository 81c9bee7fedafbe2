//! Removing memories: soft deletion, purging for good, and erasing everything about a user.

use async_trait::async_trait;
use sqlx::{Sqlite, Transaction};

use super::vectors::{bump_vector_generation, create_vector_table};
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::MemoryRemoval;
use crate::store::sql::{
    erase_owned_rows, forget_cached_vectors, forget_user_cached_vectors, forgotten, user_sessions,
    FORGOTTEN_COLUMNS,
};
use crate::types::{MemoryForgotten, UserErased};

/// What every removal of memories ends with, inside its transaction: the full-text index is
/// merged, and the vector generation moved on if there are vectors (returned).
///
/// A delete leaves the row's terms and positions in older FTS5 segments, beside a delete marker,
/// until a merge drops them: enough to rebuild the text. Merging the index into one segment now
/// drops them (0.1-0.2 s at 100k memories). FTS5's own `secure-delete` option would do this per
/// row, but the bundled SQLite (3.46.0) reports its index as malformed afterwards.
pub(super) async fn after_removal(
    tx: &mut Transaction<'_, Sqlite>,
    vectors: bool,
) -> Result<Option<i64>> {
    sqlx::query("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
        .execute(&mut **tx)
        .await?;
    if vectors {
        Ok(Some(bump_vector_generation(tx).await?))
    } else {
        Ok(None)
    }
}

impl MemoryStore {
    pub(super) async fn purge_in_tx(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        ids: &[String],
    ) -> Result<(Vec<MemoryForgotten>, Option<i64>)> {
        let vectors = self.vector_table_exists(tx).await?;
        let mut removed = Vec::new();
        for id in ids {
            let row = sqlx::query(&format!(
                "SELECT {FORGOTTEN_COLUMNS} FROM memories WHERE id = ?"
            ))
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else { continue };
            let memory = forgotten::<Sqlite>(&row)?;
            for statement in [
                "DELETE FROM memory_entities WHERE memory_id = ?",
                "DELETE FROM embedding_queue WHERE memory_id = ?",
            ] {
                sqlx::query(statement).bind(id).execute(&mut **tx).await?;
            }
            if vectors {
                sqlx::query("DELETE FROM vec_memories WHERE memory_id = ?")
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            forget_cached_vectors::<Sqlite>(tx, std::slice::from_ref(&memory.content)).await?;
            sqlx::query("DELETE FROM memories WHERE id = ?")
                .bind(id)
                .execute(&mut **tx)
                .await?;
            removed.push(memory);
        }
        let generation = if removed.is_empty() {
            None
        } else {
            after_removal(tx, vectors).await?
        };
        Ok((removed, generation))
    }

    /// After a committed removal: drops the rows from the in-memory mirror and, if the removal
    /// moved the vector generation (to `generation`, inside its transaction), moves the mirror
    /// along, so that the next search does not reload every vector (0.5 s per 100k). A mirror at
    /// any other generation is reloaded as usual.
    /// The full-text figures of the scopes are cleared too.
    pub(super) fn forget_in_mirror(&self, ids: &[String], generation: Option<i64>) {
        self.text_statistics.clear();
        self.forget_vectors(ids);
        if let Some(after) = generation {
            self.mirror_mut().apply(after - 1, after, Vec::new());
            self.sentence_mirror_mut()
                .apply(after - 1, after, Vec::new());
        }
    }

    /// Removes the vectors of `user_id`, who owns `theirs` memories. sqlite-vec deletes a row
    /// at about 0.4 ms (it rewrites the row's place in a 1.5 MB chunk), 40 s for a user with
    /// 100k memories; when the user owns at least half the memories, the table is rebuilt from
    /// the other users' vectors instead, which costs what is kept rather than what goes.
    pub(super) async fn erase_vectors(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        user_id: &str,
        theirs: usize,
    ) -> Result<()> {
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories")
            .fetch_one(&mut **tx)
            .await?;
        let dimensions: Option<String> = sqlx::query_scalar(
            "SELECT value FROM memory_metadata WHERE key = 'embedding_dimensions'",
        )
        .fetch_optional(&mut **tx)
        .await?;
        let dimensions = dimensions.and_then(|value| value.parse::<usize>().ok());
        let Some(dimensions) = dimensions.filter(|_| theirs as i64 * 2 >= total) else {
            sqlx::query("DELETE FROM vec_memories WHERE user_id = ?")
                .bind(user_id)
                .execute(&mut **tx)
                .await?;
            return Ok(());
        };
        for statement in [
            "CREATE TEMP TABLE vec_kept AS SELECT memory_id, embedding, user_id, kind \
             FROM vec_memories WHERE user_id IS NOT ?1",
            "DROP TABLE vec_memories",
        ] {
            sqlx::query(statement)
                .bind(user_id)
                .execute(&mut **tx)
                .await?;
        }
        sqlx::query(&create_vector_table(dimensions))
            .execute(&mut **tx)
            .await?;
        for statement in [
            "INSERT INTO vec_memories (memory_id, embedding, user_id, kind) \
             SELECT memory_id, embedding, user_id, kind FROM vec_kept",
            "DROP TABLE temp.vec_kept",
        ] {
            sqlx::query(statement).execute(&mut **tx).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl MemoryRemoval for MemoryStore {
    async fn purge(&self, ids: &[String]) -> Result<Vec<MemoryForgotten>> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let (removed, generation) = self.purge_in_tx(&mut tx, ids).await?;
        tx.commit().await?;
        self.forget_in_mirror(ids, generation);
        Ok(removed)
    }

    async fn erase_user(&self, user_id: &str) -> Result<UserErased> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM memories WHERE user_id = ?")
            .bind(user_id)
            .fetch_all(&mut *tx)
            .await?;
        let session_ids = user_sessions::<Sqlite>(&mut tx, user_id).await?;
        forget_user_cached_vectors::<Sqlite>(&mut tx, user_id).await?;
        // Set-based, not a few statements per memory: a user with 100k memories is erased in
        // seconds rather than a minute of held writers.
        let statements = [
            "DELETE FROM ingested_events WHERE user_id = ?1 OR memory_id IN (SELECT id FROM memories WHERE user_id = ?1)",
            "DELETE FROM memory_entities WHERE memory_id IN (SELECT id FROM memories WHERE user_id = ?1)",
            "DELETE FROM embedding_queue WHERE memory_id IN (SELECT id FROM memories WHERE user_id = ?1)",
            // The triggers drop a memory's sentence keys with it; this also drops any left
            // behind under the user's name.
            "DELETE FROM memory_sentence_vectors WHERE user_id = ?1",
        ];
        let vectors = self.vector_table_exists(&mut tx).await?;
        if vectors {
            self.erase_vectors(&mut tx, user_id, ids.len()).await?;
        }
        for statement in statements {
            sqlx::query(statement)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        erase_owned_rows::<Sqlite>(&mut tx, user_id, chrono::Utc::now()).await?;
        // The owner's range of index row ids (migration 0019), now that none of theirs is left.
        sqlx::query("DELETE FROM fts_owners WHERE owner = ?")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let removed = ids.len() as u64;
        let generation = if removed == 0 {
            None
        } else {
            after_removal(&mut tx, vectors).await?
        };
        tx.commit().await?;
        self.forget_in_mirror(&ids, generation);
        Ok(UserErased {
            user_id: user_id.to_owned(),
            session_ids,
            memories_removed: removed,
        })
    }
}
