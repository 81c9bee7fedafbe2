//! The names of the `tracing` spans the kernel opens, and the fields they carry, for hosts that
//! turn spans into traces and metrics (`mnemo-telemetry`). Extensions publish the names of
//! their own spans in their API crates (`mnemo_memory_api::spans`).
//!
//! Conventions, after OpenTelemetry's: a span whose work failed records [`ERROR_TYPE`], a short
//! low-cardinality name of what went wrong; `otel.name` gives a trace a name built at run time
//! (`chat gpt-4o-mini`) where the `tracing` name must be fixed; model calls, tool calls and the
//! memory operations follow the GenAI semantic conventions (`gen_ai.*`, see [`gen_ai`]).

/// One run of a job (fields `extension`, `job`, [`JOB_OUTCOME`], `failed_items`).
pub const JOB: &str = "job";
/// The field of a [`JOB`] span that says how the run ended: `ok`, `partial` (some of its items
/// failed) or `failed`.
pub const JOB_OUTCOME: &str = "outcome";
/// Gathering the context blocks of every context provider for one turn or `/v1/context`
/// (field `blocks`); each provider's block is a `context` span under it. A GenAI retrieval:
/// `gen_ai.operation.name` is [`gen_ai::RETRIEVAL`]; the exported name stays
/// `context.assemble`.
pub const CONTEXT_ASSEMBLY: &str = "context.assemble";
/// One call of an extension's tool (fields `extension`, `tool`), after the GenAI conventions'
/// tool execution span: `otel.name` is `execute_tool {tool}`, fields `gen_ai.operation.name`
/// ([`gen_ai::EXECUTE_TOOL`]), `gen_ai.tool.name`, and [`ERROR_TYPE`] on failure.
pub const TOOL: &str = "tool";
/// One chat-completion request to a model server, retries included, after the GenAI
/// conventions: `otel.name` is `chat {model}`, fields `gen_ai.operation.name`,
/// `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens`,
/// `gen_ai.usage.output_tokens`, and [`ERROR_TYPE`] on failure.
pub const LLM_CHAT: &str = "llm.chat";
/// One embeddings request to a model server, retries included, after the GenAI conventions:
/// `otel.name` is `embeddings {model}`, fields `gen_ai.operation.name`
/// ([`gen_ai::EMBEDDINGS`]), `gen_ai.provider.name`, `gen_ai.request.model`,
/// `gen_ai.embeddings.dimension.count`, `gen_ai.usage.input_tokens`, and [`ERROR_TYPE`] on
/// failure.
pub const LLM_EMBEDDINGS: &str = "llm.embeddings";
/// The field a failed span records: what kind of failure (`timeout`, `503`, `database`).
pub const ERROR_TYPE: &str = "error.type";
/// The tokens a model call read (prompt), as the server counted them.
pub const GEN_AI_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// The tokens a model call wrote (completion), as the server counted them.
pub const GEN_AI_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// The model a request asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";

/// The OpenTelemetry GenAI semantic conventions' names that mnemo's spans carry, as defined in
/// `open-telemetry/semantic-conventions-genai` (`model/gen-ai/registry.yaml` and `spans.yaml`
/// at commit `002c8a6e`, all of stability "development"). `tracing` field names must be
/// literal, so spans write the keys out; these constants name them for readers and recorders.
pub mod gen_ai {
    /// The attribute naming the operation; its values are the constants below.
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// The attribute naming who serves the operation (`openai` for an OpenAI-compatible server).
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// The attribute naming the tool of an [`EXECUTE_TOOL`] span.
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    /// The attribute counting the memory records an operation returned ([`SEARCH_MEMORY`]),
    /// tried to create ([`CREATE_MEMORY`]) or removed ([`DELETE_MEMORY`]).
    pub const MEMORY_RECORD_COUNT: &str = "gen_ai.memory.record.count";

    /// A chat completion.
    pub const CHAT: &str = "chat";
    /// An embeddings request.
    pub const EMBEDDINGS: &str = "embeddings";
    /// A tool's execution.
    pub const EXECUTE_TOOL: &str = "execute_tool";
    /// Retrieving context from a search system (mnemo's context assembly).
    pub const RETRIEVAL: &str = "retrieval";
    /// Searching a memory store.
    pub const SEARCH_MEMORY: &str = "search_memory";
    /// Creating memory records (mnemo's ingest of conversation events).
    pub const CREATE_MEMORY: &str = "create_memory";
    /// Deleting memory records (mnemo's forget, with what was derived from it).
    pub const DELETE_MEMORY: &str = "delete_memory";
}

/// A count as a span field. OpenTelemetry's integer attributes are signed, and
/// `tracing-opentelemetry` writes unsigned fields as text, so counts are recorded as `i64`.
pub fn count<N: TryInto<i64>>(count: N) -> i64 {
    count.try_into().unwrap_or(i64::MAX)
}
