//! The orchestrator's memory tools, each a typed [`Tool`], and the profiles that pick them.
//!
//! Every tool's argument struct gives its schema and its parsing; the limits that come from
//! config (`max_content_chars`, `max_search_limit`, `max_batch_size`) are set by its
//! [`Tool::limits`]. Every read and write is the caller's own (`scope.user_id`).

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use mnemo_kernel::prelude::*;
use mnemo_ner::{EntityType, ExtractedEntity};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::config::ToolProfile;
use crate::error::MemoryError;
use crate::service::{FactInput, MemoryService};
use crate::types::{MemoryKind, SearchHit, SearchMode, SearchRequest};

/// Every memory tool's name, in the order the model sees them.
pub(crate) const ALL_TOOLS: [&str; 13] = [
    "search_memory",
    "remember",
    "correct_fact",
    "forget_memory",
    "remember_fact",
    "confirm_fact",
    "memory_stats",
    "get_entity_info",
    "recall",
    "search_memories",
    "store_memory",
    "set_context",
    "get_context",
];

impl ToolProfile {
    /// The names of the profile's tools.
    pub(crate) fn tool_names(self) -> &'static [&'static str] {
        match self {
            ToolProfile::Default => &["search_memory", "remember", "correct_fact", "forget_memory"],
            ToolProfile::People => &["remember", "recall"],
            ToolProfile::Typed => &[
                "search_memories",
                "store_memory",
                "forget_memory",
                "set_context",
                "get_context",
            ],
            ToolProfile::Reference => &[
                "search_memory",
                "remember_fact",
                "correct_fact",
                "confirm_fact",
                "memory_stats",
                "get_entity_info",
            ],
            ToolProfile::All => &ALL_TOOLS,
        }
    }
}

/// The tools of `profile`.
///
/// # Errors
/// A tool's config limits do not fit its arguments (a bug, reported at start-up).
pub(crate) fn tool_set(
    service: &Arc<MemoryService>,
    profile: ToolProfile,
) -> Result<ToolSet, ToolError> {
    let mut tools = ToolSet::new();
    for &name in profile.tool_names() {
        let service = service.clone();
        match name {
            "search_memory" => tools.add(SearchMemory(service))?,
            "remember" => tools.add(Remember(service))?,
            "correct_fact" => tools.add(CorrectFact(service))?,
            "forget_memory" => tools.add(ForgetMemory(service))?,
            "remember_fact" => tools.add(RememberFact(service))?,
            "confirm_fact" => tools.add(ConfirmFact(service))?,
            "memory_stats" => tools.add(MemoryStats(service))?,
            "get_entity_info" => tools.add(GetEntityInfo(service))?,
            "recall" => tools.add(Recall(service))?,
            "search_memories" => tools.add(SearchMemories(service))?,
            "store_memory" => tools.add(StoreMemory(service))?,
            "set_context" => tools.add(SetContext(service))?,
            "get_context" => tools.add(GetContext(service))?,
            other => return Err(ToolError::UnknownTool(other.to_owned())),
        };
    }
    Ok(tools)
}

/// The most bytes `store_memory`'s `metadata` may take as JSON. It is kept with the memory and
/// exported on the memory's line, which must stay under `max_event_bytes` (1 MiB by default)
/// for the export to import back: 16 KiB leaves room for the content and the escaping.
pub(crate) const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Longest memory or fact id accepted.
const MAX_ID_CHARS: usize = 64;
/// Longest entity or person name accepted.
const MAX_NAME_CHARS: usize = 200;
/// Longest `set_context` key.
const MAX_KEY_CHARS: usize = 100;
/// Most tags, entities or aliases in one call.
const MAX_LIST_ITEMS: usize = 20;
/// Most subjects of one fact.
const MAX_SUBJECTS: usize = 10;
/// Longest expiry, in days (100 years).
const MAX_EXPIRY_DAYS: i64 = 36_500;

/// A kind of memory, as `search_memory` filters by it.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum KindArg {
    Episode,
    Fact,
    Reflection,
}

impl From<KindArg> for MemoryKind {
    fn from(kind: KindArg) -> Self {
        match kind {
            KindArg::Episode => MemoryKind::Episode,
            KindArg::Fact => MemoryKind::Fact,
            KindArg::Reflection => MemoryKind::Reflection,
        }
    }
}

