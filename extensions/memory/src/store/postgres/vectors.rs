//! The vector index: `memory_vectors` (pgvector) and, for the embedding provider's vector
//! length, an HNSW index on the expression `embedding::vector(N)`, which answers approximate
//! nearest-neighbour queries. There is no in-memory mirror: every instance reads the same table.
//!
//! `memory_vectors.embedding` has no fixed length, so the HNSW index is made when a provider is
//! first seen ([`VectorIndex::ensure_vector_index`]), named after its length
//! (`memory_vectors_hnsw_384`), and queries name the same expression so that the planner uses
//! it. An index on `memory_vectors (user_id, kind)` is made with it, for searching one user's
//! vectors exactly.
//!
//! pgvector 0.6 filters an HNSW scan's candidates after the scan: with one user among many, the
//! `hnsw.ef_search` candidates may hold few of theirs. [`PostgresStore::nearest_filtered`]
//! therefore searches a user's vectors exactly while they are few (at most
//! [`EXACT_ROWS`], read through the user index), and otherwise searches the HNSW index at the
//! configured depth (enough for an owner of most vectors), then with the most candidates
//! pgvector allows, falling back to the exact search if that still finds fewer than asked for.

use std::collections::HashMap;

use async_trait::async_trait;
use sqlx::{Postgres, QueryBuilder};

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::{vector_scope, VectorIndex};
use crate::store::sql::push_scope;
use crate::store::sql::{
    provider_status, push_owner_and_kind, queue_every_memory, record_provider, WriteScope,
};
use crate::store::{MirrorSize, VectorStatus};
use crate::types::SearchRequest;

/// A user's (and kind's) vectors up to this many are searched exactly rather than through the
/// HNSW index. Reading them through the user index costs less than an HNSW scan deep enough to
/// hold `k` of theirs among everyone's: with 3,000 vectors of 30 users, a whole search (100 of
/// one user's exactly) took 7 ms, the HNSW scan at `ef_search` 1000 alone 24 ms; exact search
/// over 7,000 vectors took 5 ms.
const EXACT_ROWS: i64 = 5_000;

/// pgvector's largest `hnsw.ef_search`.
const MAX_EF_SEARCH: usize = 1_000;

/// pgvector's longest vector an HNSW index takes; longer vectors are searched exactly.
const MAX_HNSW_DIMENSIONS: usize = 2_000;

/// The prefix of the HNSW indexes' names; the vector length follows.
const HNSW_PREFIX: &str = "memory_vectors_hnsw_";

/// A vector as pgvector's text form, `[0.1,0.2,…]`, for binding and casting to `vector`.
pub(super) fn vector_text(vector: &[f32]) -> String {
    let mut text = String::with_capacity(vector.len() * 10 + 2);
    text.push('[');
    for (index, value) in vector.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&value.to_string());
    }
    text.push(']');
    text
}

/// The statements creating the HNSW index for vectors of `dimensions` and the user index.
fn create_indexes(dimensions: usize) -> Vec<String> {
    let mut statements = vec![
        "CREATE INDEX IF NOT EXISTS memory_vectors_user ON memory_vectors (user_id, kind)"
            .to_owned(),
    ];
    if dimensions <= MAX_HNSW_DIMENSIONS {
        statements.push(format!(
            "CREATE INDEX IF NOT EXISTS {HNSW_PREFIX}{dimensions} ON memory_vectors \
             USING hnsw ((embedding::vector({dimensions})) vector_cosine_ops)"
        ));
    }
    statements
}

/// Nearest-neighbour rows as (id, cosine similarity).
fn similarities(rows: Vec<(String, f64)>) -> Vec<(String, f32)> {
    rows.into_iter()
        .map(|(id, distance)| (id, (1.0 - distance) as f32))
        .collect()
}

impl PostgresStore {
    fn set_vector_status(&self, status: VectorStatus) {
        *self
            .vector
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = status;
    }

    /// The length of the HNSW index a query `vector` can use: the provider's, when vector search
    /// is on, the query has that length, and pgvector can index it.
    fn hnsw_dimensions(&self, vector: &[f32]) -> Option<usize> {
        match self.vector_status() {
            VectorStatus::Enabled { dimensions, .. }
                if dimensions == vector.len() && dimensions <= MAX_HNSW_DIMENSIONS =>
            {
                Some(dimensions)
            }
            _ => None,
        }
    }

    /// How many vectors `owner` has (of `kind`, when given), counted up to `EXACT_ROWS + 1`.
    async fn owner_rows(&self, owner: &str, kind: Option<&str>) -> Result<i64> {
        let mut builder = QueryBuilder::new(
            "SELECT COUNT(*) FROM (SELECT 1 FROM memory_vectors WHERE user_id = ",
        );
        builder.push_bind(owner.to_owned());
        if let Some(kind) = kind {
            builder.push(" AND kind = ").push_bind(kind.to_owned());
        }
        builder
            .push(" LIMIT ")
            .push_bind(EXACT_ROWS + 1)
            .push(") owned");
        Ok(builder.build_query_scalar().fetch_one(&self.pool).await?)
    }

