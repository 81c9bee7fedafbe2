//! The vector index: `vec_memories` (sqlite-vec) and its quantised in-memory mirror, which
//! answers nearest-neighbour queries.

use std::collections::HashMap;
use std::sync::PoisonError;

use async_trait::async_trait;
use futures::TryStreamExt;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};

use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::{vector_scope, VectorIndex};
use crate::store::rows::{blob_vector, vector_blob};
use crate::store::sql::{
    provider_status, push_owner_and_kind, queue_every_memory, record_provider, set_metadata,
};
use crate::store::{MirrorSize, VectorStatus};
use crate::types::SearchRequest;
use crate::vector_index::{
    memory_of_sentence, sentence_key, QuantizedIndex, VectorFilter, VectorRow,
};

/// The stored `vector_generation` (0 before the first change to `vec_memories`).
pub(super) async fn vector_generation<'e, E>(executor: E) -> Result<i64>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    let value: Option<String> =
        sqlx::query_scalar("SELECT value FROM memory_metadata WHERE key = 'vector_generation'")
            .fetch_optional(executor)
            .await?;
    Ok(value.and_then(|value| value.parse().ok()).unwrap_or(0))
}

/// The statement creating `vec_memories` for vectors of `dimensions` floats.
pub(super) fn create_vector_table(dimensions: usize) -> String {
    format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS vec_memories USING vec0(\
         memory_id text primary key, embedding float[{dimensions}], user_id text, kind text)"
    )
}

/// Moves `vector_generation` on by one inside `tx`; returns the new value.
pub(super) async fn bump_vector_generation(tx: &mut SqliteConnection) -> Result<i64> {
    let after = vector_generation(&mut *tx).await? + 1;
    set_metadata::<Sqlite>(tx, "vector_generation", &after.to_string()).await?;
    Ok(after)
}

/// Sentence rows asked of the mirror per memory wanted: most turns have several keys.
const SENTENCE_ROWS_PER_MEMORY: usize = 4;

/// Sentence-key hits (best first) as memories, each at its best sentence's similarity.
fn best_per_memory(nearest: Vec<(String, f32)>) -> Vec<(String, f32)> {
    let mut seen = std::collections::HashSet::new();
    nearest
        .into_iter()
        .filter_map(|(key, similarity)| {
            let memory_id = memory_of_sentence(&key).to_owned();
            seen.insert(memory_id.clone())
                .then_some((memory_id, similarity))
        })
        .collect()
}

impl MemoryStore {
    pub(super) fn set_vector_status(&self, status: VectorStatus) {
        *self
            .vector
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = status;
    }

    pub(super) fn mirror(&self) -> std::sync::RwLockReadGuard<'_, QuantizedIndex> {
        self.mirror.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn mirror_mut(&self) -> std::sync::RwLockWriteGuard<'_, QuantizedIndex> {
        self.mirror.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn sentence_mirror(&self) -> std::sync::RwLockReadGuard<'_, QuantizedIndex> {
        self.sentence_mirror
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn sentence_mirror_mut(&self) -> std::sync::RwLockWriteGuard<'_, QuantizedIndex> {
        self.sentence_mirror
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Both mirrors reload on the next search.
    pub(super) fn invalidate_mirrors(&self) {
        self.mirror_mut().invalidate();
        self.sentence_mirror_mut().invalidate();
    }

    /// Drops the vectors and sentence keys of these memories (removed or retired, committed)
    /// from both mirrors.
    pub(super) fn forget_vectors(&self, memory_ids: &[String]) {
        self.mirror_mut().remove_all(memory_ids);
        self.sentence_mirror_mut().remove_sentences_of(memory_ids);
    }

    /// Whether both mirrors reflect the stored generation `stored`.
    fn mirrors_at(&self, stored: i64) -> bool {
        self.mirror().generation() == Some(stored)
            && self.sentence_mirror().generation() == Some(stored)
    }

