//! The indexer's queue: memories waiting for a vector, and storing the vectors the indexer
//! made (caching them is written once, in `store/sql/index_queue.rs`).
//!
//! Several instances share the queue, so taking a batch leases it: its rows get
//! `claimed_until` (now + [`LEASE_SECONDS`]), and rows under a live lease are skipped, as are
//! rows another instance is leasing at the same moment (`FOR UPDATE SKIP LOCKED`). Storing the
//! vectors takes the rows off the queue; a batch that was not stored (its instance died, or
//! embedding failed) is taken again once its lease runs out, not at once as in SQLite.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Postgres;

use super::vectors::vector_text;
use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::IndexQueue;
use crate::store::index_order;
use crate::store::rows::ts;
use crate::store::sql::{self, WriteScope};
use crate::store::IndexItem;

/// How long a taken batch is reserved for the instance that took it, in seconds.
pub(super) const LEASE_SECONDS: i64 = 60;

impl PostgresStore {
    /// [`IndexQueue::next_index_batch`] at `now` (Unix seconds): round robin over the owners
    /// with memories waiting, newest first within each (store/index_order.rs), of the rows
    /// whose lease is free or ran out, leased until `now + LEASE_SECONDS`.
    pub(super) async fn lease_index_batch(&self, limit: usize, now: i64) -> Result<Vec<IndexItem>> {
        let after = self.index_cursor.get();
        let mut tx = self.pool.begin().await?;
        let owners =
            index_order::owners_in_turn_query::<Postgres>(after.as_deref(), Some(now), limit)
                .build_query_scalar::<String>()
                .fetch_all(&mut *tx)
                .await?;
        let mut taker = index_order::TurnTaker::new(owners, limit);
        while let Some(pick) = taker.next_pick() {
            let mut query = index_order::pick_query::<Postgres>(taker.owner(pick));
            query
                .push(" AND (claimed_until IS NULL OR claimed_until <= ")
                .push_bind(now)
                .push(")");
            let taken = taker.taken(pick);
            if !taken.is_empty() {
                query
                    .push(" AND NOT (memory_id = ANY(")
                    .push_bind(taken.to_vec())
                    .push("))");
            }
            index_order::finish_pick_query(&mut query, "seq", pick.take, 0);
            // Rows another instance is taking at this moment are its own.
            query.push(" FOR UPDATE SKIP LOCKED");
            let rows = query
                .build_query_scalar::<String>()
                .fetch_all(&mut *tx)
                .await?;
            taker.record(pick, rows);
        }
        let (ids, last) = taker.finish();
        self.index_cursor.set(last);
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        sqlx::query("UPDATE embedding_queue SET claimed_until = $1 WHERE memory_id = ANY($2)")
            .bind(now.saturating_add(LEASE_SECONDS))
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
        let items = sql::index_items::<Postgres>(&mut tx, &ids).await?;
        tx.commit().await?;
        Ok(items)
    }
}

#[async_trait]
impl IndexQueue for PostgresStore {
    /// Memories waiting for a vector that no other instance holds, in turn by owner and newest
    /// first, leased to this caller for [`LEASE_SECONDS`] (see the module docs).
    async fn next_index_batch(&self, limit: usize) -> Result<Vec<IndexItem>> {
        self.lease_index_batch(limit, ts(Utc::now())).await
    }

    async fn cache_vectors(
        &self,
        vectors: &[(String, Vec<f32>)],
        model_id: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        sql::cache_vectors(self, vectors, model_id, at).await
    }

    /// Under the store's write lock, as SQLite's one writer. A memory that was soft-deleted or
    /// removed after its batch was taken (decay, a purge) gets no vector: it only leaves the
    /// queue, so no vector outlives its memory.
    async fn store_vectors_and_sentences(
        &self,
        items: &[(IndexItem, Option<Vec<f32>>)],
        sentences: &HashMap<String, Vec<Vec<f32>>>,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        // One row per memory (the last vector given for it): an upsert takes each row once.
        let mut position: HashMap<&str, usize> = HashMap::new();
        let mut ids = Vec::new();
        let mut texts = Vec::new();
        let mut users = Vec::new();
        let mut kinds = Vec::new();
        for (item, vector) in items {
            let Some(vector) = vector else {
                continue;
            };
            if let Some(&at) = position.get(item.memory_id.as_str()) {
                texts[at] = vector_text(vector);
                users[at] = item.user_id.clone();
                kinds[at] = item.kind.clone();
                continue;
            }
            position.insert(&item.memory_id, ids.len());
            ids.push(item.memory_id.clone());
            texts.push(vector_text(vector));
            users.push(item.user_id.clone());
            kinds.push(item.kind.clone());
        }
        let queued: Vec<String> = items
            .iter()
            .map(|(item, _)| item.memory_id.clone())
            .collect();
        let mut tx = self.begin_write(WriteScope::Beside).await?;
        if !ids.is_empty() {
            // Their memories stay as they are until this commits: a purge or a soft delete
            // waits, then takes the vector away with the memory; one that came first leaves
            // the memory out of the join below, and no vector is stored for it.
            sqlx::query(
                "SELECT 1 FROM memories WHERE id = ANY($1) AND valid_until IS NULL \
                 ORDER BY id FOR SHARE",
            )
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO memory_vectors (memory_id, embedding, user_id, kind) \
                 SELECT v.id, v.embedding::vector, v.user_id, v.kind \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) \
                 AS v (id, embedding, user_id, kind) \
                 JOIN memories m ON m.id = v.id AND m.valid_until IS NULL \
                 ON CONFLICT (memory_id) DO UPDATE SET embedding = EXCLUDED.embedding, \
                 user_id = EXCLUDED.user_id, kind = EXCLUDED.kind",
            )
            .bind(&ids)
            .bind(&texts)
            .bind(&users)
            .bind(&kinds)
            .execute(&mut *tx)
            .await?;
            // Each indexed memory's sentence keys replace the ones it had.
            sqlx::query("DELETE FROM memory_sentence_vectors WHERE memory_id = ANY($1)")
                .bind(&ids)
                .execute(&mut *tx)
                .await?;
            let mut keyed = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (at, id) in ids.iter().enumerate() {
                for (ordinal, sentence) in sentences.get(id).into_iter().flatten().enumerate() {
                    keyed.0.push(id.clone());
                    keyed.1.push(i32::try_from(ordinal).unwrap_or(i32::MAX));
                    keyed.2.push(vector_text(sentence));
                    keyed.3.push(users[at].clone());
                    keyed.4.push(kinds[at].clone());
                }
            }
            if !keyed.0.is_empty() {
                sqlx::query(
                    "INSERT INTO memory_sentence_vectors (memory_id, ordinal, embedding, user_id, kind) \
                     SELECT v.id, v.ordinal, v.embedding::vector, v.user_id, v.kind \
                     FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[]) \
                     AS v (id, ordinal, embedding, user_id, kind) \
                     JOIN memories m ON m.id = v.id AND m.valid_until IS NULL",
                )
                .bind(&keyed.0)
                .bind(&keyed.1)
                .bind(&keyed.2)
                .bind(&keyed.3)
                .bind(&keyed.4)
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query("DELETE FROM embedding_queue WHERE memory_id = ANY($1)")
            .bind(&queued)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn release_index_leases(&self) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE embedding_queue SET claimed_until = NULL WHERE claimed_until IS NOT NULL",
        )
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}
