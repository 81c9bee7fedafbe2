//! STUB: to be written (PostgreSQL port of ../sqlite/entities.rs).

#![allow(unused_variables, unused_imports, dead_code)]

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;
use serde_json::Value;

use super::PostgresStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::*;
use crate::store::*;
use crate::types::*;

#[async_trait]
impl EntityLinks for PostgresStore {
    async fn add_entities(
        &self,
        memory_id: &str,
        entities: &[ExtractedEntity],
        enriched_at: Option<DateTime<Utc>>,
    ) -> Result<usize> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn entities_named(&self, owner: Option<&str>, names: &[String]) -> Result<Vec<String>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn entity_info(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        name: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn entity_info_by_id(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        id: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn entity_names(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn record_enrichment_failure(&self, memory_id: &str) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn co_mentions(
        &self,
        driver: &str,
        others: &[String],
        scan: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn newest_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn entity_link_counts(&self, entity_ids: &[String]) -> Result<HashMap<String, i64>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn linked_memory_count(&self) -> Result<i64> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}

/// Creates or finds each entity for `owner` and links it to the memory, then links the owner's
/// known entities named in `text`; returns the memory's link count (see `../sqlite/entities.rs`).
pub(super) async fn link_entities(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    memory_id: &str,
    owner: &str,
    entities: &[ExtractedEntity],
    text: Option<&str>,
) -> Result<usize> {
    Err(MemoryError::Invalid("not written yet".into()))
}
