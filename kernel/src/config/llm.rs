//! `[llm]`: which language model the kernel offers extensions and the agent turn, and how it is
//! reached.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which language model the kernel offers extensions and the agent turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LlmProvider {
    /// No model: features that need one report that they are not configured.
    #[default]
    None,
    /// Any server speaking OpenAI's chat-completions protocol (OpenAI, Ollama, llama.cpp, vLLM).
    Openai,
    /// Replies queued in advance (replay and demos).
    Scripted,
}

/// `[llm]`: the model used by consolidation, reflection, LLM NER and `mnemo chat`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// `none`, `openai` or `scripted`.
    pub provider: LlmProvider,
    /// Base URL of the API, ending before `/chat/completions`; `MNEMO_LLM_BASE_URL` overrides.
    pub base_url: String,
    /// Model name; `MNEMO_LLM_MODEL` overrides.
    pub model: String,
    /// API key, if the server needs one; `MNEMO_LLM_API_KEY` overrides. Prefer the variable.
    pub api_key: Option<String>,
    /// Request timeout in seconds.
    pub timeout_secs: u64,
    /// Sampling temperature.
    pub temperature: f32,
    /// Most tokens in any reply, for requests that set no bound of their own: a runaway local
    /// model otherwise generates long after the timeout, and the requests queued behind it fail.
    pub max_tokens: u32,
    /// Whether replies are streamed: the client then stops reading, and closes the connection,
    /// once a reply passes `max_tokens` or the timeout, which ends the generation on servers that
    /// ignore `max_tokens` but notice a client leaving (llama-cpp-python). A server that answers
    /// a streamed request with a plain reply is read as before.
    pub stream: bool,
    /// Tries after a failed request when the server is overloaded, restarting or unreachable
    /// (429, 5xx, connection errors); 0 turns retrying off. Timeouts are not retried.
    pub max_retries: u32,
    /// The wait before the first retry, in milliseconds; each later one waits twice as long.
    pub retry_base_ms: u64,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout_secs", &self.timeout_secs)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("stream", &self.stream)
            .field("max_retries", &self.max_retries)
            .field("retry_base_ms", &self.retry_base_ms)
            .finish()
    }
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            provider: LlmProvider::None,
            base_url: "https://api.openai.com/v1".to_owned(),
            model: "gpt-4o-mini".to_owned(),
            api_key: None,
            timeout_secs: 60,
            temperature: 0.2,
            max_tokens: 1_024,
            stream: true,
            max_retries: 2,
            retry_base_ms: 500,
        }
    }
}
