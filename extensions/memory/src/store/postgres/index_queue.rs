//! STUB: to be written (PostgreSQL port of ../sqlite/index_queue.rs).

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
impl IndexQueue for PostgresStore {
    async fn next_index_batch(&self, limit: usize) -> Result<Vec<IndexItem>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn cached_vectors(
        &self,
        hashes: &[String],
        model_id: &str,
    ) -> Result<HashMap<String, Vec<f32>>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn cache_vectors(
        &self,
        vectors: &[(String, Vec<f32>)],
        model_id: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn store_vectors(&self, items: &[(IndexItem, Option<Vec<f32>>)]) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn pending_index(&self) -> Result<i64> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
