//! A scenario line as written: one JSON object per step, tagged by `type`, with the defaults of
//! the fields a line may leave out.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::Expect;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum RawStep {
    Config {
        #[serde(default)]
        set: Option<Value>,
        #[serde(default)]
        start: Option<DateTime<Utc>>,
        #[serde(default)]
        llm: Option<bool>,
    },
    Advance {
        #[serde(default)]
        to: Option<DateTime<Utc>>,
        #[serde(default)]
        by: Option<String>,
    },
    LlmReply {
        #[serde(default)]
        text: Option<String>,
        #[serde(default)]
        tool_calls: Option<Vec<mnemo_kernel::LlmToolCall>>,
        #[serde(default)]
        error: Option<String>,
    },
    ToolCall {
        tool: String,
        #[serde(default)]
        args: Value,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        expect: Option<Expect>,
        #[serde(default)]
        save_as: Option<String>,
    },
    RunJob {
        job: String,
        #[serde(default)]
        expect: Option<Expect>,
    },
    AgentTurn {
        text: String,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        expect: Option<Expect>,
    },
    ExpectContext {
        prompt: String,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
        #[serde(default)]
        in_order: Vec<String>,
    },
    ExpectLlmRequest {
        #[serde(default = "last_request")]
        index: i64,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
    },
    ExpectSearch {
        #[serde(default = "default_search_tool")]
        tool: String,
        query: String,
        #[serde(default)]
        args: Map<String, Value>,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
        #[serde(default)]
        top: Option<String>,
        #[serde(default)]
        count: Option<usize>,
    },
    ExpectMemories {
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        kind: Option<String>,
        #[serde(default)]
        inactive: bool,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
        #[serde(default)]
        count: Option<usize>,
    },
    ExpectSession {
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        provider: Option<String>,
    },
    WriteFile {
        path: String,
        text: String,
    },
    ExpectFile {
        path: String,
        #[serde(default = "yes")]
        exists: bool,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
    },
    ExpectCount {
        of: String,
        equals: u64,
        #[serde(default)]
        topic: Option<String>,
        #[serde(default)]
        job: Option<String>,
        #[serde(default)]
        tool: Option<String>,
        #[serde(default)]
        args: Value,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
    },
}

fn yes() -> bool {
    true
}

fn last_request() -> i64 {
    -1
}

fn default_search_tool() -> String {
    "search_memory".to_owned()
}
