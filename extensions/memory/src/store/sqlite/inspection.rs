//! Inspection: owners, an owner's entities, and what a fact replaced.

use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::InspectionQueries;
use crate::store::rows::{
    entity_summary_from_row, memory_from_row, owner_summary_from_row, ENTITY_SUMMARY_COLUMNS,
    MEMORY_COLUMNS,
};
use crate::store::{EntitySummary, OwnerSummary};
use crate::types::Memory;
use async_trait::async_trait;

#[async_trait]
impl InspectionQueries for MemoryStore {
    async fn owners(&self, limit: usize) -> Result<Vec<OwnerSummary>> {
        let rows = sqlx::query(
            "SELECT user_id, COUNT(*) AS memories FROM memories WHERE user_id IS NOT NULL \
             GROUP BY user_id ORDER BY user_id LIMIT ?",
        )
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(owner_summary_from_row).collect()
    }

    async fn owner_entities(&self, owner: &str, limit: usize) -> Result<Vec<EntitySummary>> {
        let rows = sqlx::query(&format!(
            "SELECT {ENTITY_SUMMARY_COLUMNS} FROM entities e WHERE e.owner_id = ? \
             ORDER BY memories DESC, e.canonical_name COLLATE NOCASE, e.id LIMIT ?"
        ))
        .bind(owner)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(entity_summary_from_row).collect()
    }

    async fn replaced_by(&self, id: &str) -> Result<Vec<Memory>> {
        let rows = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.superseded_by_id = ? \
             ORDER BY m.created_at, m.rowid"
        ))
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(memory_from_row).collect()
    }
}
