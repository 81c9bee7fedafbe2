//! `mnemo mcp`: the Model Context Protocol on stdio (the official Rust SDK, rmcp), with the
//! handler of `mnemo_server::mcp`: every tool of the enabled extensions and the memory context,
//! acting for the configured user (`--user`), in one session per server run.
//!
//! A request line that is not JSON, not UTF-8 or longer than [`MAX_REQUEST_BYTES`] is answered
//! with a JSON-RPC error here, before rmcp (which would drop it silently) sees it.

use mnemo_kernel::host::Kernel;
use mnemo_server::mcp::McpHandler;
use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use crate::input::InputLine;

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
    sampling: Option<std::sync::Arc<mnemo_server::SamplingLlm>>,
) -> anyhow::Result<()> {
    let server = McpHandler::for_user(kernel.clone(), user, chat, sampling);
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
