//! `/v1/memories/{id}/provenance` and `/v1/entities`: where a memory came from, and what the
//! caller's memory knows of, for people who inspect it before they trust it.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::State;
use chrono::{DateTime, Utc};
use mnemo_memory_api::{Memory, MemoryKind, SessionKey};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::admin::JobRunView;
use super::memories::{may_see, visible_memory, ChatQuery};
use super::views::{id_text, MemoryView};
use super::{ApiPath, ApiQuery};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::AppState;

/// How many of the newest job runs are searched for the one that made a memory.
const JOB_RUNS_SEARCHED: usize = 1_000;

/// The longest chain of versions followed either way.
const MAX_CHAIN: usize = 50;

/// Where a memory came from.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProvenanceView {
    memory: MemoryView,
    made_by: MadeByView,
    /// What it was made from, as far as the caller may see: a fact's source turns (or the fact
    /// it corrects), a reflection's facts.
    sources: Vec<MemoryView>,
    /// The earlier versions it replaced, newest first (a correction or a consolidation that
    /// superseded them).
    replaced: Vec<MemoryView>,
    /// The newer versions that replaced it, oldest first; empty while it is current.
    replaced_by: Vec<MemoryView>,
}

/// How a memory was made.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct MadeByView {
    /// `conversation` (a turn said in a session), `consolidation` (a fact a model drew from
    /// turns), `correction` (a fact that replaced one the user corrected), `remembered` (a fact
    /// a tool or the API stored when told), or `reflection` (the weekly summary).
    how: String,
    /// The session it was said in or drawn from.
    session_id: Option<String>,
    /// The messaging provider that session came through (`telegram`), as its turns named it;
    /// null when none did.
    provider: Option<String>,
    /// When it was made.
    at: DateTime<Utc>,
    /// For consolidation and reflection: the job run it was made in, among the newest 1,000
    /// runs kept (a consolidation started by a session's end has none).
    job_run: Option<JobRunView>,
}

/// The extension whose jobs make memories of the way `how`.
fn job_extension(how: &str) -> Option<&'static str> {
    match how {
        "consolidation" => Some("memory_maintenance"),
        "reflection" => Some("memory_reflection"),
        _ => None,
    }
}

/// How `memory` was made, read from its kind, type, attributes and sources.
fn how_made(memory: &Memory) -> &'static str {
    match memory.kind {
        MemoryKind::Episode => "conversation",
        MemoryKind::Reflection => "reflection",
        MemoryKind::Fact if memory.attributes.contains_key("corrects") => "correction",
        MemoryKind::Fact if !memory.source_ids.is_empty() => "consolidation",
        MemoryKind::Fact => "remembered",
    }
}

