//! STUB: to be written (PostgreSQL port of ../sqlite/export.rs).

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
impl MemoryExport for PostgresStore {
    async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn import_row(&self, table: &str, row: &Value) -> Result<bool> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