/// How `search_memory` ranks.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ModeArg {
    Hybrid,
    Fts,
    Vector,
    Entity,
}

impl From<ModeArg> for SearchMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Hybrid => SearchMode::Hybrid,
            ModeArg::Fts => SearchMode::Fts,
            ModeArg::Vector => SearchMode::Vector,
            ModeArg::Entity => SearchMode::Entity,
        }
    }
}

/// Seed 001's memory types.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum MemoryTypeArg {
    Conversation,
    Fact,
    Context,
}

impl MemoryTypeArg {
    fn as_str(self) -> &'static str {
        match self {
            MemoryTypeArg::Conversation => "conversation",
            MemoryTypeArg::Fact => "fact",
            MemoryTypeArg::Context => "context",
        }
    }
}

fn tool_error(tool: &str, error: MemoryError) -> ToolError {
    match error {
        MemoryError::Invalid(reason) => ToolError::invalid(tool, reason),
        other => ToolError::failed(tool, other),
    }
}

fn parse_time(
    tool: &str,
    field: &str,
    text: Option<&str>,
) -> Result<Option<DateTime<Utc>>, ToolError> {
    let Some(text) = text else {
        return Ok(None);
    };
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(Some(time.with_timezone(&Utc)));
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_hms_opt(0, 0, 0).map(|time| time.and_utc()));
    }
    Err(ToolError::invalid(
        tool,
        format!("argument `{field}`: `{text}` is not an RFC 3339 time or a YYYY-MM-DD date"),
    ))
}

/// One search hit as the model sees it.
pub(crate) fn hit_json(hit: &SearchHit) -> Value {
    let memory = &hit.memory;
    json!({
        "id": memory.id,
        "kind": memory.kind.as_str(),
        "content": memory.content,
        "score": (hit.score * 1e6).round() / 1e6,
        "event_time": memory.event_time.to_rfc3339(),
        "session_id": memory.session_id,
        "tags": memory.tags,
        "confidence": memory.confidence,
        "matched_by": hit.ranks.iter().map(|(list, _)| list.clone()).collect::<Vec<_>>(),
        "supersedes": memory.attributes.get("supersedes"),
    })
}

/// Searches for the caller with the tool's own filters; the hits as the model sees them.
async fn search(
    service: &MemoryService,
    tool: &str,
    request: SearchRequest,
) -> Result<Vec<SearchHit>, ToolError> {
    service
        .search(&SearchRequest {
            touch: true,
            ..request
        })
        .await
        .map_err(|error| tool_error(tool, error))
}

/// The caller's own scope of a search: their memories, in this chat.
fn caller_request(service: &MemoryService, scope: &ToolScope, query: String) -> SearchRequest {
    SearchRequest {
        query,
        user_id: Some(scope.user_id.clone()),
        chat_id: scope.chat_id.clone(),
        limit: service.config().search_limit,
        ..SearchRequest::default()
    }
}

/// `search_memory`: hybrid search with every filter.
struct SearchMemory(Arc<MemoryService>);

/// Arguments of `search_memory`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchMemoryArgs {
    /// what to look for
    query: String,
    kind: Option<KindArg>,
    #[schemars(range(min = 1))]
    limit: Option<usize>,
    /// ranking; hybrid fuses the others
    mode: Option<ModeArg>,
    /// only memories from this time on (RFC 3339 or YYYY-MM-DD)
    since: Option<String>,
    /// only memories before this time (RFC 3339 or YYYY-MM-DD)
    until: Option<String>,
    #[schemars(length(max = MAX_LIST_ITEMS))]
    tags: Option<Vec<String>>,
    /// also return memories a newer one replaced
    include_superseded: Option<bool>,
}

#[async_trait]
impl Tool for SearchMemory {
    type Args = SearchMemoryArgs;

    fn name(&self) -> &str {
        "search_memory"
    }

    fn description(&self) -> String {
        "Search long-term memory (facts, past conversation turns, reflections) by keywords, meaning and named entities.".to_owned()
    }

