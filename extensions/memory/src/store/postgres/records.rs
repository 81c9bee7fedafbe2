//! STUB: to be written (PostgreSQL port of ../sqlite/records.rs).

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
impl MemoryRecords for PostgresStore {
    async fn get(&self, id: &str) -> Result<Option<Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn load_filtered(
        &self,
        ids: &[String],
        request: &SearchRequest,
    ) -> Result<HashMap<String, Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn rank_keys(
        &self,
        ids: &[String],
        request: &SearchRequest,
        neighbours: bool,
    ) -> Result<HashMap<String, RankKey>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn touch(&self, ids: &[String], at: DateTime<Utc>) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn memories_for_enrichment(
        &self,
        kinds: &[MemoryKind],
        max_entities: usize,
        max_attempts: i64,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn latest_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn recent_memories(
        &self,
        user_id: Option<&str>,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn list_memories(
        &self,
        request: &ListRequest,
        now: DateTime<Utc>,
    ) -> Result<Vec<Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn context_value(
        &self,
        owner: &str,
        chat_id: Option<&str>,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
