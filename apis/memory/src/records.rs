//! The records a host reads and writes through [`crate::MemoryHost`]: people, owners and their
//! entities, API keys, MCP sessions, and what became of an ingested event.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// A person the owner told us about: an entity of type `person`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Person {
    /// `ent_*`.
    pub id: String,
    /// The user who told us.
    pub owner: String,
    /// Name (the entity's canonical name).
    pub name: String,
    /// How the owner relates to them ("wife", "boss").
    pub relation: Option<String>,
    /// Other names.
    pub aliases: Vec<String>,
    /// Extensible metadata.
    pub metadata: Map<String, Value>,
    /// Stable identity from an outside provider.
    pub external_id: Option<String>,
    /// The provider of `external_id`.
    pub provider: Option<String>,
}

/// The most characters of an external id or its provider.
pub const MAX_EXTERNAL_ID_CHARS: usize = 64;

/// A person's stable identity from an outside provider, e.g. their Telegram user id: the same
/// person whatever name they are called by (seed 000's identity anchoring). Unique among one
/// owner's people; never matched across owners.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExternalId {
    /// Who issued the id: `telegram`, `slack`, ...
    pub provider: String,
    /// The id the provider gave the person.
    pub external_id: String,
}

impl ExternalId {
    /// An external id, trimmed, its provider in lower case (`Telegram` is `telegram`); refused
    /// when either part is blank, longer than [`MAX_EXTERNAL_ID_CHARS`] or holds a control
    /// character.
    ///
    /// # Errors
    /// [`crate::MemoryApiError::Invalid`] naming the part and the problem.
    pub fn new(provider: &str, external_id: &str) -> crate::Result<Self> {
        let check = |field: &str, text: &str| {
            let text = text.trim();
            let chars = text.chars().count();
            if text.is_empty() {
                Err(format!("`{field}` must not be blank"))
            } else if chars > MAX_EXTERNAL_ID_CHARS {
                Err(format!(
                    "`{field}` is {chars} characters; the limit is {MAX_EXTERNAL_ID_CHARS}"
                ))
            } else if text.chars().any(char::is_control) {
                Err(format!("`{field}` must not contain control characters"))
            } else {
                Ok(text.to_owned())
            }
        };
        Ok(Self {
            provider: check("provider", provider)
                .map_err(crate::MemoryApiError::Invalid)?
                .to_lowercase(),
            external_id: check("external_id", external_id)
                .map_err(crate::MemoryApiError::Invalid)?,
        })
    }

    /// The id a person carries, if they carry one whole.
    pub fn of(person: &Person) -> Option<Self> {
        match (&person.provider, &person.external_id) {
            (Some(provider), Some(external_id)) => Some(Self {
                provider: provider.clone(),
                external_id: external_id.clone(),
            }),
            _ => None,
        }
    }
}

impl std::fmt::Display for ExternalId {
    /// `telegram id `12345``, for messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} id `{}`", self.provider, self.external_id)
    }
}

/// Who a fact is about: how the user calls them ("my wife", "Sarah"), their external id, or
/// both. A known external id names its person whatever the name; an unknown one anchors the
/// person the name resolves to (or creates).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Subject {
    /// A name or reference; `None` only with an external id that is known already.
    pub name: Option<String>,
    /// The person's stable id from a provider.
    pub external: Option<ExternalId>,
}

impl Subject {
    /// A subject by name or reference alone.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            external: None,
        }
    }
}

/// An owner of memories, for the admin's list of users.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OwnerSummary {
    /// The user id.
    pub user_id: String,
    /// Their memories of every kind, active or not.
    pub memories: i64,
}

/// One of an owner's entities, for inspection.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EntitySummary {
    /// `ent_*`.
    pub id: String,
    /// Its canonical name.
    pub name: String,
    /// `person`, `project`, `organization`, `location`, `email`, `url`, `date` or `other`.
    pub entity_type: String,
    /// How the owner relates to a person ("wife"), if told.
    pub relation: Option<String>,
    /// Other names it was mentioned by.
    pub aliases: Vec<String>,
    /// The memories linked to it: those that name it, and facts about a person.
    pub memories: i64,
}

/// An API key as stored: its hash, never the key. Kept in the store so that every server on it
/// accepts the same keys, and a revocation reaches them all.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecord {
    /// Names the key: `k` and 12 hex digits.
    pub id: String,
    /// SHA-256 of the whole key, in hex.
    pub hash: String,
    /// The user it acts for; `None` for an admin key.
    pub user_id: Option<String>,
    /// An admin key may act for any user (the `X-Mnemo-User` header) and run jobs.
    pub admin: bool,
    /// The chats it may act in; empty for any chat and the user's own memory outside chats.
    pub chats: Vec<String>,
    /// A note for people (who holds it).
    pub label: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; it grants nothing from then on.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An MCP session over HTTP as stored: who opened it, and what a server needs to restore it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSessionRecord {
    /// The API key that opened it; `None` until its first answer was sent.
    pub key_id: Option<String>,
    /// The client's `initialize` parameters, as JSON.
    pub initialize: Option<String>,
}

/// What became of one event of [`crate::MemoryHost::ingest_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestedEvent {
    /// The memory it became, now or when it was first stored (a resend whose acknowledgement
    /// was lost); `None` for a session command, or a memory forgotten since.
    pub memory_id: Option<String>,
    /// Whether this call stored it.
    pub stored: bool,
}

/// The id of an event that came without one: `imp_` and the SHA-256 of what it says (type,
/// time, user, chat, session, text), so that importing the same file again finds it stored,
/// and the memory extension's own handler skips it when it is published. `mnemo import` and
/// the server's `/v1/import` give it to events without an id.
pub fn content_event_id(event: &mnemo_kernel::ConversationEvent) -> String {
    use sha2::Digest as _;
    // A JSON array: each part is delimited, so no two different events give the same bytes.
    let parts = serde_json::json!([
        event.kind,
        event.at.to_rfc3339(),
        event.user_id,
        event.chat_id,
        event.session_id,
        event.text
    ]);
    let digest = sha2::Sha256::digest(parts.to_string().as_bytes());
    let mut id = String::with_capacity(4 + 2 * digest.len());
    id.push_str("imp_");
    for byte in digest {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}
