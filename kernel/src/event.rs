//! Typed events on the bus, and the conversation-event wire format.

use chrono::{DateTime, Utc};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;

/// Topic of a user's message to the agent.
pub const TOPIC_USER_MESSAGE: &str = "user_message";
/// Topic of the agent's reply to the user.
pub const TOPIC_AGENT_RESPONSE: &str = "agent_response";

/// Longest id (event, session, user, chat) the kernel accepts, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// One event on the bus: an envelope with ids and time, and a typed payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unique id; given on the wire or assigned by the router (`evt_<run>_<n>`, unique across runs).
    pub id: String,
    /// The event that caused this one, if any.
    pub parent_id: Option<String>,
    /// When the event happened, by the kernel's clock or as recorded on the wire.
    pub at: DateTime<Utc>,
    /// The conversation session the event belongs to.
    pub session_id: Option<String>,
    /// The user the event belongs to.
    pub user_id: Option<String>,
    /// The chat (group, channel) the event belongs to.
    pub chat_id: Option<String>,
    /// The messaging provider the conversation came through (`telegram`, `slack`...), if the
    /// host names one; the memory records it with the session the event opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// What happened.
    pub payload: EventPayload,
}

/// What an event says. Closed for the kernel's own topics; extensions use [`EventPayload::Custom`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventPayload {
    /// The user said something to the agent.
    UserMessage {
        /// The message text.
        text: String,
    },
    /// The agent answered.
    AgentResponse {
        /// The reply text.
        text: String,
    },
    /// An event defined by an extension, such as `memory.session_completed`.
    Custom {
        /// The topic, by convention `<extension>.<fact_in_past_tense>`.
        topic: String,
        /// The event's data; see [`TypedEvent`] for a typed view.
        data: Value,
    },
}

impl EventPayload {
    /// The topic subscribers select on.
    pub fn topic(&self) -> &str {
        match self {
            EventPayload::UserMessage { .. } => TOPIC_USER_MESSAGE,
            EventPayload::AgentResponse { .. } => TOPIC_AGENT_RESPONSE,
            EventPayload::Custom { topic, .. } => topic,
        }
    }

    /// The text of a conversation event.
    pub fn text(&self) -> Option<&str> {
        match self {
            EventPayload::UserMessage { text } | EventPayload::AgentResponse { text } => Some(text),
            EventPayload::Custom { .. } => None,
        }
    }
}

/// An event type defined by an extension, carried as [`EventPayload::Custom`].
///
/// ```
/// use mnemo_kernel::{Event, TypedEvent};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct NoteAdded { note_id: u64 }
/// impl TypedEvent for NoteAdded { const TOPIC: &'static str = "notes.note_added"; }
///
/// let event = Event::new(chrono::Utc::now(), NoteAdded { note_id: 7 }.to_payload().unwrap());
/// assert_eq!(event.topic(), "notes.note_added");
/// assert_eq!(event.decode::<NoteAdded>().unwrap().unwrap().note_id, 7);
/// ```
pub trait TypedEvent: Serialize + DeserializeOwned {
    /// The topic this event is published under.
    const TOPIC: &'static str;

    /// This event as a payload for [`Event::new`].
    ///
    /// # Errors
    /// [`EventError::Unserialisable`] when the value cannot be written as JSON (a map with
    /// non-string keys, a failing custom `Serialize`); nothing is published then.
    fn to_payload(&self) -> Result<EventPayload, EventError> {
        let data = serde_json::to_value(self).map_err(|error| EventError::Unserialisable {
            topic: Self::TOPIC,
            reason: error.to_string(),
        })?;
        Ok(EventPayload::Custom {
            topic: Self::TOPIC.to_owned(),
            data,
        })
    }
}

impl Event {
    /// An event at `at` with no ids; the router assigns the id when it is published.
    pub fn new(at: DateTime<Utc>, payload: EventPayload) -> Self {
        Self {
            id: String::new(),
            parent_id: None,
            at,
            session_id: None,
            user_id: None,
            chat_id: None,
            provider: None,
            payload,
        }
    }

    /// Sets the session, user and chat ids.
    pub fn with_scope(
        mut self,
        session_id: Option<String>,
        user_id: Option<String>,
        chat_id: Option<String>,
    ) -> Self {
        self.session_id = session_id;
        self.user_id = user_id;
        self.chat_id = chat_id;
        self
    }

    /// Sets the messaging provider the conversation came through (`telegram`).
    pub fn with_provider(mut self, provider: Option<String>) -> Self {
        self.provider = provider;
        self
    }

    /// Sets the causing event.
    pub fn with_parent(mut self, parent_id: impl Into<String>) -> Self {
        self.parent_id = Some(parent_id.into());
        self
    }

