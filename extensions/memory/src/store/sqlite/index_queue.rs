//! The indexer's queue: memories waiting for a vector, the embedding cache, and storing the
//! vectors the indexer made.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{QueryBuilder, Row, Sqlite};

use super::vectors::bump_vector_generation;
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::IndexQueue;
use crate::store::index_order;
use crate::store::rows::{blob_vector, ts, vector_blob};
use crate::store::IndexItem;
use crate::vector_index::{sentence_key, VectorRow};

#[async_trait]
impl IndexQueue for MemoryStore {
    /// Round robin over the owners with memories waiting, newest first within each
    /// (store/index_order.rs).
    async fn next_index_batch(&self, limit: usize) -> Result<Vec<IndexItem>> {
        let after = self.index_cursor.get();
        let owners = index_order::owners_in_turn_query::<Sqlite>(after.as_deref(), None, limit)
            .build_query_scalar::<String>()
            .fetch_all(&self.pool)
            .await?;
        let mut taker = index_order::TurnTaker::new(owners, limit);
        while let Some(pick) = taker.next_pick() {
            let mut query = index_order::pick_query::<Sqlite>(taker.owner(pick));
            index_order::finish_pick_query(&mut query, "rowid", pick.take, taker.taken(pick).len());
            let rows = query
                .build_query_scalar::<String>()
                .fetch_all(&self.pool)
                .await?;
            taker.record(pick, rows);
        }
        let (ids, last) = taker.finish();
        self.index_cursor.set(last);
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut builder = QueryBuilder::<Sqlite>::new(
            "SELECT q.memory_id, m.content, m.user_id, m.kind, m.valid_until IS NULL AS active, \
             (m.kind = 'episode' AND m.source_role IS NOT NULL AND m.source_role = 'user') AS spoken_by_user \
             FROM embedding_queue q JOIN memories m ON m.id = q.memory_id WHERE q.memory_id IN (",
        );
        let mut separated = builder.separated(", ");
        for id in &ids {
            separated.push_bind(id.clone());
        }
        builder.push(")");
        let rows = builder.build().fetch_all(&self.pool).await?;
        let items: Result<Vec<IndexItem>> = rows
            .iter()
            .map(|row| {
                Ok(IndexItem {
                    memory_id: row.try_get("memory_id")?,
                    content: row.try_get("content")?,
                    user_id: row
                        .try_get::<Option<String>, _>("user_id")?
                        .unwrap_or_default(),
                    kind: row.try_get("kind")?,
                    active: row.try_get("active")?,
                    spoken_by_user: row.try_get("spoken_by_user")?,
                })
            })
            .collect();
        Ok(index_order::in_order_taken(items?, &ids))
    }

    async fn cached_vectors(
        &self,
        hashes: &[String],
        model_id: &str,
    ) -> Result<HashMap<String, Vec<f32>>> {
        if hashes.is_empty() {
            return Ok(HashMap::new());
        }
        let mut builder =
            QueryBuilder::new("SELECT content_hash, vector FROM embedding_cache WHERE model_id = ");
        builder
            .push_bind(model_id.to_owned())
            .push(" AND content_hash IN (");
        let mut separated = builder.separated(", ");
        for hash in hashes {
            separated.push_bind(hash.clone());
        }
        builder.push(")");
        let rows = builder.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                let blob: Vec<u8> = row.try_get("vector")?;
                Ok((row.try_get("content_hash")?, blob_vector(&blob)))
            })
            .collect()
    }

    async fn cache_vectors(
        &self,
        vectors: &[(String, Vec<f32>)],
        model_id: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        if vectors.is_empty() {
            return Ok(());
        }
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        for (hash, vector) in vectors {
            sqlx::query(
                "INSERT OR IGNORE INTO embedding_cache (content_hash, model_id, vector, created_at) VALUES (?, ?, ?, ?)",
            )
            .bind(hash)
            .bind(model_id)
            .bind(vector_blob(vector))
            .bind(ts(at))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn store_vectors_and_sentences(
        &self,
        items: &[(IndexItem, Option<Vec<f32>>)],
        sentences: &HashMap<String, Vec<Vec<f32>>>,
    ) -> Result<()> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let mut rows = Vec::new();
        let mut sentence_rows = Vec::new();
        let mut indexed = Vec::new();
        for (item, vector) in items {
            // A memory forgotten, retired or expired since its batch was read keeps no vector:
            // the triggers that drop its keys have already run.
            let active = match vector {
                Some(_) => {
                    sqlx::query_scalar::<_, i64>(
                        "SELECT COUNT(*) FROM memories WHERE id = ? AND valid_until IS NULL",
                    )
                    .bind(&item.memory_id)
                    .fetch_one(&mut *tx)
                    .await?
                        > 0
                }
                None => false,
            };
            if let (Some(vector), true) = (vector, active) {
                rows.push(VectorRow {
                    memory_id: item.memory_id.clone(),
                    user_id: item.user_id.clone(),
                    kind: item.kind.clone(),
                    vector: vector.clone(),
                });
                sqlx::query("DELETE FROM vec_memories WHERE memory_id = ?")
                    .bind(&item.memory_id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO vec_memories (memory_id, embedding, user_id, kind) VALUES (?, ?, ?, ?)",
                )
                .bind(&item.memory_id)
                .bind(vector_blob(vector))
                .bind(&item.user_id)
                .bind(&item.kind)
                .execute(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM memory_sentence_vectors WHERE memory_id = ?")
                    .bind(&item.memory_id)
                    .execute(&mut *tx)
                    .await?;
                for (ordinal, sentence) in sentences
                    .get(&item.memory_id)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    sqlx::query(
                        "INSERT INTO memory_sentence_vectors \
                         (memory_id, ordinal, user_id, kind, embedding) VALUES (?, ?, ?, ?, ?)",
                    )
                    .bind(&item.memory_id)
                    .bind(ordinal as i64)
                    .bind(&item.user_id)
                    .bind(&item.kind)
                    .bind(vector_blob(sentence))
                    .execute(&mut *tx)
                    .await?;
                    sentence_rows.push(VectorRow {
                        memory_id: sentence_key(&item.memory_id, ordinal),
                        user_id: item.user_id.clone(),
                        kind: item.kind.clone(),
                        vector: sentence.clone(),
                    });
                }
                indexed.push(item.memory_id.clone());
            }
            sqlx::query("DELETE FROM embedding_queue WHERE memory_id = ?")
                .bind(&item.memory_id)
                .execute(&mut *tx)
                .await?;
        }
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(());
        }
        let after = bump_vector_generation(&mut tx).await?;
        tx.commit().await?;
        self.mirror_mut().apply(after - 1, after, rows);
        let mut sentence_mirror = self.sentence_mirror_mut();
        // A turn indexed again replaces its keys; a mirror reloaded at `after` in between
        // already holds the new ones.
        if sentence_mirror.generation() == Some(after - 1) {
            sentence_mirror.remove_sentences_of(&indexed);
        }
        sentence_mirror.apply(after - 1, after, sentence_rows);
        Ok(())
    }

    async fn pending_index(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM embedding_queue")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn release_index_leases(&self) -> Result<u64> {
        // One process at a time takes batches from a SQLite store, and holds none between calls.
        Ok(0)
    }
}
