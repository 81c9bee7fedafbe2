//! Administration: closing the store, and the integrity check behind `mnemo check`. The SQLite
//! store's (`../sqlite/admin.rs`) in PostgreSQL's words: there is no log to checkpoint and no
//! full-text index to check (the tsvector is a generated column), so the check counts what
//! SQLite counts, in one snapshot and without stopping the writers.

use async_trait::async_trait;

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::StoreAdmin;
use crate::store::IntegrityReport;

#[async_trait]
impl StoreAdmin for PostgresStore {
    async fn close(&self) {
        // Waits for the connections in use to be given back; PostgreSQL has made every
        // committed transaction durable already.
        self.probe.abort();
        self.pool.close().await;
    }

    async fn check_integrity(&self) -> Result<IntegrityReport> {
        // One snapshot: the counts agree with each other while writers go on.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        // What PostgreSQL can say cheaply about the store's own tables: an index left invalid
        // (a failed concurrent build) is skipped by every query that would use it.
        let database: Vec<String> = sqlx::query_scalar(
            "SELECT format('index %s of table %s is invalid', i.indexrelid::regclass, \
             i.indrelid::regclass) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid \
             WHERE c.relnamespace = current_schema()::regnamespace AND NOT i.indisvalid \
             ORDER BY 1",
        )
        .fetch_all(&mut *tx)
        .await?;
        let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
        let memories = count("SELECT COUNT(*) FROM memories")
            .fetch_one(&mut *tx)
            .await?;
        let active = count("SELECT COUNT(*) FROM memories WHERE valid_until IS NULL")
            .fetch_one(&mut *tx)
            .await?;
        let queued = count(
            "SELECT COUNT(*) FROM embedding_queue q JOIN memories m ON m.id = q.memory_id \
             WHERE m.valid_until IS NULL",
        )
        .fetch_one(&mut *tx)
        .await?;
        // SQLite has a vector index once an embedding provider made it; `memory_vectors` always
        // exists, so the index counts as made once a provider is recorded or a vector stored.
        let has_vectors: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM memory_metadata WHERE key = 'embedding_dimensions') \
             OR EXISTS (SELECT 1 FROM memory_vectors)",
        )
        .fetch_one(&mut *tx)
        .await?;
        let (vectors, orphan_vectors, unindexed) = if has_vectors {
            let vectors = count("SELECT COUNT(*) FROM memory_vectors")
                .fetch_one(&mut *tx)
                .await?;
            let orphans = count(
                "SELECT (SELECT COUNT(*) FROM memory_vectors v WHERE NOT EXISTS \
                 (SELECT 1 FROM memories m WHERE m.id = v.memory_id AND m.valid_until IS NULL)) \
                 + (SELECT COUNT(*) FROM memory_sentence_vectors s WHERE NOT EXISTS \
                 (SELECT 1 FROM memories m WHERE m.id = s.memory_id AND m.valid_until IS NULL))",
            )
            .fetch_one(&mut *tx)
            .await?;
            let unindexed = count(
                "SELECT COUNT(*) FROM memories m WHERE m.valid_until IS NULL \
                 AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id) \
                 AND NOT EXISTS (SELECT 1 FROM embedding_queue q WHERE q.memory_id = m.id)",
            )
            .fetch_one(&mut *tx)
            .await?;
            (Some(vectors), orphans, unindexed)
        } else {
            (None, 0, 0)
        };
        let forgotten_events = count(
            "SELECT COUNT(*) FROM ingested_events e WHERE NOT EXISTS \
             (SELECT 1 FROM memories m WHERE m.id = e.memory_id)",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(IntegrityReport {
            database,
            full_text: None,
            memories,
            active,
            vectors,
            orphan_vectors,
            unindexed,
            queued,
            forgotten_events,
        })
    }

    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    fn unreachable(&self) -> Option<String> {
        self.reachability.unreachable()
    }

    async fn database_bytes(&self) -> Result<u64> {
        let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(bytes).unwrap_or_default())
    }
}
