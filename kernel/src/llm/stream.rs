//! Assembly of a streamed chat-completion reply (OpenAI's server-sent events: `data: {...}`
//! lines of `chat.completion.chunk` objects, ending `data: [DONE]`) into one [`ChatResponse`],
//! counting the reply's tokens as they come so that the client can stop reading, and so close
//! the connection, once the reply passes its `max_tokens`.
//!
//! Tokens are counted as deltas: one content or tool-argument piece is one token. llama.cpp's
//! server, llama-cpp-python, Ollama, vLLM and OpenAI send one token per delta, so the count is the
//! server's own and a reply the server bounds itself is never cut before it ends. Characters / 4
//! would cut replies of long words early. A server that packs many tokens into a delta is still
//! bounded by the characters: [`CHARS_PER_TOKEN_BOUND`] per token, more than any tokenizer's
//! average.

use serde_json::{json, Value};

use super::{ChatResponse, LlmError, LlmToolCall};

/// The `finish_reason` of a reply that reached its `max_tokens`, as the server says it or as
/// the client sets it for a reply it cut.
pub(crate) const FINISH_LENGTH: &str = "length";

/// A reply of `max_tokens` tokens has at most this many characters per token before it counts
/// as over the bound (for servers whose deltas carry several tokens).
const CHARS_PER_TOKEN_BOUND: usize = 16;

/// Longest event line read: a server that sends more without a line break is not streaming
/// events.
const MAX_LINE_BYTES: usize = 1 << 20;

/// What the stream said so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// More is to come.
    Reading,
    /// `data: [DONE]`: the reply is complete.
    Done,
    /// The reply passed `max_tokens`: stop reading.
    OverBound,
}

/// One tool call being assembled from its pieces.
#[derive(Debug, Default)]
struct PartialCall {
    /// The call's id, from its first piece that has one.
    id: String,
    /// The tool's name, from its first piece that has one.
    name: String,
    /// The arguments' pieces, joined.
    arguments: String,
}

/// Builds a reply from the bytes of a `text/event-stream` body.
#[derive(Debug)]
pub(crate) struct StreamAssembler {
    /// The reply's bound.
    max_tokens: u32,
    /// Bytes of an incomplete last line.
    pending: Vec<u8>,
    /// The text so far.
    content: String,
    /// Whether any delta carried content (a reply of only tool calls has `content: None`).
    has_content: bool,
    /// Tool calls so far, by the server's `index`.
    calls: Vec<(u64, PartialCall)>,
    /// The last `finish_reason` the server sent.
    finish_reason: Option<String>,
    /// The model the server named.
    model: Option<String>,
    /// The server's token counts (the last chunk, when asked for).
    usage: Option<Value>,
    /// Content and tool-argument deltas so far: the reply's tokens.
    tokens: u64,
    /// Characters of content and tool arguments so far.
    chars: usize,
    /// Whether any event arrived.
    started: bool,
    /// Whether `[DONE]` arrived.
    done: bool,
}

impl StreamAssembler {
    /// An assembler for a reply bounded by `max_tokens`.
    pub(crate) fn new(max_tokens: u32) -> Self {
        Self {
            max_tokens,
            pending: Vec::new(),
            content: String::new(),
            has_content: false,
            calls: Vec::new(),
            finish_reason: None,
            model: None,
            usage: None,
            tokens: 0,
            chars: 0,
            started: false,
            done: false,
        }
    }