    /// The `k` nearest through the HNSW index for `dimensions`, among its `ef_search` nearest
    /// candidates filtered by owner and kind afterwards, as pgvector 0.6 filters: possibly
    /// fewer than `k`. The filters stay outside the index scan's query, so that the planner
    /// never trades the HNSW index for the user index.
    pub(super) async fn nearest_hnsw(
        &self,
        vector: &[f32],
        dimensions: usize,
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
        ef_search: usize,
    ) -> Result<Vec<(String, f32)>> {
        let filtered = owner.is_some() || kind.is_some();
        let ef_search = ef_search.max(k).clamp(1, MAX_EF_SEARCH);
        let candidates = if filtered { ef_search } else { k };
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT set_config('hnsw.ef_search', $1, true)")
            .bind(ef_search.to_string())
            .execute(&mut *tx)
            .await?;
        let mut builder = QueryBuilder::new(format!(
            "SELECT memory_id, distance FROM (SELECT memory_id, user_id, kind, \
             embedding::vector({dimensions}) <=> "
        ));
        builder
            .push_bind(vector_text(vector))
            .push(format!(
                "::vector({dimensions}) AS distance FROM memory_vectors ORDER BY distance LIMIT "
            ))
            .push_bind(i64::try_from(candidates).unwrap_or(i64::MAX))
            .push(") nearest WHERE true");
        push_owner_and_kind(&mut builder, owner, kind);
        builder
            .push(" ORDER BY distance LIMIT ")
            .push_bind(i64::try_from(k).unwrap_or(i64::MAX));
        let rows = builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(similarities(rows))
    }

    /// The `k` nearest of `owner`'s vectors (of `kind`, when given): exactly while they are at
    /// most [`EXACT_ROWS`]; else through the HNSW index, at the configured depth, then at its
    /// deepest, and exactly if that still finds fewer than `k`.
    async fn nearest_filtered(
        &self,
        vector: &[f32],
        dimensions: usize,
        owner: &str,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        let rows = self.owner_rows(owner, kind).await?;
        if rows <= EXACT_ROWS {
            return self.nearest_exact(vector, Some(owner), kind, k).await;
        }
        // At the configured depth first: an owner of most vectors finds their `k` there. An
        // owner of a smaller share needs the deepest scan, and failing that the exact one.
        for ef_search in [self.ef_search, MAX_EF_SEARCH] {
            let found = self
                .nearest_hnsw(vector, dimensions, Some(owner), kind, k, ef_search)
                .await?;
            if found.len() >= k {
                return Ok(found);
            }
        }
        self.nearest_exact(vector, Some(owner), kind, k).await
    }
}