    /// The topic subscribers select on.
    pub fn topic(&self) -> &str {
        self.payload.topic()
    }

    /// The payload as `T`, if this event has `T`'s topic.
    pub fn decode<T: TypedEvent>(&self) -> Option<Result<T, serde_json::Error>> {
        match &self.payload {
            EventPayload::Custom { topic, data } if topic == T::TOPIC => {
                Some(serde_json::from_value(data.clone()))
            }
            _ => None,
        }
    }
}

/// Which side of the conversation spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationKind {
    /// The user.
    UserMessage,
    /// The agent.
    AgentResponse,
}

/// A conversation event on the wire: one JSON object per line, read by replay and import.
///
/// `{"id": "optional", "type": "user_message" | "agent_response", "at": "RFC 3339",
///   "session_id": "...", "user_id": "...", "chat_id": "optional", "provider": "optional",
///   "text": "..."}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationEvent {
    /// Optional unique id of the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Who spoke.
    #[serde(rename = "type")]
    pub kind: ConversationKind,
    /// When it was said.
    pub at: DateTime<Utc>,
    /// The conversation session.
    pub session_id: String,
    /// The user.
    pub user_id: String,
    /// The chat, if the conversation happens in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// The messaging provider the conversation came through (`telegram`), if any: checked as
    /// an id is, and recorded with the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// What was said.
    pub text: String,
}

