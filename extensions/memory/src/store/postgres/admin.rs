//! Administration: closing the store, and the integrity check behind `mnemo check`. The SQLite
//! store's (`../sqlite/admin.rs`) in PostgreSQL's words: there is no log to checkpoint and no
//! full-text index to check (the tsvector is a generated column), so the check makes the counts
//! both backends make (`store/sql/admin.rs`), in one snapshot and without stopping the writers.

use async_trait::async_trait;
use sqlx::Postgres;

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::StoreAdmin;
use crate::store::sql::integrity_counts;
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
        // SQLite has a vector index once an embedding provider made it; `memory_vectors` always
        // exists, so the index counts as made once a provider is recorded or a vector stored.
        let has_vectors: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM memory_metadata WHERE key = 'embedding_dimensions') \
             OR EXISTS (SELECT 1 FROM memory_vectors)",
        )
        .fetch_one(&mut *tx)
        .await?;
        let counts = integrity_counts::<Postgres>(&mut tx, has_vectors).await?;
        tx.commit().await?;
        Ok(IntegrityReport { database, ..counts })
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
