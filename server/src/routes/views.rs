//! What the API sends and takes: the JSON shapes of memories, hits and requests, with their
//! OpenAPI schemas.

use chrono::{DateTime, Utc};
use mnemo_memory::{Memory, MemoryKind, SearchMode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

/// A memory.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct MemoryView {
    /// `mem_…`.
    pub(crate) id: String,
    pub(crate) kind: KindName,
    pub(crate) content: String,
    pub(crate) user_id: Option<String>,
    pub(crate) chat_id: Option<String>,
    pub(crate) session_id: Option<String>,
    /// Who said it, for conversation turns: `user` or `assistant`.
    pub(crate) source_role: Option<String>,
    /// When it was said or learnt.
    pub(crate) event_time: DateTime<Utc>,
    pub(crate) created_at: DateTime<Utc>,
    /// False once forgotten by decay, corrected or expired.
    pub(crate) active: bool,
    /// 0 to 1; falls as it decays or is contradicted.
    pub(crate) confidence: f64,
    pub(crate) access_count: i64,
    pub(crate) last_accessed: Option<DateTime<Utc>>,
    /// Seed 001's type: `fact`, `context` or `conversation`.
    pub(crate) memory_type: Option<String>,
    pub(crate) expires_at: Option<DateTime<Utc>>,
    /// Seen by everyone in its chat.
    pub(crate) shared: bool,
    pub(crate) tags: Vec<String>,
    /// The memories it was made from (a fact's source turns, a reflection's facts).
    pub(crate) source_ids: Vec<String>,
    /// The people it is about.
    pub(crate) subject_ids: Vec<String>,
    pub(crate) superseded_at: Option<DateTime<Utc>>,
    pub(crate) superseded_by_id: Option<String>,
    pub(crate) attributes: Map<String, Value>,
}

impl From<Memory> for MemoryView {
    fn from(memory: Memory) -> Self {
        Self {
            active: memory.valid_until.is_none(),
            id: memory.id,
            kind: memory.kind.into(),
            content: memory.content,
            user_id: memory.user_id,
            chat_id: memory.chat_id,
            session_id: memory.session_id,
            source_role: memory.source_role,
            event_time: memory.event_time,
            created_at: memory.created_at,
            confidence: memory.confidence,
            access_count: memory.access_count,
            last_accessed: memory.last_accessed,
            memory_type: memory.memory_type,
            expires_at: memory.expires_at,
            shared: memory.shared,
            tags: memory.tags,
            source_ids: memory.source_ids,
            subject_ids: memory.subject_ids,
            superseded_at: memory.superseded_at,
            superseded_by_id: memory.superseded_by_id,
            attributes: memory.attributes,
        }
    }
}

/// A kind of memory.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum KindName {
    /// A conversation turn.
    Episode,
    /// A durable fact.
    Fact,
    /// A reflection over facts.
    Reflection,
}

impl From<MemoryKind> for KindName {
    fn from(kind: MemoryKind) -> Self {
        match kind {
            MemoryKind::Episode => Self::Episode,
            MemoryKind::Fact => Self::Fact,
            MemoryKind::Reflection => Self::Reflection,
        }
    }
}

impl From<KindName> for MemoryKind {
    fn from(kind: KindName) -> Self {
        match kind {
            KindName::Episode => Self::Episode,
            KindName::Fact => Self::Fact,
            KindName::Reflection => Self::Reflection,
        }
    }
}

/// How a search ranks.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ModeName {
    /// Full text, vectors and entities fused.
    #[default]
    Hybrid,
    /// BM25 full text alone.
    Fts,
    /// Vector similarity alone.
    Vector,
    /// Linked entities alone.
    Entity,
}

impl From<ModeName> for SearchMode {
    fn from(mode: ModeName) -> Self {
        match mode {
            ModeName::Hybrid => Self::Hybrid,
            ModeName::Fts => Self::Fts,
            ModeName::Vector => Self::Vector,
            ModeName::Entity => Self::Entity,
        }
    }
}

/// Seed 001's memory types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MemoryTypeName {
    /// A durable fact (the default).
    #[default]
    Fact,
    /// A value for today: kept until the end of the day.
    Context,
    /// A conversation note, kept 30 days.
    Conversation,
}

impl MemoryTypeName {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Fact => "fact",
            Self::Context => "context",
            Self::Conversation => "conversation",
        }
    }
}

/// An id (user, chat, session, event): not blank, no control characters, at most 256 bytes
/// (the schema says 64 characters, which are at most 256 bytes).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct IdText(pub(crate) String);

impl utoipa::PartialSchema for IdText {
    fn schema() -> RefOr<Schema> {
        text_schema(
            64,
            r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$",
        )
    }
}

impl ToSchema for IdText {}

/// A person's name, or how the user calls them ("my wife").
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct NameText(pub(crate) String);

impl utoipa::PartialSchema for NameText {
    fn schema() -> RefOr<Schema> {
        text_schema(200, r"\S")
    }
}

impl ToSchema for NameText {}

/// A string schema: 1 to `max` characters, matching `pattern`.
fn text_schema(max: usize, pattern: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(max))
        .pattern(Some(pattern))
        .into()
}

/// The text of an optional id.
pub(crate) fn id_text(id: &Option<IdText>) -> Option<&str> {
    id.as_ref().map(|id| id.0.as_str())
}