    fn limits(&self) -> Limits {
        Limits::default().maximum("limit", self.0.config().max_search_limit)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: SearchMemoryArgs,
    ) -> Result<Value, ToolError> {
        let name = self.name();
        let request = SearchRequest {
            kinds: args.kind.map(MemoryKind::from).into_iter().collect(),
            since: parse_time(name, "since", args.since.as_deref())?,
            until: parse_time(name, "until", args.until.as_deref())?,
            tags: args.tags.unwrap_or_default(),
            limit: args.limit.unwrap_or(self.0.config().search_limit),
            mode: args.mode.map_or(SearchMode::Hybrid, SearchMode::from),
            include_superseded: args.include_superseded.unwrap_or(false),
            ..caller_request(&self.0, scope, args.query)
        };
        let hits = search(&self.0, name, request).await?;
        Ok(Value::Array(hits.iter().map(hit_json).collect()))
    }
}

/// `remember_fact`: one fact, with tags, confidence and the entities it names.
struct RememberFact(Arc<MemoryService>);

/// Arguments of `remember_fact`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RememberFactArgs {
    #[schemars(length(min = 1))]
    content: String,
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(max = 64)))]
    tags: Option<Vec<String>>,
    #[schemars(range(min = 0, max = 1))]
    confidence: Option<f64>,
    #[schemars(length(max = MAX_LIST_ITEMS))]
    entities: Option<Vec<EntityArg>>,
}

/// An entity `remember_fact` links the fact to.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EntityArg {
    #[schemars(length(min = 1, max = MAX_NAME_CHARS))]
    name: String,
    #[serde(rename = "type")]
    entity_type: Option<EntityType>,
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_NAME_CHARS)))]
    aliases: Option<Vec<String>>,
}

#[async_trait]
impl Tool for RememberFact {
    type Args = RememberFactArgs;

    fn name(&self) -> &str {
        "remember_fact"
    }

    fn description(&self) -> String {
        "Save a durable fact about the user or the world to long-term memory.".to_owned()
    }

    fn limits(&self) -> Limits {
        Limits::default().max_chars("content", self.0.config().max_content_chars)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: RememberFactArgs,
    ) -> Result<Value, ToolError> {
        let mut entities = Vec::new();
        for entity in args.entities.unwrap_or_default() {
            let canonical = entity.name.trim().to_owned();
            let entity_type = entity.entity_type.unwrap_or(EntityType::Other);
            let surfaces =
                std::iter::once(canonical.clone()).chain(entity.aliases.unwrap_or_default());
            for surface in surfaces {
                entities.push(ExtractedEntity {
                    surface,
                    canonical: canonical.clone(),
                    entity_type,
                    start: 0,
                    end: 0,
                    confidence: 1.0,
                    relation: None,
                    provider: "tool".to_owned(),
                });
            }
        }
        let id = self
            .0
            .save_fact(FactInput {
                user_id: Some(scope.user_id.clone()),
                session_id: scope.session_id.clone(),
                chat_id: scope.chat_id.clone(),
                content: args.content,
                tags: args.tags.unwrap_or_default(),
                confidence: args.confidence.unwrap_or(1.0),
                extra_entities: entities,
                supersede: true,
                ..FactInput::default()
            })
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": id, "saved": true}))
    }
}

/// `correct_fact`: retires a fact and saves its correction.
struct CorrectFact(Arc<MemoryService>);

/// Arguments of `correct_fact`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CorrectFactArgs {
    #[schemars(length(min = 1, max = MAX_ID_CHARS))]
    id: String,
    #[schemars(length(min = 1))]
    content: String,
}

#[async_trait]
impl Tool for CorrectFact {
    type Args = CorrectFactArgs;

    fn name(&self) -> &str {
        "correct_fact"
    }

    fn description(&self) -> String {
        "Replace a wrong fact: the old one is retired (kept for history) and the correction saved."
            .to_owned()
    }

    fn limits(&self) -> Limits {
        Limits::default().max_chars("content", self.0.config().max_content_chars)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: CorrectFactArgs,
    ) -> Result<Value, ToolError> {
        let id = self
            .0
            .correct_fact(Some(&scope.user_id), &args.id, &args.content)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": id, "replaces": args.id}))
    }
}

/// `confirm_fact`: full confidence, and no decay.
struct ConfirmFact(Arc<MemoryService>);

/// Arguments of the tools that take one memory by `id`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    #[schemars(length(min = 1, max = MAX_ID_CHARS))]
    id: String,
}

#[async_trait]
impl Tool for ConfirmFact {
    type Args = IdArgs;

    fn name(&self) -> &str {
        "confirm_fact"
    }