    /// Reloads the mirror from `vec_memories` when the stored generation is not the mirror's,
    /// reading both in one snapshot.
    pub(super) async fn refresh_mirror(&self) -> Result<()> {
        let VectorStatus::Enabled { dimensions, .. } = self.vector_status() else {
            return Ok(());
        };
        let stored = vector_generation(&self.pool).await?;
        if self.mirrors_at(stored) {
            return Ok(());
        }
        let _reload = self.reload_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let stored = vector_generation(&mut *tx).await?;
        if self.mirrors_at(stored) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        // Streamed row by row: the mirror holds a fifth of the float vectors' size, and the
        // float vectors are never all in memory at once.
        let mut fresh = QuantizedIndex::empty(dimensions);
        {
            let mut rows =
                sqlx::query("SELECT memory_id, embedding, user_id, kind FROM vec_memories")
                    .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                fresh.push(VectorRow {
                    memory_id: row.try_get("memory_id")?,
                    vector: blob_vector(&row.try_get::<Vec<u8>, _>("embedding")?),
                    user_id: row.try_get("user_id")?,
                    kind: row.try_get("kind")?,
                });
            }
        }
        let mut sentences = QuantizedIndex::empty(dimensions);
        {
            let mut rows = sqlx::query(
                "SELECT memory_id, ordinal, embedding, user_id, kind FROM memory_sentence_vectors",
            )
            .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                let memory_id: String = row.try_get("memory_id")?;
                let ordinal: i64 = row.try_get("ordinal")?;
                sentences.push(VectorRow {
                    memory_id: sentence_key(&memory_id, usize::try_from(ordinal).unwrap_or(0)),
                    vector: blob_vector(&row.try_get::<Vec<u8>, _>("embedding")?),
                    user_id: row
                        .try_get::<Option<String>, _>("user_id")?
                        .unwrap_or_default(),
                    kind: row.try_get("kind")?,
                });
            }
        }
        tx.commit().await?;
        let count = fresh.len();
        *self.mirror_mut() = fresh.loaded_at(stored);
        *self.sentence_mirror_mut() = sentences.loaded_at(stored);
        tracing::debug!(
            rows = count,
            generation = stored,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "vector mirror loaded"
        );
        Ok(())
    }

    /// Takes the memories `ids` off the indexer's queue and out of `vec_memories` and the
    /// sentence keys, on `tx` inside the caller's transaction, one memory at a time (sqlite-vec
    /// finds a row by its key).
    pub(super) async fn remove_vectors(
        &self,
        tx: &mut SqliteConnection,
        ids: &[String],
    ) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let vectors = self.vector_table_exists(tx).await?;
        for id in ids {
            sqlx::query("DELETE FROM embedding_queue WHERE memory_id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            if vectors {
                sqlx::query("DELETE FROM vec_memories WHERE memory_id = ?")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("DELETE FROM memory_sentence_vectors WHERE memory_id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }

    pub(super) async fn vector_table_exists(
        &self,
        connection: &mut SqliteConnection,
    ) -> Result<bool> {
        let found: Option<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'vec_memories'",
        )
        .fetch_optional(connection)
        .await?;
        Ok(found.is_some())
    }
}

#[async_trait]
impl VectorIndex for MemoryStore {
    fn vector_status(&self) -> VectorStatus {
        self.vector
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn approximate_search(&self) -> bool {
        self.vector_oversample != 0
    }

    async fn ensure_vector_index(&self, dimensions: usize, model_id: &str) -> Result<VectorStatus> {
        let _write = self.write_lock.lock().await;
        let mut connection = self.pool.acquire().await?;
        let recorded = provider_status::<Sqlite>(&mut connection, dimensions, model_id).await?;
        drop(connection);
        let status = match recorded {
            Some(status) => status,
            None => {
                let mut tx = self.begin_write().await?;
                sqlx::query(sqlx::AssertSqlSafe(create_vector_table(dimensions)))
                    .execute(&mut *tx)
                    .await?;
                record_provider::<Sqlite>(&mut tx, dimensions, model_id).await?;
                bump_vector_generation(&mut tx).await?;
                tx.commit().await?;
                self.invalidate_mirrors();
                VectorStatus::Enabled {
                    dimensions,
                    model_id: model_id.to_owned(),
                }
            }
        };
        self.set_vector_status(status.clone());
        Ok(status)
    }

    async fn reset_vector_index(&self, dimensions: usize, model_id: &str) -> Result<u64> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        sqlx::query("DROP TABLE IF EXISTS vec_memories")
            .execute(&mut *tx)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(create_vector_table(dimensions)))
            .execute(&mut *tx)
            .await?;
        record_provider::<Sqlite>(&mut tx, dimensions, model_id).await?;
        sqlx::query("DELETE FROM memory_sentence_vectors")
            .execute(&mut *tx)
            .await?;
        let queued = queue_every_memory::<Sqlite>(&mut tx, model_id).await?;
        bump_vector_generation(&mut tx).await?;
        tx.commit().await?;
        self.invalidate_mirrors();
        self.set_vector_status(VectorStatus::Enabled {
            dimensions,
            model_id: model_id.to_owned(),
        });
        Ok(queued)
    }

    /// Always the mirror (exact search has no table to scan here); a turn has several keys, so
    /// more rows are asked for than memories are wanted.
    async fn nearest_sentences(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
    ) -> Result<Vec<(String, f32)>> {
        self.refresh_mirror().await?;
        let (owner, kind) = vector_scope(request);
        let filter = VectorFilter {
            user_id: owner,
            kind,
        };
        let rows = limit
            .saturating_mul(SENTENCE_ROWS_PER_MEMORY)
            .clamp(limit, 8192);
        let nearest =
            self.sentence_mirror()
                .search(vector, filter, rows, self.vector_oversample.max(1));
        Ok(best_per_memory(nearest))
    }

    async fn stored_vectors(&self, ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        self.refresh_mirror().await?;
        let mirror = self.mirror();
        Ok(ids
            .iter()
            .filter_map(|id| Some((id.clone(), mirror.approximate_vector(id)?)))
            .collect())
    }

    async fn mirror_size(&self) -> Result<MirrorSize> {
        self.refresh_mirror().await?;
        let (mirror, sentences) = (self.mirror(), self.sentence_mirror());
        Ok(MirrorSize {
            memory_rows: mirror.len(),
            sentence_rows: sentences.len(),
            heap_bytes: mirror.heap_bytes() + sentences.heap_bytes(),
        })
    }

    async fn nearest_exact(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        // Brute force over `vec_memories`; vectors are unit length, so cosine = 1 - distance² / 2.
        let mut builder = QueryBuilder::new(
            "SELECT memory_id, distance FROM vec_memories WHERE embedding MATCH ",
        );
        builder.push_bind(vector_blob(vector));
        builder.push(" AND k = ").push_bind(k as i64);
        push_owner_and_kind(&mut builder, owner, kind);
        builder.push(" ORDER BY distance");
        Ok(builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|(id, distance)| (id, (1.0 - distance * distance / 2.0) as f32))
            .collect())
    }

    async fn nearest_approximate(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        // The quantised mirror, reloaded first if `vec_memories` moved on; its candidates are
        // re-scored with the float vectors.
        self.refresh_mirror().await?;
        let filter = VectorFilter {
            user_id: owner,
            kind,
        };
        Ok(self
            .mirror()
            .search(vector, filter, k, self.vector_oversample))
    }
}
