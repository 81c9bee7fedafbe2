//! STUB: to be written (PostgreSQL port of ../sqlite/removal.rs).

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
impl MemoryRemoval for PostgresStore {
    async fn purge(&self, ids: &[String]) -> Result<Vec<MemoryForgotten>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn erase_user(&self, user_id: &str) -> Result<UserErased> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
