//! `/v1/search`, `/v1/context` and `/v1/people`: what memory knows, as a client asks for it.

use std::sync::Arc;

use axum::extract::State;
use chrono::{DateTime, Utc};
use mnemo_kernel::host::TurnInput;
use mnemo_memory_api::{
    AsOf, ExternalId, MemoryKind, MemoryType, SearchHit, SearchMode, SearchRequest, TimeAxis,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::views::{id_text, whole_number, IdText, MemoryView, NameText};
use super::{ApiJson, ApiQuery};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::AppState;

/// The longest search query, in characters.
const MAX_QUERY_CHARS: usize = 4_000;
/// The longest context query, in characters.
const MAX_CONTEXT_QUERY_CHARS: usize = 20_000;

/// A search.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchBody {
    /// What to look for, in words.
    #[schema(max_length = 4000)] // MAX_QUERY_CHARS
    query: String,
    /// `hybrid` (default) fuses the others.
    #[serde(default)]
    mode: SearchMode,
    /// Only these kinds; empty for all.
    #[serde(default)]
    #[schema(max_items = 3)]
    kinds: Vec<MemoryKind>,
    /// Most hits, 1 to the server's `max_search_limit` (50 by default; the maximum here is this
    /// server's).
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 1, maximum = 50)]
    limit: Option<usize>,
    /// Only memories said or learnt from then on.
    since: Option<DateTime<Utc>>,
    /// Only memories said or learnt before then.
    until: Option<DateTime<Utc>>,
    /// Only memories carrying every one of these tags.
    #[serde(default)]
    #[schema(max_items = 32)]
    tags: Vec<String>,
    /// Only memories about one of these people (names or how the user calls them).
    #[serde(default)]
    #[schema(max_items = 16)]
    about: Vec<NameText>,
    /// Only this seed-001 type.
    memory_type: Option<MemoryType>,
    /// Also memories a newer one replaced.
    #[serde(default)]
    include_superseded: bool,
    /// The chat the caller is in: its memories and shared ones join the caller's own.
    chat_id: Option<IdText>,
    /// The vector list's similarity cut-off, -1 to 1 (default from the config).
    #[schema(minimum = -1.0, maximum = 1.0)]
    min_similarity: Option<f32>,
    /// Ask about a past time instead of now: what the user believed then, or what was true then
    /// (`as_of_axis`).
    as_of: Option<DateTime<Utc>>,
    /// With `as_of`: `believed` (default; what was recorded by then, as it stood then) or
    /// `true` (what held then, by what is known now: corrections apply, superseded facts count
    /// until they were replaced).
    as_of_axis: Option<TimeAxis>,
}

/// The hits, best first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SearchResults {
    hits: Vec<HitView>,
}

/// One hit and why it ranked there.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HitView {
    memory: MemoryView,
    /// `(fused × speaker × period + neighbours + session) × confidence_weight × origin_weight`.
    /// Comparable within one search only: with
    /// `fusion` `scores` (hybrid, by default) the lists' normalised scores are added (the best
    /// text match gives 1, the vector and entity lists add their weighted shares); with `rrf`
    /// (a single mode, or `fusion = "rrf"`) each list adds 1 / (60 + rank).
    score: f64,
    why: WhyView,
}

/// How the score came about.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WhyView {
    /// How the lists were fused: `scores` (weighted normalised scores) or `rrf` (Reciprocal
    /// Rank Fusion).
    fusion: String,
    /// Each list that returned the memory.
    lists: Vec<ListView>,
    /// The lists' fused relevance.
    fused: f64,
    /// The factor for being a turn spoken by the one conversation speaker the query names
    /// (`Name: …`); 1 otherwise.
    speaker: f64,
    /// The factor for being said in the period the query names ("in May 2023", "last week"),
    /// or the week after; 1 otherwise.
    period: f64,
    /// What neighbouring turns of its session added.
    neighbours: f64,
    /// What the best other matches of its session added (a session matching in several turns).
    session: f64,
    /// The factor its confidence gave: min(1, 0.5 + confidence).
    confidence_weight: f64,
    /// The factor its origin gave (`[extensions.memory.origin_weights]`): the user's own words
    /// weigh more than the agent's, what was stated more than what was inferred.
    origin_weight: f64,
}