    fn description(&self) -> String {
        "Mark a fact as confirmed: full confidence, and it never fades.".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: IdArgs,
    ) -> Result<Value, ToolError> {
        self.0
            .store()
            .map_err(|error| tool_error(self.name(), error))?
            .confirm(&args.id, Some(&scope.user_id))
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": args.id, "confirmed": true}))
    }
}

/// `memory_stats`: the caller's memories counted by kind.
struct MemoryStats(Arc<MemoryService>);

/// `memory_stats` takes no arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[async_trait]
impl Tool for MemoryStats {
    type Args = NoArgs;

    fn name(&self) -> &str {
        "memory_stats"
    }

    fn description(&self) -> String {
        "Count the user's memories by kind, with the newest memory's time.".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        _args: NoArgs,
    ) -> Result<Value, ToolError> {
        let stats = self
            .0
            .store()
            .map_err(|error| tool_error(self.name(), error))?
            .stats(Some(&scope.user_id))
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({
            "counts": {"episode": stats.episodes, "fact": stats.facts, "reflection": stats.reflections},
            "entities": stats.entities,
            "latest": stats.latest.map(|time| time.to_rfc3339()),
            "pending_index": stats.pending_index,
        }))
    }
}

/// `get_entity_info`: an entity's profile and the memories linked to it.
struct GetEntityInfo(Arc<MemoryService>);

/// Arguments of `get_entity_info`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetEntityInfoArgs {
    #[schemars(length(min = 1, max = MAX_NAME_CHARS))]
    name: String,
}

#[async_trait]
impl Tool for GetEntityInfo {
    type Args = GetEntityInfoArgs;

    fn name(&self) -> &str {
        "get_entity_info"
    }

    fn description(&self) -> String {
        "Everything memory holds about a person, project, place or other named entity.".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: GetEntityInfoArgs,
    ) -> Result<Value, ToolError> {
        let name = self.name();
        let entity_name = args.name.as_str();
        let user = Some(scope.user_id.as_str());
        let store = self.0.store().map_err(|error| tool_error(name, error))?;
        let limit = self.0.config().entity_memory_limit;
        // A person by name or by relation ("my brother"), as `recall(about)` finds them;
        // any other entity by its name or alias.
        let person = self
            .0
            .find_person(&scope.user_id, entity_name)
            .await
            .map_err(|error| tool_error(name, error))?;
        let info = match person {
            Some(person) => {
                store
                    .entity_info_by_id(user, scope.chat_id.as_deref(), &person.id, limit)
                    .await
            }
            None => {
                store
                    .entity_info(user, scope.chat_id.as_deref(), entity_name, limit)
                    .await
            }
        }
        .map_err(|error| tool_error(name, error))?
        .ok_or_else(|| {
            ToolError::failed(name, format!("no entity named `{entity_name}` in memory"))
        })?;
        Ok(json!({
            "id": info.id,
            "name": info.name,
            "type": info.entity_type,
            "aliases": info.aliases,
            "mention_count": info.mention_count,
            "summary": info.summary,
            "memories": info.memories.iter().map(|memory| json!({
                "id": memory.id,
                "kind": memory.kind.as_str(),
                "content": memory.content,
                "event_time": memory.event_time.to_rfc3339(),
            })).collect::<Vec<_>>(),
        }))
    }
}

/// `remember` (seed 000): one fact or a batch, each linked to the people it is about.
struct Remember(Arc<MemoryService>);

/// Arguments of `remember`: `content` or `facts`; `subjects`, `expires_in_days` and `shared`
/// apply to every fact that does not set its own.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    /// a single fact
    #[schemars(length(min = 1))]
    content: Option<String>,
    facts: Option<Vec<FactArg>>,
    /// who the fact is about
    #[schemars(length(max = MAX_SUBJECTS), inner(length(min = 1, max = MAX_NAME_CHARS)))]
    subjects: Option<Vec<String>>,
    /// days until it expires
    #[schemars(range(min = 1, max = MAX_EXPIRY_DAYS))]
    expires_in_days: Option<i64>,
    /// true for group/team facts everyone in this chat may see
    shared: Option<bool>,
}

