//! What a scenario is once read: its steps, the expectations they carry, and the errors of
//! malformed lines.

use chrono::{DateTime, Duration, Utc};
use mnemo_kernel::host::ScriptedReply;
use mnemo_kernel::ConversationEvent;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A parsed scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Where it came from.
    pub name: String,
    /// Keys merged into the base config, from a leading `config` line.
    pub config: Option<Value>,
    /// The virtual clock's start.
    pub start: DateTime<Utc>,
    /// Whether the kernel gets the scripted model; `"llm": false` in the `config` line runs it
    /// with no model at all, as a user without `[llm]` would.
    pub with_llm: bool,
    /// The steps, with their 1-based line numbers.
    pub steps: Vec<(usize, Step)>,
}

/// A malformed line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct LineError {
    /// The scenario file.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Who a step acts for; missing ids default to the last conversation event's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Who {
    /// The user.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The chat.
    #[serde(default)]
    pub chat_id: Option<String>,
}

/// What a tool call, job run or agent turn must produce.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Must succeed (`true`) or fail (`false`).
    #[serde(default)]
    pub ok: Option<bool>,
    /// Must fail with an error containing this text.
    #[serde(default)]
    pub error_contains: Option<String>,
    /// The result (or reply, or job report) must contain each text (case-insensitive).
    #[serde(default)]
    pub contains: Vec<String>,
    /// The result must contain none of these texts.
    #[serde(default)]
    pub not_contains: Vec<String>,
    /// The result must contain these texts in this order (case-insensitive), each after the
    /// one before it.
    #[serde(default)]
    pub in_order: Vec<String>,
    /// The result must equal this JSON value.
    #[serde(default)]
    pub equals: Option<Value>,
    /// The agent turn must make exactly this many tool calls.
    #[serde(default)]
    pub tool_calls: Option<usize>,
}

/// One scenario step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Publish a conversation event; the clock first moves to its time (firing due jobs).
    Event(ConversationEvent),
    /// Move the virtual clock, firing every job that comes due.
    Advance {
        /// The new time.
        to: DateTime<Utc>,
    },
    /// Move the virtual clock by a duration.
    AdvanceBy {
        /// How far.
        by: Duration,
    },
    /// Queue a scripted LLM reply.
    LlmReply(ScriptedReply),
    /// Call a tool as the agent would.
    ToolCall {
        /// Tool name.
        tool: String,
        /// Arguments.
        args: Value,
        /// Caller.
        who: Who,
        /// Expectation, if any; without one, an error fails the step.
        expect: Option<Expect>,
        /// Keep the result under this name; later arguments may say `"${name.field}"`.
        save_as: Option<String>,
    },
    /// Run a job by name now.
    RunJob {
        /// Job name.
        job: String,
        /// Expectation on the run's outcome.
        expect: Option<Expect>,
    },
    /// Run a whole agent turn on the scripted model.
    AgentTurn {
        /// The user's message.
        text: String,
        /// Speaker.
        who: Who,
        /// Expectation on the reply.
        expect: Option<Expect>,
    },
    /// The system prompt for `prompt` must (not) contain texts.
    ExpectContext {
        /// The user's message.
        prompt: String,
        /// Speaker.
        who: Who,
        /// Texts that must appear.
        contains: Vec<String>,
        /// Texts that must not appear.
        not_contains: Vec<String>,
        /// Texts that must appear in this order.
        in_order: Vec<String>,
    },
    /// What the scripted model was sent in one request must (not) contain texts.
    ExpectLlmRequest {
        /// Which request: 1 for the first, -1 for the last (the default).
        index: i64,
        /// Texts that must appear in its messages.
        contains: Vec<String>,
        /// Texts that must not appear in its messages.
        not_contains: Vec<String>,
    },
    /// A search tool's results must (not) contain texts, in order or count.
    ExpectSearch {
        /// The search tool.
        tool: String,
        /// The query.
        query: String,
        /// Extra arguments.
        args: Map<String, Value>,
        /// Caller.
        who: Who,
        /// Texts some result must contain.
        contains: Vec<String>,
        /// Texts no result may contain.
        not_contains: Vec<String>,
        /// Text the first result must contain.
        top: Option<String>,
        /// Exact number of results.
        count: Option<usize>,
    },
    /// One user's stored memories, as the memory service lists them, must (not) hold texts.
    ExpectMemories {
        /// The owner; the last event's user by default.
        user_id: Option<String>,
        /// Only this chat's memories; every scope of the owner when absent.
        chat_id: Option<String>,
        /// Only this kind.
        kind: Option<mnemo_memory_api::MemoryKind>,
        /// Also memories no longer active (decayed, corrected, superseded, expired).
        inactive: bool,
        /// Texts some memory must contain.
        contains: Vec<String>,
        /// Texts no memory may contain.
        not_contains: Vec<String>,
        /// Exact number of memories.
        count: Option<usize>,
    },
    /// A count must equal a number.
    ExpectCount {
        /// What is counted.
        of: CountOf,
        /// The expected number.
        equals: u64,
    },
    /// What the store recorded of one session (the last event's by default) must match.
    ExpectSession {
        /// The session: its user, chat and id.
        who: Who,
        /// The messaging provider it must have come through; `None`: it must have none.
        provider: Option<String>,
    },
    /// Write a file in the data directory, as a person editing it by hand would.
    WriteFile {
        /// Relative to the data directory; never leaves it.
        path: String,
        /// The whole new text.
        text: String,
    },
    /// A file in the data directory must (not) exist and (not) contain texts.
    ExpectFile {
        /// Relative to the data directory; never leaves it.
        path: String,
        /// Whether it must exist.
        exists: bool,
        /// Texts that must appear (exact case).
        contains: Vec<String>,
        /// Texts that must not appear.
        not_contains: Vec<String>,
    },
}

/// What an `expect_count` counts.
#[derive(Debug, Clone, PartialEq)]
pub enum CountOf {
    /// Events published on a topic.
    Events(String),
    /// Runs of a job.
    JobRuns(String),
    /// Failed runs of a job.
    JobFailures(String),
    /// Requests the scripted model received.
    LlmRequests,
    /// Scripted replies not used yet.
    LlmRepliesLeft,
    /// Tools offered by enabled extensions.
    Tools,
    /// Jobs registered by enabled extensions.
    Jobs,
    /// Items a tool call returns.
    ToolResults {
        /// The tool.
        tool: String,
        /// Its arguments.
        args: Value,
        /// Caller.
        who: Who,
    },
}
