//! STUB: to be written (PostgreSQL port of ../sqlite/ingest.rs).

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
impl MemoryIngest for PostgresStore {
    async fn insert_memory(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn insert_turn(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
        event_id: Option<&str>,
        record_session: bool,
    ) -> Result<StoredTurn> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}

/// Inserts a memory, queues it for a vector and links its entities, inside `tx` (the caller
/// holds the owner's write lock); returns its id. Used by `lifecycle` for corrections.
pub(super) async fn insert_in_tx(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    memory: &NewMemory,
    entities: &[ExtractedEntity],
) -> Result<String> {
    Err(MemoryError::Invalid("not written yet".into()))
}