/// One fact of `remember`'s batch.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FactArg {
    #[schemars(length(min = 1))]
    content: String,
    #[schemars(length(max = MAX_SUBJECTS), inner(length(min = 1, max = MAX_NAME_CHARS)))]
    subjects: Option<Vec<String>>,
    #[schemars(range(min = 1, max = MAX_EXPIRY_DAYS))]
    expires_in_days: Option<i64>,
    shared: Option<bool>,
}

#[async_trait]
impl Tool for Remember {
    type Args = RememberArgs;

    fn name(&self) -> &str {
        "remember"
    }

    fn description(&self) -> String {
        "Store one or more facts, each about the people it concerns (subjects such as \"my wife\" or \"Sarah\"). People are created on first mention and linked afterwards.".to_owned()
    }

    fn limits(&self) -> Limits {
        let config = self.0.config();
        Limits::default()
            .max_chars("content", config.max_content_chars)
            .max_items("facts", config.max_batch_size)
            .max_chars("facts[].content", config.max_content_chars)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: RememberArgs,
    ) -> Result<Value, ToolError> {
        let tool = self.name();
        let mut items = args.facts.unwrap_or_default();
        if let Some(content) = args.content {
            items.insert(
                0,
                FactArg {
                    content,
                    subjects: None,
                    expires_in_days: None,
                    shared: None,
                },
            );
        }
        if items.is_empty() {
            return Err(ToolError::invalid(
                tool,
                "give `content` or a non-empty `facts` list",
            ));
        }
        // Every fact is checked before any is saved: a bad one saves none.
        for (index, item) in items.iter().enumerate() {
            self.0
                .check_content(&format!("facts[{index}].content"), &item.content)
                .map_err(|error| tool_error(tool, error))?;
        }
        let mut saved = Vec::new();
        for item in items {
            let subjects = item
                .subjects
                .as_ref()
                .or(args.subjects.as_ref())
                .cloned()
                .unwrap_or_default();
            let days = item.expires_in_days.or(args.expires_in_days);
            let shared = item.shared.or(args.shared).unwrap_or(false);
            let (id, people) = self
                .0
                .remember(scope, &item.content, &subjects, days, shared)
                .await
                .map_err(|error| tool_error(tool, error))?;
            saved.push(json!({"id": id, "subjects": people}));
        }
        Ok(json!({"saved": saved}))
    }
}

/// `recall` (seed 000): search, optionally only about one person.
struct Recall(Arc<MemoryService>);

/// Arguments of `recall`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    /// what to search for
    query: String,
    /// filter to a person, e.g. 'my wife' or 'Sarah'
    #[schemars(length(max = MAX_NAME_CHARS))]
    about: Option<String>,
}

#[async_trait]
impl Tool for Recall {
    type Args = RecallArgs;

    fn name(&self) -> &str {
        "recall"
    }

    fn description(&self) -> String {
        "Search memory, optionally only about one person (\"my wife\", \"Sarah\").".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: RecallArgs,
    ) -> Result<Value, ToolError> {
        let name = self.name();
        let mut about = Vec::new();
        if let Some(reference) = args.about.as_deref() {
            match self
                .0
                .find_person(&scope.user_id, reference)
                .await
                .map_err(|error| tool_error(name, error))?
            {
                Some(person) => about.push(person.id),
                // Seed 000: a person that cannot be found gives unfiltered results.
                None => {
                    tracing::debug!(%reference, "recall: no such person; searching everything")
                }
            }
        }
        let request = SearchRequest {
            about,
            ..caller_request(&self.0, scope, args.query)
        };
        let hits = search(&self.0, name, request).await?;
        attributed(&self.0, name, &hits).await
    }
}

/// Search hits with the names of the people each is about.
async fn attributed(
    service: &MemoryService,
    tool: &str,
    hits: &[SearchHit],
) -> Result<Value, ToolError> {
    let subject_ids: Vec<String> = hits
        .iter()
        .flat_map(|hit| hit.memory.subject_ids.clone())
        .collect();
    let names = service
        .store()
        .map_err(|error| tool_error(tool, error))?
        .entity_names(&subject_ids)
        .await
        .map_err(|error| tool_error(tool, error))?;
    Ok(Value::Array(
        hits.iter()
            .map(|hit| {
                let mut item = hit_json(hit);
                let about: Vec<&String> = hit
                    .memory
                    .subject_ids
                    .iter()
                    .filter_map(|id| names.get(id))
                    .collect();
                item["about"] = json!(about);
                item
            })
            .collect(),
    ))
}

