//! `mnemo mcp`: a Model Context Protocol server on stdio (the official Rust SDK, rmcp) offering
//! every tool of the enabled extensions, so any MCP client gets memory.
//!
//! Tools are known only at run time (they come from extensions), so the handler implements
//! `list_tools` and `call_tool` itself rather than with rmcp's macros. Every call acts for the
//! configured user (`--user`), in one session per server run.
//!
//! The memory context block that mnemo puts in its own system prompt is offered too: as the
//! prompt `memory_context` (for a `query`) and as the resource `mnemo://memory/context` (with no
//! particular query), for clients that add context themselves.
//!
//! A request line that is not JSON, not UTF-8 or longer than [`MAX_REQUEST_BYTES`] is answered
//! with a JSON-RPC error here, before rmcp (which would drop it silently) sees it.

use std::sync::Arc;

use mnemo_kernel::host::{Kernel, TurnInput};
use mnemo_kernel::{ToolError, ToolScope};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, InitializeResult, ListPromptsResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use crate::input::InputLine;

/// The MCP face of a running kernel.
struct MnemoServer {
    kernel: Kernel,
    user: String,
    chat: Option<String>,
    session: String,
}

/// The prompt that hands a client the memory context for a query.
const CONTEXT_PROMPT: &str = "memory_context";
/// The resource that holds the memory context with no particular query.
const CONTEXT_RESOURCE: &str = "mnemo://memory/context";

impl MnemoServer {
    /// The context blocks the kernel would put in the system prompt for `query`, for this
    /// server's user and chat; a line saying so when memory holds nothing for it.
    async fn context_block(&self, query: &str) -> String {
        // Not the tools' session: memory leaves a session's own memories out of its context
        // (they are the conversation so far), but an MCP client's conversation is not stored
        // here, so what it saved through the tools in this run belongs in the context too.
        let input = TurnInput {
            user_id: self.user.clone(),
            session_id: format!("{}-context", self.session),
            chat_id: self.chat.clone(),
            text: query.to_owned(),
        };
        let prepared = self.kernel.prepare_turn(&input, 0).await;
        let blocks: Vec<&str> = prepared
            .blocks
            .iter()
            .map(|(_, block)| block.trim_end())
            .filter(|block| !block.is_empty())
            .collect();
        if blocks.is_empty() {
            "Memory holds nothing about this yet.".to_owned()
        } else {
            blocks.join("\n\n")
        }
    }
}

impl ServerHandler for MnemoServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("mnemo", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Long-term memory. Use the memory tools to remember what the user tells you \
                 and to search what you know before answering.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .kernel
            .tools()
            .into_iter()
            .map(|spec| {
                let schema = spec.parameters.as_object().cloned().unwrap_or_default();
                Tool::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            CONTEXT_PROMPT,
            Some(
                "What memory holds that bears on a query (people, facts, reflections, the \
                 conversation so far), as the context block mnemo puts in its own system prompt.",
            ),
            Some(vec![PromptArgument::new("query")
                .with_description("what the conversation is about, e.g. the user's message")
                .with_required(true)]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != CONTEXT_PROMPT {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt `{}`; this server has `{CONTEXT_PROMPT}`",
                    request.name
                ),
                None,
            ));
        }
        let Some(query) = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("query"))
            .and_then(Value::as_str)
        else {
            return Err(ErrorData::invalid_params(
                format!("`{CONTEXT_PROMPT}` needs a `query` argument (a string)"),
                None,
            ));
        };
        let block = self.context_block(query).await;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, block)])
                .with_description(format!("Memory context for {}", self.user))
                .into(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resource = Resource::new(CONTEXT_RESOURCE, "memory context").with_description(
            "What memory holds for this user and chat before any particular question: \
                 people, reflections and recent memories, as mnemo's system-prompt block.",
        );
        resource.mime_type = Some("text/markdown".to_owned());
        Ok(ListResourcesResult::with_all_items(vec![resource]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != CONTEXT_RESOURCE {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource `{}`; this server has `{CONTEXT_RESOURCE}`",
                    request.uri
                ),
                None,
            ));
        }
        let block = self.context_block("").await;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(block, CONTEXT_RESOURCE).with_mime_type("text/markdown")
        ])
        .into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let scope = ToolScope {
            user_id: self.user.clone(),
            session_id: Some(self.session.clone()),
            chat_id: self.chat.clone(),
            at: self.kernel.context().now(),
        };
        let result = self
            .kernel
            .call_tool(&scope, &request.name, arguments)
            .await;
        match result {
            Ok(value) => {
                Ok(CallToolResult::success(vec![ContentBlock::text(value.to_string())]).into())
            }
            Err(ToolError::UnknownTool(name)) => Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            )),
            // A tool that ran and failed, or bad arguments: the client shows the message.
            Err(error) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into())
            }
        }
    }
}

