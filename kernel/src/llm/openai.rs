//! A client for the OpenAI chat-completions protocol (OpenAI, Ollama, llama.cpp server, vLLM).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{ChatRequest, ChatResponse, ChatRole, LlmClient, LlmError, LlmToolCall};
use crate::config::LlmConfig;

/// Longest part of an error body kept in an error message.
const ERROR_BODY_LIMIT: usize = 500;

/// Talks to `{base_url}/chat/completions`.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    temperature: f32,
    timeout_secs: u64,
}

impl OpenAiClient {
    /// A client for the server and model in `config`.
    ///
    /// # Errors
    /// [`LlmError::Transport`] if the HTTP client cannot be built (TLS set-up).
    pub fn new(config: &LlmConfig) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs))
            .build()
            .map_err(|err| LlmError::Transport(err.to_string()))?;
        Ok(Self {
            http,
            endpoint: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            temperature: config.temperature,
            timeout_secs: config.timeout_secs,
        })
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| {
                let role = match message.role {
                    ChatRole::System => "system",
                    ChatRole::User => "user",
                    ChatRole::Assistant => "assistant",
                    ChatRole::Tool => "tool",
                };
                let mut wire = json!({"role": role, "content": message.content});
                if !message.tool_calls.is_empty() {
                    wire["tool_calls"] = message
                        .tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments.to_string()},
                            })
                        })
                        .collect();
                }
                if let Some(id) = &message.tool_call_id {
                    wire["tool_call_id"] = json!(id);
                }
                wire
            })
            .collect();
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        },
                    })
                })
                .collect();
        }
        if request.json_reply {
            body["response_format"] = json!({"type": "json_object"});
        }
        if let Some(max_tokens) = request.max_tokens {
            body["max_tokens"] = json!(max_tokens);
        }
        body
    }
}

fn parse_reply(reply: &Value) -> Result<ChatResponse, LlmError> {
    let choice = reply
        .get("choices")
        .and_then(|choices| choices.get(0))
        .ok_or_else(|| LlmError::Protocol("no `choices[0]` in the reply".to_owned()))?;
    let message = choice
        .get("message")
        .ok_or_else(|| LlmError::Protocol("no `choices[0].message` in the reply".to_owned()))?;
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let function = call.get("function").unwrap_or(&Value::Null);
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| LlmError::Protocol("a tool call has no function name".to_owned()))?;
            let arguments = match function.get("arguments") {
                Some(Value::String(raw)) => {
                    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
                }
                Some(other) => other.clone(),
                None => json!({}),
            };
            tool_calls.push(LlmToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                name: name.to_owned(),
                arguments,
            });
        }
    }
    Ok(ChatResponse {
        content,
        tool_calls,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn excerpt(text: &str) -> String {
    match text.char_indices().nth(ERROR_BODY_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[async_trait]
impl LlmClient for OpenAiClient {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut http_request = self.http.post(&self.endpoint).json(&self.body(&request));
        if let Some(key) = &self.api_key {
            http_request = http_request.bearer_auth(key);
        }
        let response = http_request.send().await.map_err(|err| {
            if err.is_timeout() {
                LlmError::Timeout(self.timeout_secs)
            } else {
                LlmError::Transport(err.to_string())
            }
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|err| {
            if err.is_timeout() {
                LlmError::Timeout(self.timeout_secs)
            } else {
                LlmError::Transport(err.to_string())
            }
        })?;
        if !status.is_success() {
            return Err(LlmError::Status {
                status: status.as_u16(),
                body: excerpt(&text),
            });
        }
        let reply: Value = serde_json::from_str(&text).map_err(|err| {
            LlmError::Protocol(format!("reply is not JSON ({err}): {}", excerpt(&text)))
        })?;
        parse_reply(&reply)
    }

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_call_arguments_given_as_string() {
        let reply = json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"query\":\"x\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "search", "arguments": "not json"}}
        ]}, "finish_reason": "tool_calls"}]});
        let parsed = parse_reply(&reply).unwrap();
        assert_eq!(parsed.tool_calls[0].arguments, json!({"query": "x"}));
        assert_eq!(parsed.tool_calls[1].arguments, json!("not json"));
        assert_eq!(parsed.finish_reason.as_deref(), Some("tool_calls"));
        assert!(parse_reply(&json!({"choices": []})).is_err());
    }
}