/// One list's verdict.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ListView {
    /// `fts`, `context` (BM25 with the turn before), `vector`, `entity` or `feedback` (the
    /// candidates scored again against the query moved towards its best first matches).
    list: String,
    /// 1-based rank in the list.
    rank: usize,
    /// BM25 relevance (fts; context: with the turn before's), cosine similarity (vector;
    /// feedback: to the moved query), or entities matched (entity).
    score: f64,
}

impl HitView {
    fn new(hit: SearchHit) -> Self {
        Self {
            score: hit.score,
            why: WhyView {
                fusion: hit.why.fusion.as_str().to_owned(),
                lists: hit
                    .why
                    .lists
                    .into_iter()
                    .map(|list| ListView {
                        list: list.list,
                        rank: list.rank,
                        score: list.score,
                    })
                    .collect(),
                fused: hit.why.fused,
                speaker: hit.why.speaker,
                period: hit.why.period,
                neighbours: hit.why.neighbours,
                session: hit.why.session,
                confidence_weight: hit.why.confidence_weight,
                origin_weight: hit.why.origin_weight,
            },
            memory: hit.memory.into(),
        }
    }
}

/// Search the caller's memory (and the chat's, with `chat_id`).
#[utoipa::path(
    post, path = "/v1/search", tag = "search",
    request_body = SearchBody,
    responses(
        (status = 200, description = "Hits, best first", body = SearchResults),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn search(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiJson(body): ApiJson<SearchBody>,
) -> Result<axum::Json<SearchResults>, ApiError> {
    check_length("query", &body.query, MAX_QUERY_CHARS)?;
    check_count("kinds", body.kinds.len(), 3)?;
    check_count("tags", body.tags.len(), 32)?;
    check_count("about", body.about.len(), 16)?;
    let chat = principal
        .chat_as_member(state.memory.as_ref(), id_text(&body.chat_id))
        .await?;
    let user = principal.user()?;
    let config = state.memory.limits();
    let limit = body.limit.unwrap_or(config.search_limit);
    if !(1..=config.max_search_limit).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "`limit` must be between 1 and {}, not {limit}",
            config.max_search_limit
        )));
    }
    if let (Some(since), Some(until)) = (body.since, body.until) {
        if since > until {
            return Err(ApiError::invalid("`since` is after `until`"));
        }
    }
    if let Some(similarity) = body.min_similarity {
        if !(-1.0..=1.0).contains(&similarity) {
            return Err(ApiError::invalid(format!(
                "`min_similarity` must be between -1 and 1, not {similarity}"
            )));
        }
    }
    let as_of = match (body.as_of, body.as_of_axis) {
        (Some(at), axis) => Some(AsOf {
            at,
            axis: axis.unwrap_or_default(),
        }),
        (None, Some(_)) => return Err(ApiError::invalid("`as_of_axis` needs an `as_of` time")),
        (None, None) => None,
    };
    let mut about = Vec::new();
    for name in &body.about {
        match state.memory.find_person(user, &name.0).await? {
            Some(person) => about.push(person.id),
            // Nobody by that name: nothing is about them.
            None => return Ok(axum::Json(SearchResults { hits: Vec::new() })),
        }
    }
    let request = SearchRequest {
        about,
        include_superseded: body.include_superseded,
        min_similarity: body.min_similarity,
        memory_type: body.memory_type,
        kinds: body.kinds,
        since: body.since,
        until: body.until,
        tags: body.tags,
        mode: body.mode,
        as_of,
        ..SearchRequest::for_caller(body.query, user, chat.as_deref(), limit)
    };
    let hits = state.memory.search(request).await?;
    Ok(axum::Json(SearchResults {
        hits: hits.into_iter().map(HitView::new).collect(),
    }))
}

/// What the context is for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContextBody {
    /// What the conversation is about now, e.g. the user's message.
    #[schema(max_length = 20000)] // MAX_CONTEXT_QUERY_CHARS
    query: String,
    /// The chat the conversation is in.
    chat_id: Option<IdText>,
    /// The session the conversation is in: its own turns are left out (the client has them).
    session_id: Option<IdText>,
    /// The context as of a past time: what the user believed then (memories recorded by then,
    /// as they stood then).
    as_of: Option<DateTime<Utc>>,
}

/// The context blocks for a prompt.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ContextView {
    /// Every block joined, ready for a system prompt; empty when memory holds nothing.
    text: String,
    /// Each extension's block.
    blocks: Vec<ContextBlock>,
}

/// One extension's context block.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ContextBlock {
    extension: String,
    text: String,
}

