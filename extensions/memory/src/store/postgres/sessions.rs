//! STUB: to be written (PostgreSQL port of ../sqlite/sessions.rs).

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
impl SessionRecords for PostgresStore {
    async fn pending_consolidations(&self, user_id: Option<&str>) -> Result<Vec<PendingSession>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn is_session_consolidated(&self, session: &SessionKey) -> Result<bool> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn mark_session_consolidated(
        &self,
        session: &SessionKey,
        episode_ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn reset_failed_attempts(&self) -> Result<(u64, u64)> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn record_consolidation_failure(&self, session: &SessionKey, error: &str) -> Result<i64> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn episodes_for_session(
        &self,
        session: &SessionKey,
        offset: usize,
        limit: usize,
    ) -> Result<EpisodePage> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn recent_turns(&self, session: &SessionKey, limit: usize) -> Result<Vec<Memory>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
