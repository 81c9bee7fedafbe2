//! `/v1/memories`: remember, list, get, forget, correct and confirm.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use mnemo_kernel::ToolScope;
use mnemo_memory_api::{ForgetReceipt, ListRequest, Memory, MemoryKind, MemoryType};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::views::{id_text, IdText, MemoryView, SubjectBody};
use super::{ApiJson, ApiPath, ApiQuery};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::AppState;

/// The most memories one page lists.
pub(crate) const MAX_PAGE: usize = 1_000;
/// The largest `offset` of a listing.
const MAX_OFFSET: usize = 1_000_000_000;
/// The most subjects one memory names.
const MAX_SUBJECTS: usize = 16;

/// What to remember.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RememberBody {
    /// The fact, in a sentence.
    #[schema(min_length = 1, max_length = 20000)]
    // and `content_pattern()`, by `fit_to_config`
    content: String,
    /// Who it is about ("my wife", "Sarah"), or a person by their id on a messaging platform
    /// (`{"name": "Sarah", "external_id": "12345", "provider": "telegram"}`): each becomes a
    /// person in the user's registry. A known external id names its person whatever the name
    /// (a new name becomes an alias); one that anchors another of the user's people, or a
    /// person already carrying another, is refused and nothing is stored.
    #[serde(default)]
    #[schema(max_items = 16)]
    subjects: Vec<SubjectBody>,
    /// `fact` (default, permanent until it decays), `context` (until the end of the day) or
    /// `conversation` (30 days).
    #[serde(default, rename = "type")]
    memory_type: MemoryType,
    /// When it expires (facts only); must be in the future.
    expires_at: Option<DateTime<Utc>>,
    /// The chat it is said in: it belongs to that chat.
    chat_id: Option<IdText>,
    /// Seen by everyone in the chat (needs `chat_id`).
    #[serde(default)]
    shared: bool,
}

/// A memory made.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Remembered {
    pub(crate) id: String,
    /// The people it was linked to, by name.
    pub(crate) subjects: Vec<String>,
}

/// Remember a fact for the caller.
#[utoipa::path(
    post, path = "/v1/memories", tag = "memories",
    request_body = RememberBody,
    responses(
        (status = 201, description = "Stored", body = Remembered),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn remember(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiJson(body): ApiJson<RememberBody>,
) -> Result<(StatusCode, axum::Json<Remembered>), ApiError> {
    let chat = principal
        .chat_as_member(state.memory.as_ref(), id_text(&body.chat_id))
        .await?;
    let scope = state.scope(principal.user()?, chat);
    if body.subjects.len() > MAX_SUBJECTS {
        return Err(ApiError::invalid(format!(
            "`subjects` has {} names; the limit is {MAX_SUBJECTS}",
            body.subjects.len()
        )));
    }
    if body.shared && scope.chat_id.is_none() {
        return Err(ApiError::invalid("`shared` needs a `chat_id`"));
    }
    let subjects = body
        .subjects
        .into_iter()
        .map(SubjectBody::subject)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| ApiError::invalid(format!("`subjects`: {error}")))?;
    let remembered = if body.memory_type == MemoryType::Fact {
        let (id, subjects) = state
            .memory
            .remember(
                &scope,
                &body.content,
                &subjects,
                body.expires_at,
                body.shared,
            )
            .await?;
        Remembered { id, subjects }
    } else {
        if !subjects.is_empty() || body.expires_at.is_some() || body.shared {
            return Err(ApiError::invalid(format!(
                "`subjects`, `expires_at` and `shared` are for facts; a `{}` memory expires by its type",
                body.memory_type.as_str()
            )));
        }
        let id = state
            .memory
            .store_typed(
                &scope,
                body.memory_type,
                &body.content,
                serde_json::Map::new(),
            )
            .await?;
        Remembered {
            id,
            subjects: Vec::new(),
        }
    };
    Ok((StatusCode::CREATED, axum::Json(remembered)))
}

/// Which memories to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only the caller's memories kept in this chat; without it, every scope of theirs.
    chat_id: Option<IdText>,
    /// Only this kind.
    kind: Option<MemoryKind>,
    /// Also forgotten, corrected and expired memories.
    #[serde(default)]
    include_inactive: bool,
    /// Only quarantined memories: those the memory screen holds back from the agent's context.
    #[serde(default)]
    quarantined: bool,
    /// Only memories said or learnt from then on.
    since: Option<DateTime<Utc>>,
    /// Only memories said or learnt before then.
    until: Option<DateTime<Utc>>,
    /// Only memories linked to this entity or person (`ent_…`, from `/v1/entities` or
    /// `/v1/people`).
    entity_id: Option<IdText>,
    /// Page size, 1 to 1000 (default 50).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// Memories to skip (the previous page's `next_offset`), at most 1,000,000,000.
    #[param(minimum = 0, maximum = 1000000000)] // MAX_OFFSET
    offset: Option<usize>,
}

