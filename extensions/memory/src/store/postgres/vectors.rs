//! STUB: to be written (PostgreSQL port of ../sqlite/vectors.rs).

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
impl VectorIndex for PostgresStore {
    fn vector_status(&self) -> VectorStatus {
        self.vector
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
    async fn ensure_vector_index(&self, dimensions: usize, model_id: &str) -> Result<VectorStatus> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn reset_vector_index(&self, dimensions: usize, model_id: &str) -> Result<u64> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn search_vector(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn mirror_size(&self) -> Result<(usize, usize)> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn nearest_exact(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn nearest_approximate(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}

/// Takes a memory off the indexer's queue and out of the vector index, inside `tx`.
pub(super) async fn drop_vector(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    memory_id: &str,
) -> Result<()> {
    sqlx::query("DELETE FROM embedding_queue WHERE memory_id = $1")
        .bind(memory_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM memory_vectors WHERE memory_id = $1")
        .bind(memory_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
