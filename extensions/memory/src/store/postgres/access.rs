//! API keys, store settings, MCP sessions and chat members in PostgreSQL: the statements of
//! `store/access.rs`, each write in its own transaction (nobody's memory: no owner's writer
//! waits for it).

use sqlx::{Postgres, QueryBuilder};

use super::PostgresStore;
use crate::error::Result;
use crate::store::access::access_records;

impl PostgresStore {
    /// Runs the write statements in order in one transaction; returns the rows each changed.
    async fn write_statements(
        &self,
        statements: Vec<QueryBuilder<'_, Postgres>>,
    ) -> Result<Vec<u64>> {
        let mut tx = self.pool.begin().await?;
        let mut changed = Vec::with_capacity(statements.len());
        for mut statement in statements {
            changed.push(statement.build().execute(&mut *tx).await?.rows_affected());
        }
        tx.commit().await?;
        Ok(changed)
    }
}

access_records!(PostgresStore, Postgres);