/// A page of memories.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct MemoryPage {
    /// Newest first.
    memories: Vec<MemoryView>,
    /// The `offset` of the next page; null on the last.
    next_offset: Option<usize>,
}

/// The caller's memories, newest first, a page at a time.
#[utoipa::path(
    get, path = "/v1/memories", tag = "memories",
    params(ListQuery),
    responses(
        (status = 200, description = "A page", body = MemoryPage),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<axum::Json<MemoryPage>, ApiError> {
    let chat = principal
        .chat_as_member(state.memory.as_ref(), id_text(&query.chat_id))
        .await?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "`limit` must be between 1 and {MAX_PAGE}, not {limit}"
        )));
    }
    if let (Some(since), Some(until)) = (query.since, query.until) {
        if since >= until {
            return Err(ApiError::invalid(format!(
                "`since` ({since}) must be before `until` ({until})"
            )));
        }
    }
    let offset = query.offset.unwrap_or(0);
    if offset > MAX_OFFSET {
        return Err(ApiError::invalid(format!(
            "`offset` must be at most {MAX_OFFSET}, not {offset}"
        )));
    }
    let request = ListRequest {
        user_id: principal.user()?.to_owned(),
        chat_id: chat,
        kinds: query.kind.into_iter().collect(),
        include_inactive: query.include_inactive,
        since: query.since,
        until: query.until,
        entity_id: id_text(&query.entity_id).map(str::to_owned),
        quarantined: query.quarantined,
        limit,
        offset,
    };
    let memories = state.memory.list_memories(request.clone()).await?;
    // A full page may have a next one; one more memory past it says. (Not `limit + 1` in one
    // go: the memory service lists at most MAX_PAGE.)
    let next_offset = if memories.len() == limit {
        let next = state
            .memory
            .list_memories(ListRequest {
                limit: 1,
                offset: offset + limit,
                ..request
            })
            .await?;
        (!next.is_empty()).then_some(offset + limit)
    } else {
        None
    };
    Ok(axum::Json(MemoryPage {
        memories: memories.into_iter().map(MemoryView::from).collect(),
        next_offset,
    }))
}

/// The chat a memory is read in.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ChatQuery {
    /// The chat the caller is in: a memory shared there is visible too.
    pub(crate) chat_id: Option<IdText>,
}

/// One memory of the caller's (or shared in the caller's chat), active or not.
#[utoipa::path(
    get, path = "/v1/memories/{id}", tag = "memories",
    params(("id" = String, Path, description = "The memory's id"), ChatQuery),
    responses(
        (status = 200, description = "The memory", body = MemoryView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ChatQuery>,
) -> Result<axum::Json<MemoryView>, ApiError> {
    let chat = principal
        .chat_as_member(state.memory.as_ref(), id_text(&query.chat_id))
        .await?;
    let memory = visible_memory(&state, &principal, &id, chat.as_deref()).await?;
    Ok(axum::Json(memory.into()))
}

/// The memory `id` if the caller may see it: their own (personal, or in a chat their key may
/// act in), or shared in `chat`. Anything else is "not found", so that ids of others' memories reveal
/// nothing.
pub(crate) async fn visible_memory(
    state: &AppState,
    principal: &Principal,
    id: &str,
    chat: Option<&str>,
) -> Result<Memory, ApiError> {
    let not_found = || ApiError::not_found(format!("no memory `{id}` of yours"));
    let memory = state.memory.get_memory(id).await?.ok_or_else(not_found)?;
    if may_see(principal, &memory, chat)? {
        Ok(memory)
    } else {
        Err(not_found())
    }
}

/// Whether the caller may see `memory` from `chat`: their own, in a scope their key may read,
/// or shared in the chat they are in.
pub(crate) fn may_see(
    principal: &Principal,
    memory: &Memory,
    chat: Option<&str>,
) -> Result<bool, ApiError> {
    let user = principal.user()?;
    let own =
        memory.user_id.as_deref() == Some(user) && principal.may_read(memory.chat_id.as_deref());
    let shared_here = memory.shared && chat.is_some() && memory.chat_id.as_deref() == chat;
    Ok(own || shared_here)
}

/// The memory `id` if it is the caller's own fact, to correct or confirm.
async fn own_fact(
    state: &AppState,
    principal: &Principal,
    id: &str,
    change: &str,
) -> Result<Memory, ApiError> {
    let memory = own_memory(state, principal, id).await?;
    if memory.kind == MemoryKind::Fact {
        Ok(memory)
    } else {
        Err(ApiError::invalid(format!(
            "`{id}` is {} {}; only facts can be {change}",
            if memory.kind == MemoryKind::Episode {
                "an"
            } else {
                "a"
            },
            memory.kind.as_str()
        )))
    }
}

/// The memory `id` if it is the caller's own and their key may change it (a key bound to chats
/// changes only what is kept in them; a user key changes what is kept in a chat only while its
/// user is a member).
async fn own_memory(state: &AppState, principal: &Principal, id: &str) -> Result<Memory, ApiError> {
    let memory = visible_memory(state, principal, id, None).await?;
    if memory.user_id.as_deref() == Some(principal.user()?)
        && principal.may_change(memory.chat_id.as_deref())
    {
        if memory.chat_id.is_some() {
            principal
                .chat_as_member(state.memory.as_ref(), memory.chat_id.as_deref())
                .await?;
        }
        Ok(memory)
    } else {
        Err(ApiError::not_found(format!("no memory `{id}` of yours")))
    }
}

/// What was done to a memory.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct MemoryChanged {
    /// The memory acted on.
    id: String,
    /// `forgotten`, `confirmed` or `corrected`.
    change: String,
    /// For a correction: the new memory that replaces it.
    replaced_by: Option<String>,
    /// For a confirmation: the facts someone stated that it contradicted, which give way now
    /// (a model's fact never supersedes a stated one until the user confirms it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    supersedes: Vec<String>,
    /// For a forget: the receipt, the kinds and ids of everything removed or changed with it
    /// (what was derived from it too), and counts of the index entries and caches; no content.
    #[serde(skip_serializing_if = "Option::is_none")]
    receipt: Option<ForgetReceipt>,
}

