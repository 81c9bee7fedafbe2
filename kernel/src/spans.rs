//! The names of the `tracing` spans the kernel opens, and the fields they carry, for hosts that
//! turn spans into traces and metrics (`mnemo-telemetry`). Extensions publish the names of
//! their own spans in their API crates (`mnemo_memory_api::spans`).
//!
//! Conventions, after OpenTelemetry's: a span whose work failed records [`ERROR_TYPE`], a short
//! low-cardinality name of what went wrong; `otel.name` gives a trace a name built at run time
//! (`chat gpt-4o-mini`) where the `tracing` name must be fixed; model calls follow the GenAI
//! semantic conventions (`gen_ai.*`).

/// One run of a job (fields `extension`, `job`, [`JOB_OUTCOME`], `failed_items`).
pub const JOB: &str = "job";
/// The field of a [`JOB`] span that says how the run ended: `ok`, `partial` (some of its items
/// failed) or `failed`.
pub const JOB_OUTCOME: &str = "outcome";
/// Gathering the context blocks of every context provider for one turn or `/v1/context`
/// (field `blocks`); each provider's block is a `context` span under it.
pub const CONTEXT_ASSEMBLY: &str = "context.assemble";
/// One chat-completion request to a model server, retries included, after the GenAI
/// conventions: `otel.name` is `chat {model}`, fields `gen_ai.operation.name`,
/// `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens`,
/// `gen_ai.usage.output_tokens`, and [`ERROR_TYPE`] on failure.
pub const LLM_CHAT: &str = "llm.chat";
/// The field a failed span records: what kind of failure (`timeout`, `503`, `database`).
pub const ERROR_TYPE: &str = "error.type";
/// The tokens a model call read (prompt), as the server counted them.
pub const GEN_AI_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// The tokens a model call wrote (completion), as the server counted them.
pub const GEN_AI_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// The model a request asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";

/// A count as a span field. OpenTelemetry's integer attributes are signed, and
/// `tracing-opentelemetry` writes unsigned fields as text, so counts are recorded as `i64`.
pub fn count<N: TryInto<i64>>(count: N) -> i64 {
    count.try_into().unwrap_or(i64::MAX)
}
