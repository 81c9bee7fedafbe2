//! The entity-extraction service's API: what the `ner` extension publishes in the kernel's
//! `Services` as `dyn NerApi`, and the entity types that callers (the memory extension) store,
//! without depending on the implementation.
#![warn(missing_docs)]

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Kinds of entity, as stored in the memory extension's `entities.type` (and as tool arguments
/// name them, hence its schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntityType {
    /// A person (also @mentions).
    Person,
    /// A project (also #hashtags).
    Project,
    /// A company, school, team.
    Organization,
    /// A place.
    Location,
    /// An e-mail address.
    Email,
    /// A URL.
    Url,
    /// A date.
    Date,
    /// Anything else.
    Other,
}

impl EntityType {
    /// The lowercase name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityType::Person => "person",
            EntityType::Project => "project",
            EntityType::Organization => "organization",
            EntityType::Location => "location",
            EntityType::Email => "email",
            EntityType::Url => "url",
            EntityType::Date => "date",
            EntityType::Other => "other",
        }
    }

    /// Parses a stored name; unknown names are `Other`.
    pub fn parse(name: &str) -> Self {
        match name {
            "person" => EntityType::Person,
            "project" => EntityType::Project,
            "organization" => EntityType::Organization,
            "location" => EntityType::Location,
            "email" => EntityType::Email,
            "url" => EntityType::Url,
            "date" => EntityType::Date,
            _ => EntityType::Other,
        }
    }
}

/// One entity found in a text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedEntity {
    /// The text as it appears (`@Dana`, `Sarah`, `ACME Ltd`).
    pub surface: String,
    /// The normalised name entities are matched on (`Dana`, `sarah@example.com`, `2026-03-01`).
    pub canonical: String,
    /// What kind of entity it is.
    pub entity_type: EntityType,
    /// Byte offset of the start of `surface` in the text.
    pub start: usize,
    /// Byte offset just past the end of `surface`.
    pub end: usize,
    /// 0.0 to 1.0.
    pub confidence: f32,
    /// For people: how the speaker relates to them ("wife", "boss"), when the text says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<String>,
    /// Which provider found it (`regex`, `pattern`, `llm`).
    pub provider: String,
}

/// Which providers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The fast providers (regex + pattern); no I/O, for the hot path.
    Fast,
    /// Every available provider, including the LLM; for nightly enrichment.
    Accurate,
}

/// Why extraction failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NerError {
    /// A provider beyond the fast ones failed (e.g. the LLM); fast results are still available.
    #[error("ner provider `{provider}` failed: {reason}")]
    Provider {
        /// The provider.
        provider: String,
        /// Why.
        reason: String,
    },
}

/// Named-entity extraction. Pure: text in, entities out, merged by span overlap
/// (highest confidence, then longest span wins), sorted by start offset.
#[async_trait]
pub trait NerApi: Send + Sync + 'static {
    /// The fast strategy, synchronously: regex and pattern providers, no I/O, microseconds.
    fn extract_fast(&self, text: &str) -> Vec<ExtractedEntity>;

    /// Runs a strategy.
    ///
    /// # Errors
    /// [`NerError`] when a slow provider fails.
    async fn extract(
        &self,
        text: &str,
        strategy: Strategy,
    ) -> Result<Vec<ExtractedEntity>, NerError>;

    /// True only when a provider beyond the fast ones (the LLM) is configured and usable.
    fn accurate_available(&self) -> bool;
}
