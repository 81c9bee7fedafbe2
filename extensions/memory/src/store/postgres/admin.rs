//! STUB: to be written (PostgreSQL port of ../sqlite/admin.rs).

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
impl StoreAdmin for PostgresStore {
    async fn close(&self) {}
    async fn check_integrity(&self) -> Result<IntegrityReport> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