/// Forget one of the caller's memories for good: row, indexes, caches and copies.
#[utoipa::path(
    delete, path = "/v1/memories/{id}", tag = "memories",
    params(("id" = String, Path, description = "The memory's id")),
    responses(
        (status = 200, description = "Forgotten", body = MemoryChanged),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn forget(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::Json<MemoryChanged>, ApiError> {
    own_memory(&state, &principal, &id).await?;
    let receipt = state.memory.forget(principal.user()?, &id).await?;
    Ok(axum::Json(MemoryChanged {
        id,
        change: "forgotten".to_owned(),
        supersedes: Vec::new(),
        replaced_by: None,
        receipt: Some(receipt),
    }))
}

/// The corrected text.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CorrectBody {
    /// What is true instead.
    #[schema(min_length = 1, max_length = 20000)]
    // and `content_pattern()`, by `fit_to_config`
    content: String,
}

/// Replace one of the caller's facts with a corrected one; the old one stays in its history.
#[utoipa::path(
    post, path = "/v1/memories/{id}/correct", tag = "memories",
    params(("id" = String, Path, description = "The fact's id")),
    request_body = CorrectBody,
    responses(
        (status = 200, description = "Corrected", body = MemoryChanged),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn correct(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CorrectBody>,
) -> Result<axum::Json<MemoryChanged>, ApiError> {
    own_fact(&state, &principal, &id, "corrected").await?;
    let new_id = state
        .memory
        .correct_fact(Some(principal.user()?), &id, &body.content)
        .await?;
    Ok(axum::Json(MemoryChanged {
        id,
        change: "corrected".to_owned(),
        supersedes: Vec::new(),
        replaced_by: Some(new_id),
        receipt: None,
    }))
}

/// Confirm one of the caller's facts: full confidence, and it never fades.
#[utoipa::path(
    post, path = "/v1/memories/{id}/confirm", tag = "memories",
    params(("id" = String, Path, description = "The fact's id")),
    responses(
        (status = 200, description = "Confirmed", body = MemoryChanged),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn confirm(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::Json<MemoryChanged>, ApiError> {
    own_fact(&state, &principal, &id, "confirmed").await?;
    let supersedes = state.memory.confirm(principal.user()?, &id).await?;
    Ok(axum::Json(MemoryChanged {
        id,
        change: "confirmed".to_owned(),
        replaced_by: None,
        supersedes,
        receipt: None,
    }))
}

/// Release one of the caller's quarantined memories: the memory screen held it back from the
/// agent's context (instructions aimed at the agent, hidden characters, an imitated tool
/// call); released, it may be put into a context again.
#[utoipa::path(
    post, path = "/v1/memories/{id}/release", tag = "memories",
    params(("id" = String, Path, description = "The memory's id")),
    responses(
        (status = 200, description = "Released", body = MemoryView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn release(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::Json<MemoryView>, ApiError> {
    own_memory(&state, &principal, &id).await?;
    let released = state.memory.release(principal.user()?, &id).await?;
    Ok(axum::Json(MemoryView::from(released)))
}

impl AppState {
    /// The scope tools and the memory service act in for `user` in `chat`, now.
    pub(crate) fn scope(&self, user: &str, chat: Option<String>) -> ToolScope {
        ToolScope {
            user_id: user.to_owned(),
            session_id: None,
            chat_id: chat,
            at: self.kernel.context().now(),
            caller: mnemo_kernel::ToolCaller::Service,
        }
    }
}
