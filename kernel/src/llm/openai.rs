//! A client for the OpenAI chat-completions protocol (OpenAI, Ollama, llama.cpp server, vLLM).
//! Replies are streamed unless `[llm] stream = false`, so that one running past its `max_tokens`
//! or the timeout can be abandoned (`stream.rs` assembles them); a plain JSON reply is read too.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tracing::Instrument as _;

use super::stream::{Progress, StreamAssembler};
use super::{ChatRequest, ChatResponse, ChatRole, LlmClient, LlmError, LlmToolCall, ToolChoice};
use crate::config::LlmConfig;
use crate::retry::{retry_after, RetryPolicy};

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
    max_tokens: u32,
    stream: bool,
    retry: RetryPolicy,
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
            max_tokens: config.max_tokens,
            stream: config.stream,
            retry: RetryPolicy::new(config.max_retries, config.retry_base_ms),
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
                            "parameters": without_length_limits(&tool.parameters),
                        },
                    })
                })
                .collect();
            body["tool_choice"] = match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            };
        }
        if request.json_reply {
            body["response_format"] = json!({"type": "json_object"});
        }
        // Every request is bounded: its own bound, never above the configured one.
        body["max_tokens"] = json!(request
            .max_tokens
            .map_or(self.max_tokens, |asked| asked.min(self.max_tokens)));
        if self.stream {
            // Streamed, the client can stop a reply that runs past the bound (`send`); the usage
            // comes in a last chunk only when asked for.
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }
}

/// Keywords that bound a string's or list's length. Their limits stay in the server-side check
/// of every tool call (`schema.rs`); a model is sent the schema without them, since grammar
/// engines such as llama.cpp's build one state per allowed character (`maxLength: 20000`
/// crashed llama-cpp-python's).
const LENGTH_KEYWORDS: [&str; 4] = ["maxLength", "minLength", "maxItems", "minItems"];

