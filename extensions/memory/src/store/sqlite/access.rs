//! API keys, store settings, MCP sessions and chat members in SQLite: the statements of
//! `store/access.rs`, each write in its own transaction under the store's write lock.

use sqlx::{QueryBuilder, Sqlite};

use super::MemoryStore;
use crate::error::Result;
use crate::store::access::access_records;

impl MemoryStore {
    /// Runs the write statements in order in one transaction; returns the rows each changed.
    async fn write_statements(
        &self,
        statements: Vec<QueryBuilder<'_, Sqlite>>,
    ) -> Result<Vec<u64>> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let mut changed = Vec::with_capacity(statements.len());
        for mut statement in statements {
            changed.push(statement.build().execute(&mut *tx).await?.rows_affected());
        }
        tx.commit().await?;
        Ok(changed)
    }
}

access_records!(MemoryStore, Sqlite);
