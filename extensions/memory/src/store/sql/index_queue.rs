//! The parts of the indexer's queue that read the same in both backends: queueing every memory
//! when the vector index is rebuilt, the items of a batch once its ids are taken, caching
//! vectors ([`cache_vectors`]), and [`IndexReads`] (the embedding cache's vectors, the queue's
//! length). Taking a batch and storing vectors stay with each backend
//! (`store/*/index_queue.rs`): SQLite takes its one writer's turn and moves its in-memory mirror
//! along, PostgreSQL leases batches to several instances and writes arrays in one statement.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{Bind, Dialect, Driver, Run, SqlStore, WriteScope};
use crate::error::Result;
use crate::store::backend::IndexReads;
use crate::store::index_order;
use crate::store::rows::{blob_vector, ts, vector_blob};
use crate::store::IndexItem;

/// The end of rebuilding the vector index for a new provider, on `connection` inside the
/// caller's transaction: forgets the vectors cached for `model_id` and queues every active
/// memory for the indexer; how many memories that queued (those not queued already).
pub(crate) async fn queue_every_memory<D: Dialect>(
    connection: &mut D::Connection,
    model_id: &str,
) -> Result<u64> {
    let mut forget = QueryBuilder::<D>::new("DELETE FROM embedding_cache WHERE model_id = ");
    forget.text(model_id);
    D::execute(connection, forget).await?;
    D::execute(
        connection,
        QueryBuilder::new(
            "INSERT INTO embedding_queue (memory_id, enqueued_at) \
             SELECT id, created_at FROM memories WHERE valid_until IS NULL \
             ON CONFLICT (memory_id) DO NOTHING",
        ),
    )
    .await
}

/// Vectors cached per statement: 4 values each, well under SQLite's 32,766 parameters.
const CACHED_PER_STATEMENT: usize = 500;

/// Caches `vectors` (content hash, vector) of `model_id` at `at`, keeping a vector cached
/// already (see `IndexQueue::cache_vectors`). The cache belongs to no owner: a write beside
/// the owners' writers ([`WriteScope::Keyed`]), where a vector cached twice at once is kept
/// once.
pub(crate) async fn cache_vectors<S: SqlStore>(
    store: &S,
    vectors: &[(String, Vec<f32>)],
    model_id: &str,
    at: DateTime<Utc>,
) -> Result<()> {
    if vectors.is_empty() {
        return Ok(());
    }
    let mut tx = store.write(WriteScope::Keyed).await?;
    for chunk in vectors.chunks(CACHED_PER_STATEMENT) {
        let mut insert = QueryBuilder::<S::Db>::new(
            "INSERT INTO embedding_cache (content_hash, model_id, vector, created_at) VALUES ",
        );
        for (index, (hash, vector)) in chunk.iter().enumerate() {
            insert
                .push(if index == 0 { "(" } else { ", (" })
                .text(hash)
                .push(", ")
                .text(model_id)
                .push(", ")
                .bytes(vector_blob(vector))
                .push(", ")
                .int(ts(at))
                .push(")");
        }
        insert.push(" ON CONFLICT (content_hash, model_id) DO NOTHING");
        S::Db::execute(&mut tx, insert).await?;
    }
    tx.commit().await
}

/// The queued memories `ids` (those still queued), in the order of `ids`, read on `connection`.
pub(crate) async fn index_items<D: Dialect>(
    connection: &mut D::Connection,
    ids: &[String],
) -> Result<Vec<IndexItem>> {
    let mut query = QueryBuilder::<D>::new(
        "SELECT q.memory_id, m.content, m.user_id, m.kind, m.valid_until IS NULL AS active, \
         (m.kind = 'episode' AND m.source_role IS NOT NULL AND m.source_role = 'user') AS spoken_by_user \
         FROM embedding_queue q JOIN memories m ON m.id = q.memory_id WHERE ",
    );
    D::push_one_of(&mut query, "q.memory_id", ids);
    let items = D::rows(connection, query)
        .await?
        .iter()
        .map(|row| {
            Ok(IndexItem {
                memory_id: D::text(row, "memory_id")?,
                content: D::text(row, "content")?,
                user_id: D::opt_text(row, "user_id")?.unwrap_or_default(),
                kind: D::text(row, "kind")?,
                active: D::flag(row, "active")?,
                spoken_by_user: D::flag(row, "spoken_by_user")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(index_order::in_order_taken(items, ids))
}

#[async_trait]
impl<S: SqlStore> IndexReads for S {
    async fn cached_vectors(
        &self,
        hashes: &[String],
        model_id: &str,
    ) -> Result<HashMap<String, Vec<f32>>> {
        if hashes.is_empty() {
            return Ok(HashMap::new());
        }
        let mut query = QueryBuilder::<S::Db>::new(
            "SELECT content_hash, vector FROM embedding_cache WHERE model_id = ",
        );
        query.text(model_id).push(" AND ");
        S::Db::push_one_of(&mut query, "content_hash", hashes);
        self.read(query)
            .await?
            .iter()
            .map(|row| {
                let blob = S::Db::bytes(row, "vector")?;
                Ok((S::Db::text(row, "content_hash")?, blob_vector(&blob)))
            })
            .collect()
    }

    async fn pending_index(&self) -> Result<i64> {
        let query = QueryBuilder::<S::Db>::new("SELECT COUNT(*) AS n FROM embedding_queue");
        match self.read(query).await?.first() {
            Some(row) => S::Db::int(row, "n"),
            None => Ok(0),
        }
    }
}