/// Why a conversation event was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The JSON did not match the wire format.
    #[error("invalid conversation event: {0}")]
    Malformed(String),
    /// A required id is empty.
    #[error("field `{0}` must not be empty")]
    EmptyField(&'static str),
    /// The text cannot be stored as it is.
    #[error("field `text` is not valid: {0}")]
    BadText(String),
    /// An id is too long or holds control characters.
    #[error("field `{field}` is not a valid id: {reason}")]
    BadId {
        /// The offending field.
        field: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A typed event could not be written as JSON.
    #[error("event `{topic}` cannot be written as JSON: {reason}")]
    Unserialisable {
        /// The event's topic.
        topic: &'static str,
        /// Why.
        reason: String,
    },
}

impl ConversationEvent {
    /// Parses one wire line and validates it.
    ///
    /// # Errors
    /// [`EventError::Malformed`] naming the JSON problem, or a validation error naming the field.
    pub fn parse(line: &str) -> Result<Self, EventError> {
        let event: Self =
            serde_json::from_str(line).map_err(|err| EventError::Malformed(err.to_string()))?;
        event.validate()?;
        Ok(event)
    }

    /// Parses an already-decoded JSON value and validates it.
    ///
    /// # Errors
    /// As [`ConversationEvent::parse`].
    pub fn from_value(value: Value) -> Result<Self, EventError> {
        let event: Self =
            serde_json::from_value(value).map_err(|err| EventError::Malformed(err.to_string()))?;
        event.validate()?;
        Ok(event)
    }

    /// Checks every id by [`check_id`] (the optional `id`, `chat_id` and `provider` too, when
    /// present) and that the text holds no NUL character.
    ///
    /// # Errors
    /// The first field that is invalid.
    pub fn validate(&self) -> Result<(), EventError> {
        check_id("session_id", &self.session_id)?;
        check_id("user_id", &self.user_id)?;
        if let Some(chat_id) = &self.chat_id {
            check_id("chat_id", chat_id)?;
        }
        if let Some(id) = &self.id {
            check_id("id", id)?;
        }
        if let Some(provider) = &self.provider {
            check_id("provider", provider)?;
        }
        if self.text.contains('\0') {
            return Err(EventError::BadText(
                "it contains a NUL character".to_owned(),
            ));
        }
        Ok(())
    }

    /// The bus event for this conversation event.
    pub fn into_event(self) -> Event {
        let payload = match self.kind {
            ConversationKind::UserMessage => EventPayload::UserMessage { text: self.text },
            ConversationKind::AgentResponse => EventPayload::AgentResponse { text: self.text },
        };
        Event {
            id: self.id.unwrap_or_default(),
            parent_id: None,
            at: self.at,
            session_id: Some(self.session_id),
            user_id: Some(self.user_id),
            chat_id: self.chat_id,
            provider: self.provider,
            payload,
        }
    }
}

/// The one rule for every id that names an event, a user, a chat, a session or a messaging
/// provider, wherever it comes from (the wire, a tool call's scope, the command line): not empty
/// or blank, at most [`MAX_ID_BYTES`] bytes, no control characters (tabs and newlines included).
///
/// # Errors
/// [`EventError::EmptyField`] or [`EventError::BadId`], naming `field`.
pub fn check_id(field: &'static str, id: &str) -> Result<(), EventError> {
    if id.trim().is_empty() {
        return Err(EventError::EmptyField(field));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(EventError::BadId {
            field,
            reason: format!("{} bytes, the limit is {MAX_ID_BYTES}", id.len()),
        });
    }
    if id.chars().any(char::is_control) {
        return Err(EventError::BadId {
            field,
            reason: "it contains control characters".to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_wire_event() {
        let line = r#"{"type":"user_message","at":"2026-03-01T10:00:00Z","session_id":"s1","user_id":"u1","text":"hi"}"#;
        let event = ConversationEvent::parse(line).unwrap().into_event();
        assert_eq!(event.topic(), TOPIC_USER_MESSAGE);
        assert_eq!(event.payload.text(), Some("hi"));
        assert_eq!(event.session_id.as_deref(), Some("s1"));
    }

    /// One id rule everywhere: an empty event or chat id is refused, not stored as an id or a
    /// chat; a user id with a tab or over the limit is refused as on every other path.
    #[test]
    fn every_id_follows_one_rule() {
        let line = |field: &str, value: &str| {
            let mut event = serde_json::json!({"type": "user_message",
                "at": "2026-03-01T10:00:00Z", "session_id": "s1", "user_id": "u1", "text": "hi"});
            event[field] = Value::String(value.to_owned());
            ConversationEvent::parse(&event.to_string())
        };
        assert_eq!(line("id", "").unwrap_err(), EventError::EmptyField("id"));
        assert_eq!(
            line("chat_id", " ").unwrap_err(),
            EventError::EmptyField("chat_id")
        );
        assert!(matches!(
            line("user_id", "a\tb"),
            Err(EventError::BadId {
                field: "user_id",
                ..
            })
        ));
        assert!(matches!(
            line("user_id", &"u".repeat(MAX_ID_BYTES + 1)),
            Err(EventError::BadId {
                field: "user_id",
                ..
            })
        ));
        assert!(line("user_id", &"u".repeat(MAX_ID_BYTES)).is_ok());
        let scope = crate::ToolScope {
            user_id: "u".repeat(100_000),
            session_id: None,
            chat_id: Some(String::new()),
            at: Utc::now(),
            caller: crate::ToolCaller::Client,
        };
        assert!(scope.validate().is_err());
    }

    /// A provider is optional, carried to the bus event, and checked as an id is: an over-long
    /// one or one with control characters is refused, naming `provider`.
    #[test]
    fn provider_is_optional_and_checked() {
        let line = |provider: Value| {
            let mut event = serde_json::json!({"type": "user_message",
                "at": "2026-03-01T10:00:00Z", "session_id": "s1", "user_id": "u1", "text": "hi"});
            if !provider.is_null() {
                event["provider"] = provider;
            }
            ConversationEvent::parse(&event.to_string())
        };
        assert_eq!(line(Value::Null).unwrap().into_event().provider, None);
        let event = line(Value::from("telegram")).unwrap();
        // The wire form writes it back: an event read and written is the same.
        assert!(serde_json::to_string(&event)
            .unwrap()
            .contains(r#""provider":"telegram""#));
        assert_eq!(event.into_event().provider.as_deref(), Some("telegram"));
        for bad in ["t".repeat(300), "tele\ngram".to_owned(), " ".to_owned()] {
            let error = line(Value::from(bad.clone())).unwrap_err();
            assert!(error.to_string().contains("`provider`"), "{bad:?}: {error}");
        }
    }

    #[test]
    fn rejects_bad_events_with_named_problem() {
        let unknown = r#"{"type":"user_message","at":"2026-03-01T10:00:00Z","session_id":"s1","user_id":"u1","text":"hi","colour":1}"#;
        let err = ConversationEvent::parse(unknown).unwrap_err().to_string();
        assert!(err.contains("colour"), "{err}");
        let empty = r#"{"type":"user_message","at":"2026-03-01T10:00:00Z","session_id":" ","user_id":"u1","text":"hi"}"#;
        assert_eq!(
            ConversationEvent::parse(empty).unwrap_err(),
            EventError::EmptyField("session_id")
        );
        let bad_time = r#"{"type":"user_message","at":"yesterday","session_id":"s","user_id":"u1","text":"hi"}"#;
        assert!(ConversationEvent::parse(bad_time).is_err());
        let nul = "{\"type\":\"agent_response\",\"at\":\"2026-03-01T10:00:00Z\",\"session_id\":\"s\\u0000\",\"user_id\":\"u1\",\"text\":\"hi\"}";
        assert!(matches!(
            ConversationEvent::parse(nul),
            Err(EventError::BadId {
                field: "session_id",
                ..
            })
        ));
    }
}