/// `search_memories` (seed 001): search, optionally of one memory type.
struct SearchMemories(Arc<MemoryService>);

/// Arguments of `search_memories`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchMemoriesArgs {
    query: String,
    memory_type: Option<MemoryTypeArg>,
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

#[async_trait]
impl Tool for SearchMemories {
    type Args = SearchMemoriesArgs;

    fn name(&self) -> &str {
        "search_memories"
    }

    fn description(&self) -> String {
        "Search memories by meaning and keywords, optionally of one type.".to_owned()
    }

    fn limits(&self) -> Limits {
        Limits::default().maximum("limit", self.0.config().max_search_limit)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: SearchMemoriesArgs,
    ) -> Result<Value, ToolError> {
        let request = SearchRequest {
            memory_type: args.memory_type.map(|kind| kind.as_str().to_owned()),
            limit: args.limit.unwrap_or(self.0.config().search_limit),
            ..caller_request(&self.0, scope, args.query)
        };
        let hits = search(&self.0, self.name(), request).await?;
        Ok(Value::Array(hits.iter().map(hit_json).collect()))
    }
}

/// `store_memory` (seed 001): a memory of one type, with free-form metadata.
struct StoreMemory(Arc<MemoryService>);

/// Arguments of `store_memory`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StoreMemoryArgs {
    #[schemars(length(min = 1))]
    content: String,
    memory_type: Option<MemoryTypeArg>,
    /// free-form JSON kept with the memory: at most 16384 bytes as JSON, nested at most 32 deep
    metadata: Option<Map<String, Value>>,
}

#[async_trait]
impl Tool for StoreMemory {
    type Args = StoreMemoryArgs;

    fn name(&self) -> &str {
        "store_memory"
    }

    fn description(&self) -> String {
        "Store a memory: conversation (kept 30 days), fact (permanent) or context (until the end of the day).".to_owned()
    }

    fn limits(&self) -> Limits {
        Limits::default().max_chars("content", self.0.config().max_content_chars)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: StoreMemoryArgs,
    ) -> Result<Value, ToolError> {
        let memory_type = args.memory_type.unwrap_or(MemoryTypeArg::Fact).as_str();
        let metadata = args.metadata.unwrap_or_default();
        check_metadata(self.name(), &metadata)?;
        let id = self
            .0
            .store_typed(scope, memory_type, &args.content, metadata)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": id, "memory_type": memory_type}))
    }
}