/// A memory's provenance: how it was made (and in which job run), its sources, and the versions
/// it replaced or that replaced it.
#[utoipa::path(
    get, path = "/v1/memories/{id}/provenance", tag = "memories",
    params(("id" = String, Path, description = "The memory's id"), ChatQuery),
    responses(
        (status = 200, description = "Its provenance", body = ProvenanceView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn provenance(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ChatQuery>,
) -> Result<axum::Json<ProvenanceView>, ApiError> {
    let chat = principal
        .chat_as_member(state.memory.as_ref(), id_text(&query.chat_id))
        .await?;
    let chat = chat.as_deref();
    let memory = visible_memory(&state, &principal, &id, chat).await?;

    let mut sources = Vec::new();
    for source in &memory.source_ids {
        if let Some(found) = state.memory.get_memory(source).await? {
            if may_see(&principal, &found, chat)? {
                sources.push(MemoryView::from(found));
            }
        }
    }

    // Backwards: what it replaced, and what those replaced, breadth first.
    let mut replaced = Vec::new();
    let mut frontier = VecDeque::from([memory.id.clone()]);
    while let Some(next) = frontier.pop_front() {
        for older in state.memory.replaced_by(&next).await?.into_iter().rev() {
            if replaced.len() >= MAX_CHAIN || !may_see(&principal, &older, chat)? {
                continue;
            }
            frontier.push_back(older.id.clone());
            replaced.push(MemoryView::from(older));
        }
    }

    // Forwards: what replaced it, and what replaced that.
    let mut replaced_by = Vec::new();
    let mut successor = memory.superseded_by_id.clone();
    while let Some(next) = successor.take() {
        if replaced_by.len() >= MAX_CHAIN {
            break;
        }
        let Some(newer) = state.memory.get_memory(&next).await? else {
            break;
        };
        if !may_see(&principal, &newer, chat)? {
            break;
        }
        successor.clone_from(&newer.superseded_by_id);
        replaced_by.push(MemoryView::from(newer));
    }

    // The session is its user's in its chat, as the turns that opened it recorded it.
    let provider = match (&memory.user_id, &memory.session_id) {
        (Some(user_id), Some(session_id)) => {
            let session = SessionKey::new(user_id.clone(), memory.chat_id.clone(), session_id);
            state.memory.session_provider(&session).await?
        }
        _ => None,
    };
    let how = how_made(&memory);
    let job_run = match job_extension(how) {
        None => None,
        Some(extension) => {
            let jobs: Vec<String> = state
                .kernel
                .jobs()
                .into_iter()
                .filter(|(owner, _)| owner == extension)
                .map(|(_, spec)| spec.name)
                .collect();
            state
                .kernel
                .job_history(JOB_RUNS_SEARCHED)
                .await
                .into_iter()
                .find(|run| {
                    // The store keeps whole seconds.
                    let made = memory.created_at.timestamp();
                    jobs.contains(&run.job)
                        && run.at.timestamp() <= made
                        && made <= run.finished_at.timestamp()
                })
                .map(JobRunView::from)
        }
    };
    Ok(axum::Json(ProvenanceView {
        made_by: MadeByView {
            how: how.to_owned(),
            session_id: memory.session_id.clone(),
            provider,
            at: memory.created_at,
            job_run,
        },
        memory: memory.into(),
        sources,
        replaced,
        replaced_by,
    }))
}

/// Which entities to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EntitiesQuery {
    /// Most entities, 1 to 1000 (default 200).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// The caller's entities.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EntitiesView {
    /// Those linked to most memories first.
    entities: Vec<EntityView>,
}

/// Something the caller's memories mention: a person, a place, a project...
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EntityView {
    /// `ent_…`; `GET /v1/memories?entity_id=` lists the memories that mention it.
    id: String,
    name: String,
    /// `person`, `project`, `organization`, `location`, `email`, `url`, `date` or `other`.
    #[serde(rename = "type")]
    entity_type: String,
    /// For a person: how the user relates to them ("wife").
    relation: Option<String>,
    /// Other names it was mentioned by.
    aliases: Vec<String>,
    /// The memories linked to it: those that name it, and facts about a person.
    memories: i64,
}

/// The most entities one request lists.
const MAX_ENTITIES: usize = 1_000;

/// The entities the caller's memories mention, people included, those in most memories first.
#[utoipa::path(
    get, path = "/v1/entities", tag = "search",
    params(EntitiesQuery),
    responses(
        (status = 200, description = "Entities", body = EntitiesView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn entities(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiQuery(query): ApiQuery<EntitiesQuery>,
) -> Result<axum::Json<EntitiesView>, ApiError> {
    let limit = query.limit.unwrap_or(200);
    if !(1..=MAX_ENTITIES).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "`limit` must be between 1 and {MAX_ENTITIES}, not {limit}"
        )));
    }
    let entities = state
        .memory
        .owner_entities(principal.user()?, limit)
        .await?
        .into_iter()
        .map(|entity| EntityView {
            id: entity.id,
            name: entity.name,
            entity_type: entity.entity_type,
            relation: entity.relation,
            aliases: entity.aliases,
            memories: entity.memories,
        })
        .collect();
    Ok(axum::Json(EntitiesView { entities }))
}
