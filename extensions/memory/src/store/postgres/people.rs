//! STUB: to be written (PostgreSQL port of ../sqlite/people.rs).

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
impl PeopleRecords for PostgresStore {
    async fn person_by_relation(&self, owner: &str, relation: &str) -> Result<Option<Person>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn person_by_name(&self, owner: &str, name: &str) -> Result<Option<Person>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn upsert_person(
        &self,
        owner: &str,
        name: &str,
        relation: Option<&str>,
    ) -> Result<Person> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn rename_person(&self, person: &Person, name: &str) -> Result<()> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
    async fn known_people(&self, owner: &str) -> Result<Vec<Person>> {
        Err(MemoryError::Invalid("not written yet".into()))
    }
}