/// The longest request line the server reads, in bytes; a longer one is answered with an error
/// naming this limit and never held in memory whole. MCP requests are small; the memory tools'
/// largest arguments (a batch of `remember` facts) stay far below it.
pub(crate) const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Serves MCP on stdin/stdout until the client closes stdin, then shuts the kernel down.
///
/// Standard input goes through [`filter_requests`] before rmcp sees it: rmcp's stdio transport
/// drops a line that is not JSON without a word (the client would wait for ever), so the
/// filter answers those lines itself and passes the others on. Both its answers and rmcp's go
/// to standard output through one writer, a whole line at a time.
pub(crate) async fn serve(
    kernel: Kernel,
    user: String,
    chat: Option<String>,
) -> anyhow::Result<()> {
    let session = format!("mcp-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%6f"));
    let server = MnemoServer {
        kernel: kernel.clone(),
        user,
        chat,
        session,
    };
    let (requests, server_input) = tokio::io::duplex(PIPE_BYTES);
    let (server_output, responses) = tokio::io::duplex(PIPE_BYTES);
    let (lines, outbox) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(write_lines(outbox, tokio::io::stdout()));
    let forwarder = tokio::spawn(forward_lines(responses, lines.clone()));
    let filter = tokio::spawn(filter_requests(tokio::io::stdin(), requests, lines));
    let served = match server.serve((server_input, server_output)).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(anyhow::Error::from),
        Err(error) => Err(error.into()),
    };
    kernel.shutdown().await;
    // Normally done already: the service ends when the filter reaches the end of the input.
    filter.abort();
    let _ = forwarder.await;
    match writer.await {
        Ok(Err(error)) => tracing::warn!(%error, "cannot write to standard output"),
        Err(error) => tracing::warn!(%error, "the output writer stopped"),
        Ok(Ok(())) => {}
    }
    served
}

/// Bytes buffered in each of the pipes between the filter, rmcp and the writer.
const PIPE_BYTES: usize = 64 * 1024;

/// Reads requests line by line (at most [`MAX_REQUEST_BYTES`] of a line) and passes each JSON
/// line on to the server; a line that is too long, not UTF-8 or not JSON gets a JSON-RPC error
/// on `replies` instead (`id: null`: its id cannot be read), and reading goes on.
async fn filter_requests<R: AsyncRead + Unpin>(
    input: R,
    mut server: DuplexStream,
    replies: mpsc::Sender<Vec<u8>>,
) {
    let mut reader = tokio::io::BufReader::new(input);
    loop {
        let line = match crate::input::next_line(&mut reader, MAX_REQUEST_BYTES).await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                tracing::warn!(%error, "cannot read standard input; the MCP server stops");
                break;
            }
        };
        let refusal = match line {
            InputLine::Text(text) if text.trim().is_empty() => continue,
            InputLine::Text(text) => match serde_json::from_str::<Value>(&text) {
                Ok(_) => {
                    let mut bytes = text.into_bytes();
                    bytes.push(b'\n');
                    if server.write_all(&bytes).await.is_err() {
                        break;
                    }
                    continue;
                }
                Err(error) => error_response(PARSE_ERROR, format!("Parse error: {error}")),
            },
            InputLine::NotUtf8(offset) => error_response(
                PARSE_ERROR,
                format!("Parse error: the request is not UTF-8 (invalid byte at offset {offset})"),
            ),
            InputLine::TooLong(length) => error_response(
                INVALID_REQUEST,
                format!(
                    "Invalid request: the request is {length} bytes; the limit is {MAX_REQUEST_BYTES} bytes per line"
                ),
            ),
        };
        tracing::debug!(%refusal, "request refused");
        let mut bytes = refusal.to_string().into_bytes();
        bytes.push(b'\n');
        if replies.send(bytes).await.is_err() {
            break;
        }
    }
}

/// JSON-RPC's code for a request that is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for a request that is not a valid request (here: too long to read).
const INVALID_REQUEST: i64 = -32600;

fn error_response(code: i64, message: String) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
}

/// Passes the server's output on to the writer, a whole line at a time.
async fn forward_lines(output: DuplexStream, lines: mpsc::Sender<Vec<u8>>) {
    let mut reader = tokio::io::BufReader::new(output);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(_) => {
                if lines.send(line).await.is_err() {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read the MCP server's output");
                break;
            }
        }
    }
}

/// Writes each line to `output` and flushes it, until every sender is gone.
async fn write_lines<W: AsyncWrite + Unpin>(
    mut outbox: mpsc::Receiver<Vec<u8>>,
    mut output: W,
) -> std::io::Result<()> {
    while let Some(line) = outbox.recv().await {
        output.write_all(&line).await?;
        output.flush().await?;
    }
    Ok(())
}
