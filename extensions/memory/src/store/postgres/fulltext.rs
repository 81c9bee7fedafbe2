//! STUB: to be written (PostgreSQL port of ../sqlite/fulltext.rs).

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
impl FullTextIndex for PostgresStore {
    async fn fts_best_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn fts_all_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn fts_document_count(&self) -> Result<i64> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn fts_match_count(&self, query: &str) -> Result<i64> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