    /// Reads the next piece of the body.
    ///
    /// # Errors
    /// [`LlmError::Protocol`] for an event that is not a chunk, or an error the server sent in
    /// the stream.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<Progress, LlmError> {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            self.line(line.trim_end_matches(['\n', '\r']))?;
            if self.done {
                return Ok(Progress::Done);
            }
            if self.over_bound() {
                return Ok(Progress::OverBound);
            }
        }
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(LlmError::Protocol(format!(
                "a streamed line is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(Progress::Reading)
    }

    /// Whether the reply passed `max_tokens`.
    fn over_bound(&self) -> bool {
        let bound = u64::from(self.max_tokens);
        self.tokens > bound
            || self.chars > (self.max_tokens as usize).saturating_mul(CHARS_PER_TOKEN_BOUND)
    }

    /// Whether any event arrived.
    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// The reply's tokens so far, counted as deltas.
    pub(crate) fn tokens(&self) -> u64 {
        self.tokens
    }

    /// One line of the event stream. Comments (`: ping`), `event:`, `id:` and `retry:` lines and
    /// blank lines carry no chunk.
    fn line(&mut self, line: &str) -> Result<(), LlmError> {
        let Some(data) = line.strip_prefix("data:") else {
            return Ok(());
        };
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        self.started = true;
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|err| {
            LlmError::Protocol(format!(
                "a streamed event is not JSON ({err}): {}",
                data.chars().take(200).collect::<String>()
            ))
        })?;
        self.chunk(&chunk)
    }

    /// One `chat.completion.chunk`.
    fn chunk(&mut self, chunk: &Value) -> Result<(), LlmError> {
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(LlmError::Protocol(format!(
                "the server reported an error in the stream: {message}"
            )));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(usage.clone());
        }
        // Only the first choice is read, as in a plain reply; chunks of the usage carry none.
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| {
                choices
                    .iter()
                    .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            })
        else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        if let Some(piece) = delta.get("content").and_then(Value::as_str) {
            self.has_content = true;
            if !piece.is_empty() {
                self.content.push_str(piece);
                self.count(piece);
            }
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tool_call_piece(call);
            }
        }
        Ok(())
    }

    /// One piece of a tool call: its `index` says which call (a piece without one continues
    /// the last call, or starts one when it brings a new id); the id and name come whole, in
    /// the first piece (llama-cpp-python repeats them in every piece); arguments come in pieces.
    fn tool_call_piece(&mut self, piece: &Value) {
        let id = piece.get("id").and_then(Value::as_str).unwrap_or_default();
        let function = piece.get("function").unwrap_or(&Value::Null);
        let index = match piece.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            None => match self.calls.last() {
                Some((last, call)) if id.is_empty() || call.id == id => *last,
                Some((last, _)) => last + 1,
                None => 0,
            },
        };
        let position = match self.calls.iter().position(|(known, _)| *known == index) {
            Some(position) => position,
            None => {
                self.calls.push((index, PartialCall::default()));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[position].1;
        if call.id.is_empty() {
            call.id = id.to_owned();
        }
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            if call.name.is_empty() {
                call.name = name.to_owned();
            }
        }
        let arguments = match function.get("arguments") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            // A server that sends the arguments as an object sends them whole.
            Some(other) => other.to_string(),
        };
        if !arguments.is_empty() {
            call.arguments.push_str(&arguments);
            self.count(&arguments);
        }
    }

    /// Counts one delta of the reply as one token.
    fn count(&mut self, piece: &str) {
        self.tokens += 1;
        self.chars += piece.chars().count();
    }

    /// The reply assembled so far, and a plain reply's `model` and `usage` for the span. A
    /// reply cut at the bound gets `finish_reason` [`FINISH_LENGTH`].
    ///
    /// # Errors
    /// [`LlmError::Protocol`] if a tool call never got a name.
    pub(crate) fn finish(self, cut: bool) -> Result<(ChatResponse, Value), LlmError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (_, call) in self.calls {
            if call.name.is_empty() {
                return Err(LlmError::Protocol(
                    "a streamed tool call has no function name".to_owned(),
                ));
            }
            let arguments = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| Value::String(call.arguments.clone()))
            };
            tool_calls.push(LlmToolCall {
                id: call.id,
                name: call.name,
                arguments,
            });
        }
        let finish_reason = if cut {
            Some(FINISH_LENGTH.to_owned())
        } else {
            self.finish_reason
        };
        let mut summary = json!({});
        if let Some(model) = self.model {
            summary["model"] = json!(model);
        }
        if let Some(usage) = self.usage {
            summary["usage"] = usage;
        }
        let response = ChatResponse {
            content: (self.has_content || tool_calls.is_empty()).then_some(self.content),
            tool_calls,
            finish_reason,
        };
        Ok((response, summary))
    }

    /// Whether the reply is complete: `[DONE]` arrived, or (for servers that end the stream
    /// without it) a `finish_reason` did.
    pub(crate) fn complete(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(chunk: &Value) -> String {
        format!("data: {chunk}\n\n")
    }

    fn delta(delta: Value) -> String {
        event(
            &json!({"model": "m", "choices": [{"index": 0, "delta": delta,
            "finish_reason": null}]}),
        )
    }

    /// Content and tool calls arrive in pieces, split anywhere (even inside a line), with
    /// comments between them, and come out whole at `[DONE]`.
    #[test]
    fn assembles_content_and_tool_calls_from_pieces() {
        let mut body = String::new();
        body.push_str(": ping - 2026-12-03\r\n\r\n");
        body.push_str(&delta(json!({"role": "assistant", "content": ""})));
        body.push_str(&delta(json!({"content": "Let me "})));
        body.push_str(&delta(json!({"content": "look."})));
        body.push_str(&delta(json!({"tool_calls": [{"index": 0, "id": "call_1",
            "type": "function", "function": {"name": "search", "arguments": ""}}]})));
        body.push_str(&delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"query\""}}]}),
        ));
        body.push_str(&delta(json!({"tool_calls": [{"index": 1, "id": "call_2",
            "function": {"name": "remember", "arguments": "{\"content\": \"x\"}"}}]})));
        body.push_str(&delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": ": \"tea\"}"}}]}),
        ));
        body.push_str(&event(&json!({"choices": [{"index": 0, "delta": {},
            "finish_reason": "tool_calls"}]})));
        body.push_str(&event(&json!({"choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5}})));
        body.push_str("data: [DONE]\n\n");

        let mut stream = StreamAssembler::new(100);
        let bytes = body.as_bytes();
        let mut progress = Progress::Reading;
        for piece in bytes.chunks(7) {
            assert_eq!(progress, Progress::Reading);
            progress = stream.feed(piece).unwrap();
        }
        assert_eq!(progress, Progress::Done);
        assert!(stream.complete());
        assert_eq!(stream.tokens(), 5);
        let (reply, summary) = stream.finish(false).unwrap();
        assert_eq!(reply.content.as_deref(), Some("Let me look."));
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].id, "call_1");
        assert_eq!(reply.tool_calls[0].name, "search");
        assert_eq!(reply.tool_calls[0].arguments, json!({"query": "tea"}));
        assert_eq!(reply.tool_calls[1].name, "remember");
        assert_eq!(reply.tool_calls[1].arguments, json!({"content": "x"}));
        assert_eq!(summary["model"], "m");
        assert_eq!(summary["usage"]["completion_tokens"], 5);
    }

    /// llama-cpp-python repeats the id and name in every piece of a call; they are kept once.
    #[test]
    fn repeated_names_are_not_concatenated() {
        let mut stream = StreamAssembler::new(100);
        for piece in ["{\"a\":", " 1}"] {
            let chunk = delta(json!({"tool_calls": [{"index": 0, "id": "c",
                "function": {"name": "save_facts", "arguments": piece}}]}));
            stream.feed(chunk.as_bytes()).unwrap();
        }
        stream.feed(b"data: [DONE]\n").unwrap();
        let (reply, _) = stream.finish(false).unwrap();
        assert_eq!(reply.content, None);
        assert_eq!(reply.tool_calls[0].name, "save_facts");
        assert_eq!(reply.tool_calls[0].arguments, json!({"a": 1}));
    }

    /// The chunks llama-cpp-python 0.3.36 streams for a named tool choice (as it sent them):
    /// a first chunk with nulls, then pieces that repeat the id and name and carry a legacy
    /// `function_call` beside `tool_calls`.
    #[test]
    fn reads_llama_cpp_python_tool_call_chunks() {
        let head = r#"{"id": "chatcmpl-e3", "object": "chat.completion.chunk", "created": 1796322468, "model": "smollm2", "choices": [{"index": 0, "finish_reason": "#;
        let mut body = format!(
            "data: {head}null, \"logprobs\": null, \"delta\": {{\"role\": \"assistant\", \"content\": null, \"function_call\": null, \"tool_calls\": null}}}}]}}\n\n"
        );
        for piece in ["{", "\\\"facts\\\"", " :[] } "] {
            body.push_str(&format!(
                "data: {head}null, \"logprobs\": null, \"delta\": {{\"role\": null, \"content\": null, \"function_call\": {{\"name\": \"save_facts\", \"arguments\": \"{piece}\"}}, \"tool_calls\": [{{\"index\": 0, \"id\": \"call__0_save_facts_cmpl-e3\", \"type\": \"function\", \"function\": {{\"name\": \"save_facts\", \"arguments\": \"{piece}\"}}}}]}}}}]}}\n\n"
            ));
        }
        body.push_str(&format!(
            "data: {head}\"tool_calls\", \"logprobs\": null, \"delta\": {{\"role\": null, \"content\": null, \"function_call\": null, \"tool_calls\": null}}}}]}}\n\ndata: [DONE]\n\n"
        ));
        let mut stream = StreamAssembler::new(40);
        assert_eq!(stream.feed(body.as_bytes()).unwrap(), Progress::Done);
        let (reply, summary) = stream.finish(false).unwrap();
        assert_eq!(reply.content, None);
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(reply.tool_calls[0].id, "call__0_save_facts_cmpl-e3");
        assert_eq!(reply.tool_calls[0].name, "save_facts");
        assert_eq!(reply.tool_calls[0].arguments, json!({"facts": []}));
        assert_eq!(summary["model"], "smollm2");
    }

    /// A reply past `max_tokens` deltas stops the reading and comes out cut, flagged `length`;
    /// so does one whose few deltas carry far too many characters.
    #[test]
    fn a_reply_past_the_bound_is_cut() {
        let mut stream = StreamAssembler::new(3);
        let word = delta(json!({"content": "la "}));
        for _ in 0..3 {
            assert_eq!(stream.feed(word.as_bytes()).unwrap(), Progress::Reading);
        }
        assert_eq!(stream.feed(word.as_bytes()).unwrap(), Progress::OverBound);
        let (reply, _) = stream.finish(true).unwrap();
        assert_eq!(reply.content.as_deref(), Some("la la la la "));
        assert_eq!(reply.finish_reason.as_deref(), Some(FINISH_LENGTH));
        assert!(reply.hit_max_tokens());

        let mut stream = StreamAssembler::new(3);
        let long = delta(json!({"content": "x".repeat(100)}));
        assert_eq!(stream.feed(long.as_bytes()).unwrap(), Progress::OverBound);
    }

    /// An error event and an event that is not JSON are protocol errors; a stream that has not
    /// ended is not complete.
    #[test]
    fn errors_in_the_stream_are_named() {
        let mut stream = StreamAssembler::new(10);
        assert!(!stream.started());
        stream
            .feed(delta(json!({"content": "a"})).as_bytes())
            .unwrap();
        assert!(stream.started() && !stream.complete());
        let err = stream
            .feed(b"data: {\"error\": {\"message\": \"out of memory\"}}\n")
            .unwrap_err();
        assert!(err.to_string().contains("out of memory"), "{err}");
        let err = StreamAssembler::new(10).feed(b"data: {oops\n").unwrap_err();
        assert!(matches!(err, LlmError::Protocol(_)), "{err:?}");
        let endless = vec![b'x'; MAX_LINE_BYTES + 1];
        let err = StreamAssembler::new(10).feed(&endless).unwrap_err();
        assert!(err.to_string().contains("longer than"), "{err}");
    }
}
