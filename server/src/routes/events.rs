//! `/v1/events`, `/v1/import` and `/v1/export`: conversations in, everything out and back.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use chrono::{DateTime, Utc};
use mnemo_kernel::{ConversationEvent, ConversationKind, Event};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::views::IdText;
use super::ApiJson;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::AppState;

/// The most events one request carries.
pub(crate) const MAX_EVENTS: usize = 1_000;

/// A conversation turn.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventBody {
    /// Unique per event: sending it again stores nothing new.
    id: IdText,
    /// Who spoke.
    #[serde(rename = "type")]
    kind: TurnKind,
    /// When it was said.
    at: DateTime<Utc>,
    /// The conversation; users may share session ids, their turns stay apart.
    session_id: IdText,
    /// Whose turn; defaults to the key's user (an admin key must name one here or in
    /// `X-Mnemo-User`).
    user_id: Option<IdText>,
    /// The chat it happens in.
    chat_id: Option<IdText>,
    /// The messaging provider the conversation came through (`telegram`, `slack`...), if any.
    /// Recorded with the session by the user's turn that opens it, and shown in a memory's
    /// provenance; a session keeps the first provider its turns named.
    provider: Option<IdText>,
    /// What was said: not blank, at most the server's `max_content_chars` (20,000 by default;
    /// the maximum here is this server's).
    #[schema(min_length = 1, max_length = 20000)]
    // and `content_pattern()`, by `fit_to_config`
    text: String,
}

/// Who spoke.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TurnKind {
    /// The user.
    UserMessage,
    /// The agent.
    AgentResponse,
}

/// One event, or a batch: the body's schema. The handler reads bodies with [`read_events`],
/// which names the field that is wrong; this type only describes them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum EventsBody {
    /// A batch of up to 1,000 events, stored in order.
    Batch(EventBatch),
    /// One event.
    One(EventBody),
}

/// A batch of events.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventBatch {
    #[schema(min_items = 1, max_items = 1000)]
    events: Vec<EventBody>,
}

/// The events of a request body: `{"events": [...]}` or one event. Read by hand rather than as
/// the untagged [`EventsBody`], whose error names no field ("did not match any variant"): this
/// one names the event and the field, as `events[2].at: input contains invalid characters`.
fn read_events(body: serde_json::Value) -> Result<Vec<EventBody>, ApiError> {
    let batch = body
        .as_object()
        .is_some_and(|object| object.contains_key("events"));
    let events = if batch {
        serde_path_to_error::deserialize::<_, EventBatch>(body).map(|batch| batch.events)
    } else {
        serde_path_to_error::deserialize::<_, EventBody>(body).map(|event| vec![event])
    };
    events.map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." {
            String::new()
        } else {
            format!("{path}: ")
        };
        ApiError::invalid(format!("{field}{}", error.into_inner()))
    })
}

/// What happened to each event, in the order sent.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EventsStored {
    results: Vec<EventStored>,
}

/// One event's acknowledgement: it is on disk.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EventStored {
    /// The event's id.
    id: String,
    /// The memory it became, by this request or by an earlier one that sent the same event
    /// (whose acknowledgement was lost); null for a session command (`/new`), or a memory
    /// forgotten since.
    memory_id: Option<String>,
    /// Whether this request stored it.
    stored: bool,
}

impl Principal {
    /// A conversation event made this caller's: its user is the key's (an admin key's, the one
    /// the event or `X-Mnemo-User` names; `named` is the user the event itself names), and its
    /// chat must be one the key may act in.
    fn own_event(
        &self,
        mut event: ConversationEvent,
        named: Option<&str>,
    ) -> Result<Event, ApiError> {
        event.user_id = match (named, self.user_if_any()) {
            (Some(named), Some(own)) if named != own => {
                return Err(ApiError::forbidden(format!(
                    "event `{}` is `{named}`'s, and this request acts for `{own}`",
                    event.id.as_deref().unwrap_or_default()
                )))
            }
            (Some(named), None) if self.admin => named.to_owned(),
            _ => self.user()?.to_owned(),
        };
        event.chat_id = self.chat(event.chat_id.as_deref())?;
        event.validate()?;
        Ok(event.into_event())
    }
}

