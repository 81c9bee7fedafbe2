//! Seed 001's tools, for memories with a type and an expiry: `search_memories`,
//! `store_memory`, `forget_memory`, `set_context` and `get_context`.

use super::*;

/// `search_memories` (seed 001): search, optionally of one memory type.
pub(super) struct SearchMemories(pub(super) Arc<MemoryService>);

/// Arguments of `search_memories`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchMemoriesArgs {
    query: String,
    memory_type: Option<MemoryType>,
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
            memory_type: args.memory_type,
            limit: args.limit.unwrap_or(self.0.config().search_limit),
            ..caller_request(&self.0, scope, args.query)
        };
        let hits = search(&self.0, self.name(), request).await?;
        Ok(Value::Array(hits.iter().map(SearchHit::summary).collect()))
    }
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
        Ok(json!({"id": id, "memory_type": memory_type.as_str()}))
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
pub(super) struct ForgetMemory(pub(super) Arc<MemoryService>);

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
        super::check_in_conversation(self.name(), &self.0, scope, &args.memory_id).await?;
        self.0
            .forget(&scope.user_id, &args.memory_id)
            .await
            .map_err(|error| tool_error(self.name(), error))?;
        Ok(json!({"id": args.memory_id, "forgotten": true}))
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
