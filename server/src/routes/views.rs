//! What the API sends and takes: the JSON shapes of memories, hits and requests, with their
//! OpenAPI schemas.

use chrono::{DateTime, Utc};
use mnemo_memory_api::{Memory, MemoryKind, Origin, Quarantine};
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
    pub(crate) kind: MemoryKind,
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
    /// When decay faded it out of the context (search still finds it; a recall brings it back).
    pub(crate) faded_at: Option<DateTime<Utc>>,
    /// Why the memory screen holds it back from the agent's context, if it does: its text
    /// carries instructions aimed at the agent, hidden characters or an imitated tool call.
    /// Released by `POST /v1/memories/{id}/release`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) quarantine: Option<Quarantine>,
    /// Whose words it is: `user`, `agent`, `told`, `inferred`, `reflected`, `imported` or
    /// `service`. Search weighs it by this (`why.origin_weight`).
    pub(crate) origin: Origin,
    /// Since when it is true in the world, where known (else when it was said).
    pub(crate) valid_from: Option<DateTime<Utc>>,
    /// Until when it was true: a newer fact replaced it, or (equal to `valid_from`) a
    /// correction showed it never was. Absent while it holds.
    pub(crate) valid_to: Option<DateTime<Utc>>,
    pub(crate) attributes: Map<String, Value>,
}

impl From<Memory> for MemoryView {
    fn from(memory: Memory) -> Self {
        Self {
            active: memory.valid_until.is_none(),
            id: memory.id,
            kind: memory.kind,
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
            faded_at: memory.faded_at,
            quarantine: memory.quarantine,
            origin: memory.origin,
            valid_from: memory.valid_from,
            valid_to: memory.valid_to,
            attributes: memory.attributes,
        }
    }
}

/// The characters Rust's `str::trim` takes for white space, spelt out: `\s` means other sets in
/// other regex engines (ECMAScript adds U+FEFF; Python adds U+001C to U+001F).
const SPACE: &str = r"\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// The most characters of an id the API takes (at most 256 bytes, the kernel's limit).
pub(crate) const MAX_ID_CHARS: usize = 64;

/// An id (user, chat, session, event): not blank, no control characters, 1 to 64 characters
/// (so at most 256 bytes, the kernel's limit). Checked as it is read, so that the schema and the
/// server agree on every id field.
#[derive(Debug, Clone)]
pub(crate) struct IdText(pub(crate) String);

impl<'de> Deserialize<'de> for IdText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let chars = text.chars().count();
        if chars > MAX_ID_CHARS {
            return Err(serde::de::Error::custom(format!(
                "an id is at most {MAX_ID_CHARS} characters; this one is {chars}"
            )));
        }
        if text.trim().is_empty() {
            return Err(serde::de::Error::custom("an id must not be blank"));
        }
        if text.chars().any(char::is_control) {
            return Err(serde::de::Error::custom(
                "an id must not contain control characters",
            ));
        }
        Ok(Self(text))
    }
}

impl utoipa::PartialSchema for IdText {
    fn schema() -> RefOr<Schema> {
        let control = r"\u0000-\u001f\u007f-\u009f";
        text_schema(
            MAX_ID_CHARS,
            &format!("^[^{control}]*[^{SPACE}{control}][^{control}]*$"),
        )
    }
}

impl ToSchema for IdText {}

/// The pattern of a text the memory stores (content, turns): not blank, no NUL character.
pub(crate) fn content_pattern() -> String {
    format!(r"^[^\u0000]*[^{SPACE}\u0000][^\u0000]*$")
}

/// The most characters of a person's name.
const MAX_NAME_CHARS: usize = 200;

/// A person's name, or how the user calls them ("my wife"): not blank, no NUL character, 1 to
/// 200 characters; checked as it is read.
#[derive(Debug, Clone)]
pub(crate) struct NameText(pub(crate) String);

impl<'de> Deserialize<'de> for NameText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let chars = text.chars().count();
        if chars > MAX_NAME_CHARS {
            return Err(serde::de::Error::custom(format!(
                "a name is at most {MAX_NAME_CHARS} characters; this one is {chars}"
            )));
        }
        if text.trim().is_empty() {
            return Err(serde::de::Error::custom("a name must not be blank"));
        }
        if text.contains('\0') {
            return Err(serde::de::Error::custom(
                "a name must not contain a NUL character",
            ));
        }
        Ok(Self(text))
    }
}

impl utoipa::PartialSchema for NameText {
    fn schema() -> RefOr<Schema> {
        text_schema(MAX_NAME_CHARS, &content_pattern())
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

/// Reads an optional count as JSON Schema's `integer` has it: `15` and `15.0` alike.
pub(crate) fn whole_number<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<usize>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|value| value.fract() == 0.0 && *value >= 0.0 && *value <= u64::MAX as f64)
            .map(|value| value as u64)
    });
    whole
        .and_then(|value| usize::try_from(value).ok())
        .map(Some)
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected a whole number of 0 or more, not {number}"
            ))
        })
}

/// The text of an optional id.
pub(crate) fn id_text(id: &Option<IdText>) -> Option<&str> {
    id.as_ref().map(|id| id.0.as_str())
}

/// Who a memory is about: a name or how the user calls them ("my wife", "Sarah"), or a person
/// with their stable id on a messaging platform, the same person whatever name they go by
/// (seed 000's identity anchoring).
#[derive(Debug, Clone, ToSchema)]
#[serde(untagged)]
pub(crate) enum SubjectBody {
    /// A name or reference.
    Name(NameText),
    /// A person by their external id.
    Anchored(AnchoredSubject),
}

/// A person with their id on a messaging platform: a known id names its person (a new `name`
/// becomes an alias); an unknown one anchors the person `name` resolves to, or a new one.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnchoredSubject {
    /// How the user calls them; needed the first time the id is given.
    pub(crate) name: Option<NameText>,
    /// Their id on the platform, e.g. a Telegram user id; unique among the user's people.
    pub(crate) external_id: IdText,
    /// The platform: `telegram`, `slack`, ... (compared in lower case).
    pub(crate) provider: IdText,
}

impl<'de> Deserialize<'de> for SubjectBody {
    /// A string is a name, an object a person by external id; anything else is refused saying
    /// what a subject may be.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        match Value::deserialize(deserializer)? {
            text @ Value::String(_) => NameText::deserialize(text)
                .map(Self::Name)
                .map_err(D::Error::custom),
            object @ Value::Object(_) => AnchoredSubject::deserialize(object)
                .map(Self::Anchored)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "a subject is a name or an object with `external_id` and `provider` (and \
                 `name`), not `{other}`"
            ))),
        }
    }
}

impl SubjectBody {
    /// The subject as the memory takes it.
    ///
    /// # Errors
    /// The external id is not one ([`mnemo_memory_api::ExternalId::new`]).
    pub(crate) fn subject(self) -> mnemo_memory_api::Result<mnemo_memory_api::Subject> {
        Ok(match self {
            Self::Name(name) => mnemo_memory_api::Subject::named(name.0),
            Self::Anchored(anchored) => mnemo_memory_api::Subject {
                name: anchored.name.map(|name| name.0),
                external: Some(mnemo_memory_api::ExternalId::new(
                    &anchored.provider.0,
                    &anchored.external_id.0,
                )?),
            },
        })
    }
}
