//! STUB: to be written (PostgreSQL port of ../sqlite/lifecycle.rs).

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
impl FactLifecycle for PostgresStore {
    async fn correct(
        &self,
        old_id: &str,
        user_id: Option<&str>,
        replacement: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn confirm(&self, id: &str, user_id: Option<&str>) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn resolve_conflict(&self, old_id: &str, new_id: &str) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn decay(&self, threshold: f64, now: DateTime<Utc>) -> Result<DecayReport> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn supersede(&self, old_ids: &[String], new_id: &str, at: DateTime<Utc>) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn expire(&self, now: DateTime<Utc>) -> Result<u64> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