/// The memory context for a prompt, as mnemo puts it in its own system prompt.
#[utoipa::path(
    post, path = "/v1/context", tag = "search",
    request_body = ContextBody,
    responses(
        (status = 200, description = "The context", body = ContextView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn context(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiJson(body): ApiJson<ContextBody>,
) -> Result<axum::Json<ContextView>, ApiError> {
    check_length("query", &body.query, MAX_CONTEXT_QUERY_CHARS)?;
    let chat = principal
        .chat_as_member(state.memory.as_ref(), id_text(&body.chat_id))
        .await?;
    let input = TurnInput {
        user_id: principal.user()?.to_owned(),
        // A session of its own when none is named, so that nothing is left out.
        session_id: id_text(&body.session_id).map_or_else(
            || format!("http-context-{}", timestamp_suffix()),
            str::to_owned,
        ),
        chat_id: chat,
        text: body.query,
    };
    let prepared = state.kernel.prepare_turn_as_of(&input, 0, body.as_of).await;
    let blocks: Vec<ContextBlock> = prepared
        .blocks
        .into_iter()
        .filter(|(_, text)| !text.trim().is_empty())
        .map(|(extension, text)| ContextBlock {
            extension,
            text: text.trim_end().to_owned(),
        })
        .collect();
    let text = blocks
        .iter()
        .map(|block| block.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    Ok(axum::Json(ContextView { text, blocks }))
}

/// Refuses a `field` longer than `max` characters.
fn check_length(field: &str, text: &str, max: usize) -> Result<(), ApiError> {
    let chars = text.chars().count();
    if chars > max {
        return Err(ApiError::invalid(format!(
            "`{field}` is {chars} characters; the limit is {max}"
        )));
    }
    Ok(())
}

/// Refuses a list `field` of more than `max` items.
fn check_count(field: &str, items: usize, max: usize) -> Result<(), ApiError> {
    if items > max {
        return Err(ApiError::invalid(format!(
            "`{field}` has {items} items; the limit is {max}"
        )));
    }
    Ok(())
}

/// A session id suffix no conversation has: the time in nanoseconds.
fn timestamp_suffix() -> String {
    Utc::now().format("%Y%m%dT%H%M%S%9f").to_string()
}

/// The people the caller has told memory about.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PeopleView {
    people: Vec<PersonView>,
}

/// A person.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PersonView {
    /// `ent_…`.
    id: String,
    name: String,
    /// How the user relates to them ("wife", "boss").
    relation: Option<String>,
    aliases: Vec<String>,
    /// Their stable id on `provider` (a Telegram user id), once a memory's subject gave it.
    external_id: Option<String>,
    /// The platform of `external_id` (`telegram`).
    provider: Option<String>,
}

/// Which people to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PeopleQuery {
    /// Only the people with this id on a platform (with `provider`, the one person it anchors).
    external_id: Option<IdText>,
    /// Only the people anchored on this platform: `telegram`, `slack`, ... (without case).
    provider: Option<IdText>,
}

/// The people in the caller's memory; `provider` and `external_id` keep those anchored by
/// them: both together, the one person that id anchors (none if no one carries it).
#[utoipa::path(
    get, path = "/v1/people", tag = "search",
    params(PeopleQuery),
    responses(
        (status = 200, description = "People", body = PeopleView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn people(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiQuery(query): ApiQuery<PeopleQuery>,
) -> Result<axum::Json<PeopleView>, ApiError> {
    let user = principal.user()?;
    let provider = id_text(&query.provider);
    let external_id = id_text(&query.external_id);
    let people = if let (Some(provider), Some(external_id)) = (provider, external_id) {
        let external = ExternalId::new(provider, external_id)?;
        state
            .memory
            .person_by_external_id(user, &external)
            .await?
            .into_iter()
            .collect()
    } else {
        let provider = provider.map(|provider| provider.trim().to_lowercase());
        let external_id = external_id.map(str::trim);
        let mut people = state.memory.get_known_people(user).await?;
        people.retain(|person| {
            provider
                .as_ref()
                .is_none_or(|provider| person.provider.as_ref() == Some(provider))
                && external_id.is_none_or(|id| person.external_id.as_deref() == Some(id))
        });
        people
    };
    Ok(axum::Json(PeopleView {
        people: people
            .into_iter()
            .map(|person| PersonView {
                id: person.id,
                name: person.name,
                relation: person.relation,
                aliases: person.aliases,
                external_id: person.external_id,
                provider: person.provider,
            })
            .collect(),
    }))
}
