//! Removing memories, SQLite's part (the rest is written once, in `store/sql/removal.rs`): what
//! ends a removal (the full-text index's merge, see `index_merge`; moving the vector generation
//! and mirror along), and erasing a user's vectors from sqlite-vec.

use sqlx::SqliteConnection;

use super::index_merge;
use super::vectors::{bump_vector_generation, create_vector_table};
use super::MemoryStore;
use crate::error::Result;

/// What every removal of memories ends with, inside its transaction (see
/// `SqlStore::end_removal`): an erased owner's range of index row ids (migration 0019) is
/// dropped, now that none of theirs is left; the full-text index is merged now (a bulk
/// removal) or marked for the checkpointer to merge (see `index_merge`); and if any memory
/// went and there are vectors, the vector generation is moved on (returned).
pub(super) async fn end_removal(
    store: &MemoryStore,
    connection: &mut SqliteConnection,
    erased: Option<&str>,
    removed: bool,
) -> Result<Option<i64>> {
    if let Some(owner) = erased {
        sqlx::query("DELETE FROM fts_owners WHERE owner = ?")
            .bind(owner)
            .execute(&mut *connection)
            .await?;
    }
    index_merge::end_removal(connection, removed).await?;
    if !removed {
        return Ok(None);
    }
    if store.vector_table_exists(connection).await? {
        Ok(Some(bump_vector_generation(connection).await?))
    } else {
        Ok(None)
    }
}

impl MemoryStore {
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
        tx: &mut SqliteConnection,
        user_id: &str,
        theirs: usize,
    ) -> Result<()> {
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories")
            .fetch_one(&mut *tx)
            .await?;
        let dimensions: Option<String> = sqlx::query_scalar(
            "SELECT value FROM memory_metadata WHERE key = 'embedding_dimensions'",
        )
        .fetch_optional(&mut *tx)
        .await?;
        let dimensions = dimensions.and_then(|value| value.parse::<usize>().ok());
        let Some(dimensions) = dimensions.filter(|_| theirs as i64 * 2 >= total) else {
            sqlx::query("DELETE FROM vec_memories WHERE user_id = ?")
                .bind(user_id)
                .execute(&mut *tx)
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
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(sqlx::AssertSqlSafe(create_vector_table(dimensions)))
            .execute(&mut *tx)
            .await?;
        for statement in [
            "INSERT INTO vec_memories (memory_id, embedding, user_id, kind) \
             SELECT memory_id, embedding, user_id, kind FROM vec_kept",
            "DROP TABLE temp.vec_kept",
        ] {
            sqlx::query(statement).execute(&mut *tx).await?;
        }
        Ok(())
    }
}
