//! Language-model access for extensions and the agent turn.

pub(crate) mod json;
pub(crate) mod model_text;
pub(crate) mod openai;
pub(crate) mod scripted;
pub(crate) mod stream;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::extension::ToolSpec;

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRole {
    /// Instructions and context.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmToolCall {
    /// The call's id, echoed in the tool message that answers it.
    #[serde(default)]
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments; a string the model produced that is not JSON stays a string.
    #[serde(default)]
    pub arguments: Value,
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: ChatRole,
    /// The text.
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<LlmToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(ChatRole::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(ChatRole::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(ChatRole::Assistant, content)
    }

    /// A tool result answering `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: ChatRole::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(tool_call_id.into()),
        }
    }

    fn plain(role: ChatRole, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A chat-completion request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Ask for a JSON object reply (OpenAI's `response_format`).
    #[serde(default)]
    pub json_reply: bool,
    /// Most tokens in the reply; the client's configured bound (`[llm] max_tokens`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Whether the model must call a tool. Sent whenever tools are offered: servers such as
    /// llama.cpp's drop the tools from a request that does not say.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// The user whose memories the request carries, when it carries one user's. A client that
    /// reaches several users' own models (MCP sampling) asks only that user's, so that no
    /// user's conversation reaches another's model; it refuses a request without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// Whether and which tool the model must call (OpenAI's `tool_choice`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call one of the tools.
    Required,
    /// The model must call this tool.
    Tool(String),
}

impl ChatRequest {
    /// A request with a system and a user message.
    pub fn new(system: impl Into<String>, user: impl Into<String>) -> Self {
        Self {
            messages: vec![ChatMessage::system(system), ChatMessage::user(user)],
            ..Self::default()
        }
    }
}

/// The model's reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The text, if any.
    pub content: Option<String>,
    /// Tools the model wants called.
    #[serde(default)]
    pub tool_calls: Vec<LlmToolCall>,
    /// Why the model stopped, as the server says it; `length` for a reply that reached its
    /// `max_tokens`, whether the server stopped it or the client cut it (see
    /// [`ChatResponse::hit_max_tokens`]).
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl ChatResponse {
    /// Whether the reply ended at its `max_tokens` (`finish_reason` `length`) rather than where
    /// the model meant to stop: its text may end mid-sentence and a tool call's arguments may be
    /// cut (they are then the raw string, not JSON). The OpenAI client also cuts a streamed reply
    /// that runs past the bound on a server that ignores it, and returns it so flagged.
    pub fn hit_max_tokens(&self) -> bool {
        self.finish_reason.as_deref() == Some(stream::FINISH_LENGTH)
    }
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The request took longer than the configured timeout.
    #[error("the model did not answer within {0} s")]
    Timeout(u64),
    /// The server answered with an error status.
    #[error("the server answered {status}: {body}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The server answered 404 for the endpoint: usually a `base_url` without its `/v1`.
    #[error("the server has no {url} (404 Not Found); does base_url need to end in /v1?")]
    NotFound {
        /// The URL the server does not know.
        url: String,
    },
    /// The server could not be reached.
    #[error("cannot reach the model server: {0}")]
    Transport(String),
    /// The server's reply did not follow the protocol.
    #[error("unexpected reply from the model server: {0}")]
    Protocol(String),
    /// No model can take this request now (an MCP client that samples for this user is not
    /// connected); nothing was sent. Callers leave their work for a later run without counting
    /// it as a failure.
    #[error("no model is available: {0}")]
    Unavailable(String),
    /// A scripted client has no reply left, or was told to fail.
    #[error("scripted model: {0}")]
    Scripted(String),
}

impl LlmError {
    /// What kind of failure, as a span's `error.type`: the HTTP status for an error status,
    /// otherwise a fixed word (`timeout`, `transport`, `protocol`, ...).
    pub(crate) fn error_type(&self) -> String {
        match self {
            Self::Timeout(_) => "timeout".to_owned(),
            Self::Status { status, .. } => status.to_string(),
            Self::NotFound { .. } => "404".to_owned(),
            Self::Transport(_) => "transport".to_owned(),
            Self::Protocol(_) => "protocol".to_owned(),
            Self::Unavailable(_) => "unavailable".to_owned(),
            Self::Scripted(_) => "scripted".to_owned(),
        }
    }
}

/// A chat-completion model.
#[async_trait]
pub trait LlmClient: Send + Sync + 'static {
    /// Sends one request and returns the model's reply.
    ///
    /// # Errors
    /// [`LlmError`] naming what failed; callers must leave their data unchanged on error.
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError>;

    /// The model's name, for logs.
    fn model(&self) -> &str;

    /// Whether the model can answer at all now. A configured server is assumed reachable (its
    /// failures are errors); a model reached through a client that comes and goes (MCP
    /// sampling) is not there while no such client is connected, and then extensions see no
    /// model ([`crate::KernelContext::llm`]).
    fn available(&self) -> bool {
        true
    }
}