/// Refuses `metadata` larger than [`MAX_METADATA_BYTES`] as JSON; the error names the argument
/// and the limit. (Its nesting is bounded by the kernel's check of every tool argument.)
fn check_metadata(tool: &str, metadata: &Map<String, Value>) -> Result<(), ToolError> {
    // Counted while serialising, stopping at the limit rather than building a copy of it all.
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            if self.0 > MAX_METADATA_BYTES {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    if serde_json::to_writer(&mut counter, metadata).is_err() {
        return Err(ToolError::invalid(
            tool,
            format!("argument `metadata`: more than {MAX_METADATA_BYTES} bytes as JSON; the limit is {MAX_METADATA_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// `forget_memory`: removes one of the caller's memories for good.
struct ForgetMemory(Arc<MemoryService>);

/// Arguments of `forget_memory`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForgetMemoryArgs {
    #[schemars(length(min = 1, max = MAX_ID_CHARS))]
    memory_id: String,
}

#[async_trait]
impl Tool for ForgetMemory {
    type Args = ForgetMemoryArgs;

    fn name(&self) -> &str {
        "forget_memory"
    }

    fn description(&self) -> String {
        "Forget one of the user's memories for good: it is removed from the store and every index."
            .to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: ForgetMemoryArgs,
    ) -> Result<Value, ToolError> {
        self.0
            .forget(&scope.user_id, &args.memory_id)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": args.memory_id, "forgotten": true}))
    }
}

/// `set_context` (seed 001): a value for today under a key.
struct SetContext(Arc<MemoryService>);

/// Arguments of `set_context`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetContextArgs {
    #[schemars(length(min = 1, max = MAX_KEY_CHARS))]
    key: String,
    #[schemars(length(min = 1))]
    value: String,
}

#[async_trait]
impl Tool for SetContext {
    type Args = SetContextArgs;

    fn name(&self) -> &str {
        "set_context"
    }

    fn description(&self) -> String {
        "Remember a value for today under a key (e.g. current_task); it expires at the end of the day.".to_owned()
    }

    fn limits(&self) -> Limits {
        Limits::default().max_chars("value", self.0.config().max_content_chars)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: SetContextArgs,
    ) -> Result<Value, ToolError> {
        let content = format!("{}: {}", args.key, args.value);
        let mut metadata = Map::new();
        metadata.insert("key".to_owned(), json!(args.key));
        metadata.insert("value".to_owned(), json!(args.value));
        let id = self
            .0
            .store_typed(scope, "context", &content, metadata)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": id, "key": args.key}))
    }
}

/// `get_context` (seed 001): today's value under a key.
struct GetContext(Arc<MemoryService>);

/// Arguments of `get_context`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetContextArgs {
    #[schemars(length(min = 1, max = MAX_KEY_CHARS))]
    key: String,
}

#[async_trait]
impl Tool for GetContext {
    type Args = GetContextArgs;

    fn name(&self) -> &str {
        "get_context"
    }

    fn description(&self) -> String {
        "The value remembered today under a key, or null.".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: GetContextArgs,
    ) -> Result<Value, ToolError> {
        let found = self
            .0
            .context_value(&scope.user_id, scope.chat_id.as_deref(), &args.key)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(
            json!({"key": args.key, "value": found.and_then(|memory| memory.attributes.get("value").cloned())}),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;

    fn specs(profile: ToolProfile) -> Vec<ToolSpec> {
        let service = Arc::new(MemoryService::new(MemoryConfig {
            max_content_chars: 123,
            max_search_limit: 7,
            max_batch_size: 3,
            ..MemoryConfig::default()
        }));
        tool_set(&service, profile).unwrap().tools()
    }

    #[test]
    fn every_profile_builds_and_all_has_every_tool_once() {
        for profile in [
            ToolProfile::Default,
            ToolProfile::People,
            ToolProfile::Typed,
            ToolProfile::Reference,
        ] {
            let names: Vec<String> = specs(profile).into_iter().map(|spec| spec.name).collect();
            assert_eq!(names, profile.tool_names(), "{profile:?}");
        }
        let all: Vec<String> = specs(ToolProfile::All)
            .into_iter()
            .map(|spec| spec.name)
            .collect();
        assert_eq!(all, ALL_TOOLS);
    }

    /// The default offers one search and one way to store: no look-alikes for a small model.
    #[test]
    fn the_default_profile_has_one_search_and_one_store() {
        let names = ToolProfile::Default.tool_names();
        let searches = ["search_memory", "recall", "search_memories"];
        let stores = ["remember", "remember_fact", "store_memory"];
        assert_eq!(
            names.iter().filter(|name| searches.contains(name)).count(),
            1
        );
        assert_eq!(names.iter().filter(|name| stores.contains(name)).count(), 1);
    }

    #[test]
    fn config_limits_are_in_the_schemas() {
        let specs = specs(ToolProfile::All);
        let spec = |name: &str| {
            specs
                .iter()
                .find(|spec| spec.name == name)
                .map(|spec| spec.parameters.clone())
                .unwrap()
        };
        assert_eq!(spec("search_memory")["properties"]["limit"]["maximum"], 7);
        assert_eq!(spec("search_memories")["properties"]["limit"]["maximum"], 7);
        let remember = spec("remember");
        assert_eq!(remember["properties"]["content"]["maxLength"], 123);
        assert_eq!(remember["properties"]["facts"]["maxItems"], 3);
        assert_eq!(
            remember["properties"]["facts"]["items"]["properties"]["content"]["maxLength"],
            123
        );
        assert_eq!(remember.get("required"), None);
        assert_eq!(spec("set_context")["properties"]["value"]["maxLength"], 123);
        assert_eq!(
            spec("remember_fact")["properties"]["entities"]["items"]["properties"]["type"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(8)
        );
        let metadata = &spec("store_memory")["properties"]["metadata"];
        assert_eq!(metadata["type"], "object");
        assert!(metadata["description"]
            .as_str()
            .unwrap()
            .contains(&MAX_METADATA_BYTES.to_string()));
        assert_eq!(
            spec("memory_stats"),
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }
}
