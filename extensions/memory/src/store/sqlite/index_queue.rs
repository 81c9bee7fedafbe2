//! The indexer's queue: memories waiting for a vector, and storing the vectors the indexer
//! made (caching them is written once, in `store/sql/index_queue.rs`).

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Sqlite;

use super::vectors::bump_vector_generation;
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::IndexQueue;
use crate::store::index_order;
use crate::store::rows::vector_blob;
use crate::store::sql;
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
        let mut connection = self.pool.acquire().await?;
        sql::index_items::<Sqlite>(&mut connection, &ids).await
    }

    async fn cache_vectors(
        &self,
        vectors: &[(String, Vec<f32>)],
        model_id: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        sql::cache_vectors(self, vectors, model_id, at).await
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

    async fn release_index_leases(&self) -> Result<u64> {
        // One process at a time takes batches from a SQLite store, and holds none between calls.
        Ok(0)
    }
}
