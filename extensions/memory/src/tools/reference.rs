//! The reference design's tools (seed 003): `search_memory`, `remember_fact`, `correct_fact`,
//! `confirm_fact`, `memory_stats` and `get_entity_info`.

use super::*;

/// `search_memory`: hybrid search with every filter.
pub(super) struct SearchMemory(pub(super) Arc<MemoryService>);

/// Arguments of `search_memory`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchMemoryArgs {
    /// what to look for
    query: String,
    kind: Option<MemoryKind>,
    #[schemars(range(min = 1))]
    limit: Option<usize>,
    /// ranking; hybrid fuses the others
    mode: Option<SearchMode>,
    /// only memories from this time on (RFC 3339 or YYYY-MM-DD)
    since: Option<String>,
    /// only memories before this time (RFC 3339 or YYYY-MM-DD)
    until: Option<String>,
    #[schemars(length(max = MAX_LIST_ITEMS))]
    tags: Option<Vec<String>>,
    /// also return memories a newer one replaced
    include_superseded: Option<bool>,
    /// ask about a past time (RFC 3339 or YYYY-MM-DD) instead of now
    as_of: Option<String>,
    /// with as_of: what the user believed then (default) or what was true then
    as_of_axis: Option<TimeAxis>,
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
            kinds: args.kind.into_iter().collect(),
            since: parse_time(name, "since", args.since.as_deref())?,
            until: parse_time(name, "until", args.until.as_deref())?,
            tags: args.tags.unwrap_or_default(),
            limit: args.limit.unwrap_or(self.0.config().search_limit),
            mode: args.mode.unwrap_or_default(),
            include_superseded: args.include_superseded.unwrap_or(false),
            as_of: match parse_time(name, "as_of", args.as_of.as_deref())? {
                Some(at) => Some(AsOf {
                    at,
                    axis: args.as_of_axis.unwrap_or_default(),
                }),
                None if args.as_of_axis.is_some() => {
                    return Err(ToolError::invalid(
                        name,
                        "`as_of_axis` needs an `as_of` time",
                    ));
                }
                None => None,
            },
            ..caller_request(&self.0, scope, args.query)
        };
        let hits = search(&self.0, name, request).await?;
        Ok(Value::Array(hits.iter().map(SearchHit::summary).collect()))
    }
}

/// `remember_fact`: one fact, with tags, confidence and the entities it names.
pub(super) struct RememberFact(pub(super) Arc<MemoryService>);

/// Arguments of `remember_fact`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RememberFactArgs {
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
pub(super) struct EntityArg {
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
        let origin = self
            .0
            .origin_for(scope, &args.content, Written::Statement)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
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
                origin,
                ..FactInput::default()
            })
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": id, "saved": true}))
    }
}

/// `correct_fact`: retires a fact and saves its correction.
pub(super) struct CorrectFact(pub(super) Arc<MemoryService>);

/// Arguments of `correct_fact`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CorrectFactArgs {
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
        super::check_in_conversation(self.name(), &self.0, scope, &args.id).await?;
        let id = self
            .0
            .correct_fact(Some(&scope.user_id), &args.id, &args.content)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": id, "replaces": args.id}))
    }
}

/// `confirm_fact`: full confidence, and no decay.
pub(super) struct ConfirmFact(pub(super) Arc<MemoryService>);

/// Arguments of the tools that take one memory by `id`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct IdArgs {
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
        super::check_in_conversation(self.name(), &self.0, scope, &args.id).await?;
        let superseded = self
            .0
            .confirm_for(scope, &args.id)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": args.id, "confirmed": true, "supersedes": superseded}))
    }
}

/// `memory_stats`: the caller's active memories counted by kind, and their faded facts apart.
pub(super) struct MemoryStats(pub(super) Arc<MemoryService>);

/// `memory_stats` takes no arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NoArgs {}

#[async_trait]
impl Tool for MemoryStats {
    type Args = NoArgs;

    fn name(&self) -> &str {
        "memory_stats"
    }

    fn description(&self) -> String {
        "Count the user's active memories by kind, and apart the facts that faded out of the \
         context (still searchable), with the newest memory's time."
            .to_owned()
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
            "faded_facts": stats.faded_facts,
            "entities": stats.entities,
            "latest": stats.latest.map(|time| time.to_rfc3339()),
            "pending_index": stats.pending_index,
        }))
    }
}

/// `get_entity_info`: an entity's profile and the memories linked to it.
pub(super) struct GetEntityInfo(pub(super) Arc<MemoryService>);

/// Arguments of `get_entity_info`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetEntityInfoArgs {
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