impl EventBody {
    /// The wire event, its user left for [`Principal::own_event`] to fill.
    fn into_parts(self) -> (ConversationEvent, Option<String>) {
        let event = ConversationEvent {
            id: Some(self.id.0),
            kind: match self.kind {
                TurnKind::UserMessage => ConversationKind::UserMessage,
                TurnKind::AgentResponse => ConversationKind::AgentResponse,
            },
            at: self.at,
            session_id: self.session_id.0,
            user_id: String::new(),
            chat_id: self.chat_id.map(|chat| chat.0),
            provider: self.provider.map(|provider| provider.0),
            text: self.text,
        };
        (event, self.user_id.map(|user| user.0))
    }
}

/// Store conversation turns. Acknowledged once on disk; idempotent by event id. A batch is
/// checked whole before anything is stored, and stored in one transaction: all of it, or none
/// of it, with one error that names the first bad event.
#[utoipa::path(
    post, path = "/v1/events", tag = "events",
    request_body = EventsBody,
    responses(
        (status = 200, description = "Stored", body = EventsStored),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn post_events(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<axum::Json<EventsStored>, ApiError> {
    let bodies = read_events(body)?;
    if bodies.is_empty() || bodies.len() > MAX_EVENTS {
        return Err(ApiError::invalid(format!(
            "`events` must hold 1 to {MAX_EVENTS} events, not {}",
            bodies.len()
        )));
    }
    let limit = state.memory.limits().max_content_chars;
    let mut events = Vec::with_capacity(bodies.len());
    for (index, body) in bodies.into_iter().enumerate() {
        let chars = body.text.chars().count();
        if chars > limit {
            return Err(ApiError::invalid(format!(
                "events[{index}]: `text` is {chars} characters; the limit is {limit}"
            )));
        }
        if body.text.trim().is_empty() {
            return Err(ApiError::invalid(format!(
                "events[{index}]: `text` must not be blank"
            )));
        }
        let (event, named) = body.into_parts();
        let event = principal
            .own_event(event, named.as_deref())
            .map_err(|error| error.prefixed(&format!("events[{index}]")))?;
        events.push(event);
    }
    check_memberships(
        &state,
        &principal,
        events.iter().filter_map(|event| event.chat_id.as_deref()),
    )
    .await?;
    // One transaction: the whole batch is stored, or none of it. A user's own key cannot make
    // its user a member of a chat; the host and admin keys do.
    let stored = state.memory.ingest_batch(&events, !principal.admin).await?;
    let mut results = Vec::with_capacity(events.len());
    for (event, ingested) in events.into_iter().zip(stored) {
        let id = event.id.clone();
        if ingested.stored {
            if let Err(error) = state
                .kernel
                .publish_except(event, mnemo_memory_api::EXTENSION_NAME)
                .await
            {
                tracing::warn!(%error, "a stored event was not passed on to the other extensions");
            }
        }
        results.push(EventStored {
            id,
            stored: ingested.stored,
            memory_id: ingested.memory_id,
        });
    }
    Ok(axum::Json(EventsStored { results }))
}

/// Checks, before anything is stored, that the caller may write in each of `chats` (the chats
/// a request's events name): a user key not bound to chats writes only where its user is a
/// member.
async fn check_memberships<'a>(
    state: &AppState,
    principal: &Principal,
    chats: impl Iterator<Item = &'a str>,
) -> Result<(), ApiError> {
    let chats: std::collections::BTreeSet<&str> = chats.collect();
    for chat in chats {
        principal
            .chat_as_member(state.memory.as_ref(), Some(chat))
            .await?;
    }
    Ok(())
}

/// What an import did.
#[derive(Debug, Default, Serialize, ToSchema)]
pub(crate) struct ImportReport {
    /// Conversation events stored now.
    events: u64,
    /// Conversation events stored before.
    events_present: u64,
    /// Export rows stored now.
    rows: u64,
    /// Export rows already in the store.
    rows_present: u64,
}

/// Import JSONL: conversation events (as `/v1/events` takes them; an event without `id` gets one
/// from its content), and, with an admin key, the rows of an export. Idempotent. Every line is
/// checked before any is stored: a bad line is named, and nothing is stored.
#[utoipa::path(
    post, path = "/v1/import", tag = "events",
    // Optional: an empty body imports nothing, as an empty export restores nothing.
    request_body(content = Option<String>, content_type = "application/x-ndjson",
        description = "One JSON object per line; none imports nothing"),
    responses(
        (status = 200, description = "Imported", body = ImportReport),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn import(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    body: String,
) -> Result<axum::Json<ImportReport>, ApiError> {
    enum Line {
        Event(Event),
        Row(String, Value),
    }
    let mut lines = Vec::new();
    for (index, text) in body.lines().enumerate() {
        let number = index + 1;
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let at = |message: String| ApiError::invalid(format!("line {number}: {message}"));
        let value: Value =
            serde_json::from_str(trimmed).map_err(|error| at(format!("not JSON: {error}")))?;
        match value.get("type").and_then(Value::as_str) {
            Some("user_message" | "agent_response") => {
                // An event may leave its user to the key.
                let mut value = value;
                if let (Some(object), Some(user)) = (value.as_object_mut(), principal.user_if_any())
                {
                    object
                        .entry("user_id")
                        .or_insert_with(|| Value::String(user.to_owned()));
                }
                let mut event =
                    ConversationEvent::from_value(value).map_err(|error| at(error.to_string()))?;
                if event.id.is_none() {
                    event.id = Some(mnemo_memory_api::content_event_id(&event));
                }
                let named = event.user_id.clone();
                let event = principal
                    .own_event(event, Some(&named))
                    .map_err(|error| error.prefixed(&format!("line {number}")))?;
                lines.push(Line::Event(event));
            }
            Some(table) => {
                if !principal.admin {
                    return Err(ApiError::forbidden(format!(
                        "line {number}: importing `{table}` rows needs an admin key"
                    )));
                }
                lines.push(Line::Row(table.to_owned(), value["row"].clone()));
            }
            None => return Err(at("no `type`".to_owned())),
        }
    }
    let chats = lines.iter().filter_map(|line| match line {
        Line::Event(event) => event.chat_id.as_deref(),
        Line::Row(..) => None,
    });
    check_memberships(&state, &principal, chats).await?;
    let mut report = ImportReport::default();
    for line in lines {
        match line {
            Line::Event(event) => match if principal.admin {
                state.memory.import(&event).await?
            } else {
                state.memory.import_from_user_key(&event).await?
            } {
                Some(_) => {
                    report.events += 1;
                    if let Err(error) = state
                        .kernel
                        .publish_except(event, mnemo_memory_api::EXTENSION_NAME)
                        .await
                    {
                        tracing::warn!(%error, "an imported event was not passed on to the other extensions");
                    }
                }
                None => report.events_present += 1,
            },
            Line::Row(table, row) => {
                if state.memory.import_row(&table, &row).await? {
                    report.rows += 1;
                } else {
                    report.rows_present += 1;
                }
            }
        }
    }
    Ok(axum::Json(report))
}

/// Export as JSONL, lossless (`/v1/import` or `mnemo import` restores it): the caller's rows,
/// or with an admin key and no `X-Mnemo-User`, everyone's. Streamed a line at a time.
#[utoipa::path(
    get, path = "/v1/export", tag = "events",
    responses(
        (status = 200, description = "One JSON object per line",
            content_type = "application/x-ndjson", body = String),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn export(
    State(state): State<Arc<AppState>>,
    principal: Principal,
) -> Result<Response, ApiError> {
    principal.require_whole_user()?;
    let user = if principal.admin {
        principal.user_if_any()
    } else {
        Some(principal.user()?)
    };
    let rows = state.memory.export_rows(user).await?;
    let lines = futures::stream::iter(rows.into_iter().map(|row| {
        let mut line = row.to_string();
        line.push('\n');
        Ok::<_, std::convert::Infallible>(line)
    }));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from_stream(lines))
        .map_err(|error| ApiError::internal(&error))
}