/// `schema` without [`LENGTH_KEYWORDS`], at any depth.
fn without_length_limits(schema: &Value) -> Value {
    match schema {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .filter(|(key, value)| {
                    !(LENGTH_KEYWORDS.contains(&key.as_str()) && value.is_number())
                })
                .map(|(key, value)| (key.clone(), without_length_limits(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_length_limits).collect()),
        other => other.clone(),
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

/// Writes what the server said about the reply (its model, why it stopped, the tokens it read
/// and wrote) into the current `llm.chat` span.
fn record_usage(reply: &Value, response: &ChatResponse) {
    let span = tracing::Span::current();
    if let Some(model) = reply.get("model").and_then(Value::as_str) {
        span.record("gen_ai.response.model", model);
    }
    if let Some(reason) = &response.finish_reason {
        span.record("gen_ai.response.finish_reasons", reason.as_str());
    }
    let usage = reply.get("usage");
    let count = |key: &str| {
        usage
            .and_then(|usage| usage.get(key))
            .and_then(Value::as_u64)
    };
    if let Some(input) = count("prompt_tokens") {
        span.record(
            crate::spans::GEN_AI_INPUT_TOKENS,
            crate::spans::count(input),
        );
    }
    if let Some(output) = count("completion_tokens") {
        span.record(
            crate::spans::GEN_AI_OUTPUT_TOKENS,
            crate::spans::count(output),
        );
    }
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
        let body = self.body(&request);
        let span = tracing::info_span!(
            crate::spans::LLM_CHAT,
            otel.name = %format_args!("chat {}", self.model),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = "openai",
            gen_ai.request.model = %self.model,
            gen_ai.request.max_tokens = body["max_tokens"].as_i64(),
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let result = self
            .complete_with_retries(&body)
            .instrument(span.clone())
            .await;
        if let Err(error) = &result {
            span.record(crate::spans::ERROR_TYPE, error.error_type());
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    fn model(&self) -> &str {
        &self.model
    }
}

impl OpenAiClient {
    /// Sends `body`, trying again after transient failures as the retry policy allows.
    async fn complete_with_retries(&self, body: &Value) -> Result<ChatResponse, LlmError> {
        let mut retry = 0;
        loop {
            let (error, wait) = match self.send(body).await {
                Ok(response) => return Ok(response),
                Err(Attempt::Final(error)) => return Err(error),
                Err(Attempt::Transient { error, retry_after }) => (error, retry_after),
            };
            if retry >= self.retry.max_retries {
                return Err(error);
            }
            let delay = self.retry.delay(retry, wait);
            tracing::warn!(
                %error, retry = retry + 1, delay_ms = delay.as_millis() as u64,
                "the model server failed; trying again"
            );
            tokio::time::sleep(delay).await;
            retry += 1;
        }
    }
}

/// How one request ended when it did not succeed.
enum Attempt {
    /// Another try may succeed: the server is overloaded, restarting or unreachable.
    Transient {
        error: LlmError,
        retry_after: Option<Duration>,
    },
    /// Another try would fail the same way.
    Final(LlmError),
}

impl OpenAiClient {
    /// One request and its reply.
    async fn send(&self, body: &Value) -> Result<ChatResponse, Attempt> {
        let mut http_request = self.http.post(&self.endpoint).json(body);
        if let Some(key) = &self.api_key {
            http_request = http_request.bearer_auth(key);
        }
        let response = http_request.send().await.map_err(|err| {
            if err.is_timeout() {
                Attempt::Final(LlmError::Timeout(self.timeout_secs))
            } else {
                Attempt::Transient {
                    error: LlmError::Transport(err.to_string()),
                    retry_after: None,
                }
            }
        })?;
        let status = response.status();
        let wait = retry_after(response.headers());
        if status.is_success() && is_event_stream(&response) {
            let bound = body["max_tokens"]
                .as_u64()
                .map_or(self.max_tokens, |bound| {
                    u32::try_from(bound).unwrap_or(u32::MAX)
                });
            return self.read_stream(response, bound).await;
        }
        let text = response.text().await.map_err(|err| {
            if err.is_timeout() {
                Attempt::Final(LlmError::Timeout(self.timeout_secs))
            } else {
                Attempt::Transient {
                    error: LlmError::Transport(err.to_string()),
                    retry_after: None,
                }
            }
        })?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Attempt::Final(LlmError::NotFound {
                url: self.endpoint.clone(),
            }));
        }
        if !status.is_success() {
            let error = LlmError::Status {
                status: status.as_u16(),
                body: excerpt(&text),
            };
            return Err(if RetryPolicy::is_transient_status(status.as_u16()) {
                Attempt::Transient {
                    error,
                    retry_after: wait,
                }
            } else {
                Attempt::Final(error)
            });
        }
        let reply: Value = serde_json::from_str(&text).map_err(|err| {
            Attempt::Final(LlmError::Protocol(format!(
                "reply is not JSON ({err}): {}",
                excerpt(&text)
            )))
        })?;
        let response = parse_reply(&reply).map_err(Attempt::Final)?;
        record_usage(&reply, &response);
        Ok(response)
    }
}

impl OpenAiClient {
    /// Reads a streamed reply until `[DONE]`, or until it passes `bound` tokens: then the
    /// response is dropped unread, which closes the connection, and a server that notices
    /// (llama-cpp-python checks between tokens) stops generating. The timeout bounds the whole
    /// read as well (reqwest's total timeout covers the body).
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        bound: u32,
    ) -> Result<ChatResponse, Attempt> {
        let mut stream = StreamAssembler::new(bound);
        let cut = loop {
            match response.chunk().await {
                Ok(Some(bytes)) => match stream.feed(&bytes).map_err(Attempt::Final)? {
                    Progress::Reading => {}
                    Progress::Done => break false,
                    Progress::OverBound => break true,
                },
                Ok(None) if stream.complete() => break false,
                Ok(None) => return Err(broken_stream(&stream, "the stream ended")),
                Err(err) if err.is_timeout() => {
                    return Err(Attempt::Final(LlmError::Timeout(self.timeout_secs)))
                }
                Err(err) => return Err(broken_stream(&stream, &err.to_string())),
            }
        };
        drop(response);
        if cut {
            tracing::warn!(
                max_tokens = bound,
                "the model's reply passed max_tokens; stopped reading it and closed the connection"
            );
        }
        let (response, summary) = stream.finish(cut).map_err(Attempt::Final)?;
        if response.finish_reason.is_none() {
            // llama-cpp-python ends a stream this way when another request interrupts it.
            tracing::warn!("the streamed reply ended without a finish_reason; it may be cut short");
        }
        record_usage(&summary, &response);
        Ok(response)
    }
}

/// Whether the reply is a server-sent event stream (a server that ignores `stream` answers
/// with plain JSON).
fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

/// How a stream that ended before the reply did fails. Broken off after some events, it is a
/// transport failure, tried again; broken off before the first one, the server accepted the
/// request and then could not serve it (llama-cpp-python answers 200 and then raises when its
/// chat format cannot stream the request: chatml-function-calling with `tool_choice: auto`), and
/// another try would fail the same way.
fn broken_stream(stream: &StreamAssembler, cause: &str) -> Attempt {
    if stream.started() {
        Attempt::Transient {
            error: LlmError::Transport(format!(
                "the streamed reply broke off after {} tokens: {cause}",
                stream.tokens()
            )),
            retry_after: None,
        }
    } else {
        Attempt::Final(LlmError::Protocol(format!(
            "the server accepted the streamed request but broke off before its first event \
             ({cause}); a server that cannot stream this request (llama-cpp-python's \
             chatml-function-calling with tools the model may choose) needs another chat \
             format, or [llm] stream = false"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> OpenAiClient {
        OpenAiClient::new(&LlmConfig {
            base_url: "http://127.0.0.1:9/v1".to_owned(),
            model: "m".to_owned(),
            ..LlmConfig::default()
        })
        .unwrap()
    }

    /// Tools go out with `tool_choice` (llama.cpp's server drops them otherwise) and without
    /// length keywords, which stay in the server-side check only.
    #[test]
    fn tools_are_sent_with_a_choice_and_without_length_limits() {
        let tool = super::super::ToolSpec {
            name: "remember".to_owned(),
            description: "d".to_owned(),
            parameters: json!({"type": "object", "properties": {
                "content": {"type": "string", "maxLength": 20000, "minLength": 1},
                "subjects": {"type": "array", "maxItems": 50,
                    "items": {"type": "string", "maxLength": 200}},
                "maxLength": {"type": "integer"}
            }}),
        };
        let mut request = ChatRequest::new("s", "u");
        request.tools = vec![tool];
        let body = client().body(&request);
        assert_eq!(body["tool_choice"], json!("auto"));
        // A request without a bound of its own gets the configured one.
        assert_eq!(body["max_tokens"], json!(LlmConfig::default().max_tokens));
        // Streamed by default, so that a reply past the bound can be cut (`read_stream`).
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        let sent = body["tools"][0]["function"]["parameters"].to_string();
        assert!(
            !sent.contains("20000") && !sent.contains("minLength"),
            "{sent}"
        );
        assert!(
            !sent.contains("maxItems") && !sent.contains("200"),
            "{sent}"
        );
        // A property that happens to be called `maxLength` is a property, not a limit.
        assert_eq!(
            body["tools"][0]["function"]["parameters"]["properties"]["maxLength"],
            json!({"type": "integer"})
        );
        request.tool_choice = ToolChoice::Tool("remember".to_owned());
        assert_eq!(
            client().body(&request)["tool_choice"],
            json!({"type": "function", "function": {"name": "remember"}})
        );
        request.tools.clear();
        assert!(client().body(&request).get("tool_choice").is_none());
    }

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