#[async_trait]
impl VectorIndex for PostgresStore {
    fn vector_status(&self) -> VectorStatus {
        self.vector
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn approximate_search(&self) -> bool {
        self.ef_search != 0
    }

    /// Under the store's write lock, so that instances starting together agree on one
    /// provider. A matching provider still gets its indexes made if they are missing (a store
    /// copied from SQLite brings its `memory_metadata` but no index).
    async fn ensure_vector_index(&self, dimensions: usize, model_id: &str) -> Result<VectorStatus> {
        let mut tx = self.begin_write(WriteScope::Store).await?;
        let status = match provider_status::<Postgres>(&mut tx, dimensions, model_id).await? {
            Some(status @ VectorStatus::Disabled { .. }) => status,
            recorded => {
                if recorded.is_none() {
                    record_provider::<Postgres>(&mut tx, dimensions, model_id).await?;
                }
                for statement in create_indexes(dimensions) {
                    sqlx::query(sqlx::AssertSqlSafe(statement))
                        .execute(&mut *tx)
                        .await?;
                }
                VectorStatus::Enabled {
                    dimensions,
                    model_id: model_id.to_owned(),
                }
            }
        };
        tx.commit().await?;
        self.set_vector_status(status.clone());
        Ok(status)
    }

    /// Drops every vector and every HNSW index (of any length), makes the indexes for
    /// `dimensions` on the emptied table, records the provider, forgets its cached vectors and
    /// queues every active memory, under the store's write lock in one transaction.
    async fn reset_vector_index(&self, dimensions: usize, model_id: &str) -> Result<u64> {
        let mut tx = self.begin_write(WriteScope::Store).await?;
        // Emptied by TRUNCATE, not DELETE: an index built in the same transaction would still
        // read deleted rows, of the old length.
        sqlx::query("TRUNCATE memory_vectors, memory_sentence_vectors")
            .execute(&mut *tx)
            .await?;
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = current_schema() \
             AND tablename = 'memory_vectors' AND starts_with(indexname, $1)",
        )
        .bind(HNSW_PREFIX)
        .fetch_all(&mut *tx)
        .await?;
        for index in indexes {
            // Quoted as an identifier: the name comes from the catalog.
            let quoted = format!("\"{}\"", index.replace('"', "\"\""));
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP INDEX IF EXISTS {quoted}"
            )))
            .execute(&mut *tx)
            .await?;
        }
        for statement in create_indexes(dimensions) {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut *tx)
                .await?;
        }
        record_provider::<Postgres>(&mut tx, dimensions, model_id).await?;
        let queued = queue_every_memory::<Postgres>(&mut tx, model_id).await?;
        tx.commit().await?;
        self.set_vector_status(VectorStatus::Enabled {
            dimensions,
            model_id: model_id.to_owned(),
        });
        Ok(queued)
    }

    /// An exact scan of the keys the asker may see (the owner's, through
    /// `memory_sentence_vectors_user`; in a chat, those of the memories the visibility rule
    /// lets through), each memory at its best sentence: sentence keys are read only for
    /// questions in the first person.
    async fn nearest_sentences(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
    ) -> Result<Vec<(String, f32)>> {
        let k = (limit.saturating_mul(3)).clamp(limit, 4096);
        let mut builder = QueryBuilder::new("SELECT s.memory_id, MIN(s.embedding <=> ");
        builder
            .push_bind(vector_text(vector))
            .push("::vector) AS distance FROM memory_sentence_vectors s");
        let (owner, kind) = vector_scope(request);
        match owner {
            Some(owner) => {
                builder
                    .push(" WHERE s.user_id = ")
                    .push_bind(owner.to_owned());
            }
            // In a chat: only the keys of memories the asker may see, not every user's.
            None => {
                builder.push(" JOIN memories m ON m.id = s.memory_id WHERE true");
                push_scope(
                    &mut builder,
                    request.user_id.as_deref(),
                    request.chat_id.as_deref(),
                );
            }
        }
        if let Some(kind) = kind {
            builder.push(" AND s.kind = ").push_bind(kind.to_owned());
        }
        builder
            .push(" GROUP BY s.memory_id ORDER BY distance, s.memory_id LIMIT ")
            .push_bind(i64::try_from(k).unwrap_or(i64::MAX));
        Ok(similarities(
            builder
                .build_query_as::<(String, f64)>()
                .fetch_all(&self.pool)
                .await?,
        ))
    }

    /// This store keeps no in-memory mirror of the vectors: the rows of `memory_vectors`, and
    /// 0 bytes.
    async fn stored_vectors(&self, ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        // As `real[]`, which the binary protocol hands over as floats: no text to parse.
        let rows: Vec<(String, Vec<f32>)> = sqlx::query_as(
            "SELECT memory_id, embedding::real[] FROM memory_vectors WHERE memory_id = ANY($1)",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().collect())
    }

    async fn mirror_size(&self) -> Result<MirrorSize> {
        let (memories, sentences): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM memory_vectors), \
             (SELECT COUNT(*) FROM memory_sentence_vectors)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(MirrorSize {
            memory_rows: usize::try_from(memories).unwrap_or(0),
            sentence_rows: usize::try_from(sentences).unwrap_or(0),
            heap_bytes: 0,
        })
    }

    /// Every stored vector (of `owner` and `kind`, through the user index) by cosine distance,
    /// on the column itself, which no HNSW index covers.
    async fn nearest_exact(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        let mut builder = QueryBuilder::new("SELECT memory_id, embedding <=> ");
        builder
            .push_bind(vector_text(vector))
            .push("::vector AS distance FROM memory_vectors WHERE true");
        push_owner_and_kind(&mut builder, owner, kind);
        builder
            .push(" ORDER BY distance, memory_id LIMIT ")
            .push_bind(i64::try_from(k).unwrap_or(i64::MAX));
        let rows = builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?;
        Ok(similarities(rows))
    }

    /// The HNSW index with `ef_search` (at least `k`) candidates; an owner's vectors as
    /// [`PostgresStore::nearest_filtered`] says. Exact when there is no index for the query's
    /// length, or when the index gave fewer than `k` while holding more.
    async fn nearest_approximate(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        let Some(dimensions) = self.hnsw_dimensions(vector) else {
            return self.nearest_exact(vector, owner, kind, k).await;
        };
        if let Some(owner) = owner {
            return self
                .nearest_filtered(vector, dimensions, owner, kind, k)
                .await;
        }
        // A kind alone keeps a large share of the vectors: the deepest scan usually holds `k`.
        let ef_search = if kind.is_some() {
            MAX_EF_SEARCH
        } else {
            self.ef_search.max(k)
        };
        let found = self
            .nearest_hnsw(vector, dimensions, None, kind, k, ef_search)
            .await?;
        if found.len() >= k || (kind.is_none() && found.len() < ef_search.min(MAX_EF_SEARCH)) {
            return Ok(found);
        }
        self.nearest_exact(vector, owner, kind, k).await
    }
}

/// Takes memories off the indexer's queue and out of the vector index, inside `tx`.
pub(super) async fn drop_vectors(tx: &mut sqlx::PgConnection, memory_ids: &[String]) -> Result<()> {
    sqlx::query("DELETE FROM embedding_queue WHERE memory_id = ANY($1)")
        .bind(memory_ids)
        .execute(&mut *tx)
        .await?;
    for statement in [
        "DELETE FROM memory_vectors WHERE memory_id = ANY($1)",
        "DELETE FROM memory_sentence_vectors WHERE memory_id = ANY($1)",
    ] {
        sqlx::query(statement)
            .bind(memory_ids)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}
