//! API keys, store settings and MCP sessions in PostgreSQL: the shared statements of
//! `store/api_keys.rs`, each write in its own transaction (nobody's memory: no owner's writer waits).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder, Row as _};

use super::PostgresStore;
use crate::error::Result;
use crate::store::api_keys::{self, MCP_SESSION_KEPT_MS};
use crate::store::backend::KeyRecords;
use crate::store::{KeyRecord, McpSessionRecord};

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

#[async_trait]
impl KeyRecords for PostgresStore {
    async fn insert_key(&self, key: &KeyRecord) -> Result<bool> {
        let changed = self
            .write_statements(vec![api_keys::insert_key(key)?])
            .await?;
        Ok(changed == [1])
    }

    async fn keys(&self, id: Option<&str>) -> Result<Vec<KeyRecord>> {
        let rows = api_keys::select_keys::<Postgres>(id)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(api_keys::key_from_row).collect()
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>> {
        self.write_statements(vec![api_keys::revoke_key(id, at)])
            .await?;
        Ok(self.keys(Some(id)).await?.into_iter().next())
    }

    async fn setting(&self, name: &str) -> Result<Option<String>> {
        Ok(api_keys::select_setting::<Postgres>(name)
            .build_query_scalar()
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn set_setting(&self, name: &str, value: &str) -> Result<bool> {
        let changed = self
            .write_statements(vec![api_keys::insert_setting(name, value)])
            .await?;
        Ok(changed == [1])
    }

    async fn bind_mcp_session(&self, id: &str, key_id: &str, at: DateTime<Utc>) -> Result<()> {
        let now = at.timestamp_millis();
        self.write_statements(vec![
            api_keys::prune_sessions(now - MCP_SESSION_KEPT_MS),
            api_keys::bind_session(id, key_id, now),
        ])
        .await?;
        Ok(())
    }

    async fn store_mcp_session(&self, id: &str, initialize: &str, at: DateTime<Utc>) -> Result<()> {
        self.write_statements(vec![api_keys::store_session(
            id,
            initialize,
            at.timestamp_millis(),
        )])
        .await?;
        Ok(())
    }

    async fn mcp_session(&self, id: &str) -> Result<Option<McpSessionRecord>> {
        let row = api_keys::select_session::<Postgres>(id)
            .build()
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(McpSessionRecord {
                key_id: row.try_get("key_id")?,
                initialize: row.try_get("initialize")?,
            })
        })
        .transpose()
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<()> {
        self.write_statements(vec![api_keys::delete_session(id)])
            .await?;
        Ok(())
    }
}
