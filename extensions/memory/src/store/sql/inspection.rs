//! Inspection, for both backends: owners, an owner's entities, and what a fact replaced.

use async_trait::async_trait;
use sqlx::QueryBuilder;

use super::{Bind, Dialect, Driver, SqlStore};
use crate::error::Result;
use crate::store::backend::InspectionQueries;
use crate::store::rows::{ENTITY_SUMMARY_COLUMNS, MEMORY_COLUMNS};
use crate::store::{EntitySummary, OwnerSummary};
use crate::types::Memory;

#[async_trait]
impl<S: SqlStore> InspectionQueries for S {
    async fn owners(&self, limit: usize) -> Result<Vec<OwnerSummary>> {
        let mut query = QueryBuilder::<S::Db>::new(format!(
            "SELECT user_id, COUNT(*) AS memories FROM memories WHERE user_id IS NOT NULL \
             GROUP BY user_id ORDER BY {} LIMIT ",
            S::Db::byte_order("user_id")
        ));
        query.count(limit);
        self.read(query)
            .await?
            .iter()
            .map(S::Db::owner_summary)
            .collect()
    }

    async fn owner_entities(&self, owner: &str, limit: usize) -> Result<Vec<EntitySummary>> {
        let mut query = QueryBuilder::<S::Db>::new(format!(
            "SELECT {ENTITY_SUMMARY_COLUMNS} FROM entities e WHERE e.owner_id = "
        ));
        query
            .text(owner)
            .push(format!(
                " ORDER BY memories DESC, {}, e.id LIMIT ",
                S::Db::name_order("e.canonical_name")
            ))
            .count(limit);
        self.read(query)
            .await?
            .iter()
            .map(S::Db::entity_summary)
            .collect()
    }

    async fn replaced_by(&self, id: &str) -> Result<Vec<Memory>> {
        let mut query = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.superseded_by_id = "
        ));
        query
            .text(id)
            .push(format!(" ORDER BY m.created_at, m.{}", S::Db::STORED_ORDER));
        self.read(query).await?.iter().map(S::Db::memory).collect()
    }
}
