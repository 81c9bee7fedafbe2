//! Seed 001's tools, for memories with a type and an expiry: `search_memories`,
//! `store_memory`, `forget_memory`, `set_context` and `get_context`.

use super::*;

/// `search_memories` (seed 001): search, optionally of one memory type or by metadata. As the
/// seed's tool, 5 results by default, vector neighbours at least 0.3 similar, and each hit as
/// `{content, type, score, created_at, metadata}` (with its `id`, which `forget_memory` takes).
pub(super) struct SearchMemories(pub(super) Arc<MemoryService>);

/// Seed 001's default number of results.
const TYPED_SEARCH_LIMIT: usize = 5;
/// Seed 001's `min_score`: the least cosine similarity of a vector neighbour.
const TYPED_MIN_SCORE: f32 = 0.3;
/// Attributes mnemo keeps for itself beside a memory's metadata, not shown as metadata.
const INTERNAL_ATTRIBUTES: [&str; 2] = ["supersedes", "enrichment_attempts"];

/// Arguments of `search_memories`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchMemoriesArgs {
    query: String,
    memory_type: Option<MemoryType>,
    #[schemars(range(min = 1))]
    limit: Option<usize>,
    /// only memories whose metadata has each of these keys with this value, e.g. {"category": "user_profile"}
    metadata: Option<Map<String, Value>>,
}

#[async_trait]
impl Tool for SearchMemories {
    type Args = SearchMemoriesArgs;

    fn name(&self) -> &str {
        "search_memories"
    }

    fn description(&self) -> String {
        "Search memories by meaning and keywords, optionally of one type or with given metadata."
            .to_owned()
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
        let metadata = args.metadata.unwrap_or_default();
        check_metadata(self.name(), &metadata)?;
        if let Some(key) = metadata.keys().find(|key| !is_plain_key(key)) {
            return Err(ToolError::invalid(
                self.name(),
                format!(
                    "argument `metadata`: key {key:?} is not a plain name (no quotes, backslashes or control characters)"
                ),
            ));
        }
        let request = SearchRequest {
            memory_type: args.memory_type,
            metadata,
            min_similarity: Some(TYPED_MIN_SCORE),
            limit: args.limit.unwrap_or(TYPED_SEARCH_LIMIT),
            ..caller_request(&self.0, scope, args.query)
        };
        let hits = search(&self.0, self.name(), request).await?;
        Ok(Value::Array(hits.iter().map(typed_hit).collect()))
    }
}

/// A metadata key a filter may name: one JSON path step, without quotes, backslashes or control
/// characters.
fn is_plain_key(key: &str) -> bool {
    !key.is_empty() && !key.chars().any(|c| c == '"' || c == '\\' || c.is_control())
}

/// A hit as seed 001's `search_memories` returns it.
fn typed_hit(hit: &SearchHit) -> Value {
    let memory = &hit.memory;
    let metadata: Map<String, Value> = memory
        .attributes
        .iter()
        .filter(|(key, _)| !INTERNAL_ATTRIBUTES.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    json!({
        "id": memory.id,
        "content": memory.content,
        "type": memory.type_name(),
        "score": hit.shown_score(),
        "created_at": memory.created_at.to_rfc3339(),
        "metadata": metadata,
    })
}

/// `store_memory` (seed 001): a memory of one type, with free-form metadata.
pub(super) struct StoreMemory(pub(super) Arc<MemoryService>);

/// Arguments of `store_memory`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StoreMemoryArgs {
    #[schemars(length(min = 1))]
    content: String,
    memory_type: Option<MemoryType>,
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
        let memory_type = args.memory_type.unwrap_or_default();
        let metadata = args.metadata.unwrap_or_default();
        check_metadata(self.name(), &metadata)?;
        let id = self
            .0
            .store_typed(scope, memory_type, &args.content, metadata)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        // Seed 001's answer: the stored memory.
        Ok(json!({
            "id": id,
            "content": args.content.trim(),
            "type": memory_type.as_str(),
            "created_at": scope.at.to_rfc3339(),
        }))
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

/// `forget_memory`: removes one of the caller's memories for good. Under the typed profile it
/// answers as seed 001's does, `{success, id}`, and an id that names none of the caller's
/// memories is `success: false`; elsewhere such an id is an error that says so.
pub(super) struct ForgetMemory {
    pub(super) service: Arc<MemoryService>,
    /// Answer as seed 001's tool does.
    pub(super) seed_answer: bool,
}

/// Arguments of `forget_memory`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ForgetMemoryArgs {
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
        super::check_in_conversation(self.name(), &self.service, scope, &args.memory_id).await?;
        match self.service.forget(&scope.user_id, &args.memory_id).await {
            Ok(_) if self.seed_answer => Ok(json!({"success": true, "id": args.memory_id})),
            // The receipt: what went with it (ids and kinds, no content).
            Ok(receipt) => Ok(json!({"id": args.memory_id, "forgotten": true, "receipt": receipt})),
            Err(MemoryError::NotFound(_)) if self.seed_answer => {
                Ok(json!({"success": false, "id": args.memory_id}))
            }
            Err(error) => Err(tool_error(self.name(), error)),
        }
    }
}

/// `set_context` (seed 001): a value for today under a key.
pub(super) struct SetContext(pub(super) Arc<MemoryService>);

/// Arguments of `set_context`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SetContextArgs {
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
            .store_typed(scope, MemoryType::Context, &content, metadata)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": id, "key": args.key}))
    }
}

/// `get_context` (seed 001): today's value under a key.
pub(super) struct GetContext(pub(super) Arc<MemoryService>);

/// Arguments of `get_context`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetContextArgs {
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
