//! The OpenAI client against a local server that, like llama-cpp-python with
//! `chatml-function-calling`, ignores `max_tokens`, generates one reply at a time, and stops a
//! generation only when a streaming client disconnects (a plain request runs to its end, here
//! never, long after the client gave up). Every request must come back bounded, and the request
//! behind a runaway one must be served.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_kernel::host::{LlmConfig, LlmProvider, OpenAiClient};
use mnemo_kernel::{ChatRequest, LlmClient, LlmError, ToolSpec};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Far longer than any bounded request takes, far shorter than "never".
const TEST_BOUND: Duration = Duration::from_secs(30);

/// What the server saw.
#[derive(Default)]
struct Seen {
    /// The bodies of the requests, in order.
    bodies: Mutex<Vec<Value>>,
    /// Streamed generations that ended because the client disconnected.
    disconnects: AtomicUsize,
}

/// A llama.cpp-like server: one generation at a time (a lock held while generating).
async fn start_server() -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let generating = Arc::new(tokio::sync::Mutex::new(()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (log, generating) = (log.clone(), generating.clone());
            tokio::spawn(async move { serve(stream, log, generating).await });
        }
    });
    (format!("http://{address}/v1"), seen)
}

async fn serve(mut stream: TcpStream, seen: Arc<Seen>, generating: Arc<tokio::sync::Mutex<()>>) {
    let Some(body) = read_body(&mut stream).await else {
        return;
    };
    seen.bodies.lock().unwrap().push(body.clone());
    let streamed = body["stream"] == json!(true);
    let prompt = body["messages"].to_string();
    let _generation = generating.lock().await;
    if prompt.contains("break off") && streamed {
        // llama-cpp-python with chatml-function-calling and `tool_choice: auto`: 200, then the
        // handler raises ("Automatic streaming tool choice is not supported") and the stream ends.
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        let _ = stream.write_all(head.as_bytes()).await;
        return;
    }
    if prompt.contains("ramble") || prompt.contains("think silently") {
        if !streamed {
            // A plain request generates to the end, unaffected by the client leaving.
            tokio::time::sleep(Duration::from_secs(3_600)).await;
            return;
        }
        let event = if prompt.contains("ramble") {
            // Tokens forever, `max_tokens` ignored.
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"la \"},\"finish_reason\":null}]}\n\n"
        } else {
            // Nothing countable forever: sse-starlette's keep-alive comments.
            ": ping\n\n"
        };
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                    cache-control: no-cache\r\nconnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        loop {
            if stream.write_all(event.as_bytes()).await.is_err() {
                seen.disconnects.fetch_add(1, Ordering::SeqCst);
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    if !streamed {
        let reply = json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "content": "Hello there"}, "finish_reason": "stop"}]});
        let reply = reply.to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n",
            reply.len()
        );
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(reply.as_bytes()).await;
        return;
    }
    // A normal streamed reply: text, or a tool call in pieces when tools are offered.
    let deltas = if body.get("tools").is_some() {
        vec![
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                "id": "call_1", "type": "function",
                "function": {"name": "search_notes", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"query\": "}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"tea\"}"}}]}),
        ]
    } else {
        vec![json!({"content": "Hello"}), json!({"content": " there"})]
    };
    let finish = if body.get("tools").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    let mut events: Vec<String> = deltas
        .into_iter()
        .map(|delta| {
            json!({"model": "local", "choices": [{"index": 0, "delta": delta,
                "finish_reason": null}]})
            .to_string()
        })
        .collect();
    events
        .push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}).to_string());
    events.push(
        json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}).to_string(),
    );
    events.push("[DONE]".to_owned());
    let mut out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        .to_owned();
    for event in events {
        out.push_str(&format!("data: {event}\n\n"));
    }
    let _ = stream.write_all(out.as_bytes()).await;
}

/// The request's JSON body (`None` if the connection closed first).
async fn read_body(stream: &mut TcpStream) -> Option<Value> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    serde_json::from_slice(&buffer[header_end..header_end + length]).ok()
}

/// A client of the server that gives up after 3 s and does not try again.
fn config(base_url: &str, stream: bool) -> LlmConfig {
    LlmConfig {
        provider: LlmProvider::Openai,
        base_url: base_url.to_owned(),
        model: "local".to_owned(),
        timeout_secs: 3,
        max_retries: 0,
        stream,
        ..LlmConfig::default()
    }
}

fn client(base_url: &str, stream: bool) -> OpenAiClient {
    OpenAiClient::new(&config(base_url, stream)).unwrap()
}

async fn bounded(
    client: &OpenAiClient,
    request: ChatRequest,
) -> Result<mnemo_kernel::ChatResponse, LlmError> {
    tokio::time::timeout(TEST_BOUND, client.complete(request))
        .await
        .expect("the request came back within the test's bound")
}

/// A runaway generation is cut at `max_tokens` and, once the client leaves, the server serves
/// the next request; one that streams nothing countable ends at the timeout, the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_stops_generating_is_cut_and_serves_the_next_request() {
    let (base_url, seen) = start_server().await;
    let client = client(&base_url, true);

    let mut runaway = ChatRequest::new("be brief", "ramble on");
    runaway.max_tokens = Some(20);
    let reply = bounded(&client, runaway).await.unwrap();
    assert!(reply.hit_max_tokens(), "{reply:?}");
    assert_eq!(reply.finish_reason.as_deref(), Some("length"));
    // One token past the bound: the delta that showed the reply was over it.
    assert_eq!(reply.content.as_deref(), Some("la ".repeat(21).as_str()));

    // The server is free again only if it saw the client leave.
    let reply = bounded(&client, ChatRequest::new("be brief", "hi"))
        .await
        .unwrap();
    assert_eq!(reply.content.as_deref(), Some("Hello there"));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert!(!reply.hit_max_tokens());
    assert_eq!(seen.disconnects.load(Ordering::SeqCst), 1);

    // Keep-alive comments only: the timeout ends the read, and the connection with it.
    let err = bounded(&client, ChatRequest::new("be brief", "think silently"))
        .await
        .unwrap_err();
    assert_eq!(err, LlmError::Timeout(3));

    // A tool call streamed in pieces comes out whole.
    let mut with_tools = ChatRequest::new("be brief", "find my tea notes");
    with_tools.tools = vec![ToolSpec {
        name: "search_notes".into(),
        description: "find notes".into(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    }];
    let reply = bounded(&client, with_tools).await.unwrap();
    assert_eq!(reply.tool_calls.len(), 1, "{reply:?}");
    assert_eq!(reply.tool_calls[0].id, "call_1");
    assert_eq!(reply.tool_calls[0].name, "search_notes");
    assert_eq!(reply.tool_calls[0].arguments, json!({"query": "tea"}));
    assert_eq!(seen.disconnects.load(Ordering::SeqCst), 2);

    let bodies = seen.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 4);
    assert_eq!(bodies[0]["stream"], json!(true));
    assert_eq!(bodies[0]["max_tokens"], json!(20));
    assert_eq!(bodies[1]["max_tokens"], json!(1024));
}

/// With `stream = false` the requests go out plain, and a plain reply is read as before.
#[tokio::test]
async fn stream_false_sends_plain_requests() {
    let (base_url, seen) = start_server().await;
    let reply = bounded(&client(&base_url, false), ChatRequest::new("s", "hi"))
        .await
        .unwrap();
    assert_eq!(reply.content.as_deref(), Some("Hello there"));
    let bodies = seen.bodies.lock().unwrap().clone();
    assert!(bodies[0].get("stream").is_none(), "{}", bodies[0]);
}

/// A server that accepts a streamed request and ends the stream before its first event cannot
/// stream that request: the error says so and what to change, and the request is not sent again.
#[tokio::test]
async fn a_stream_broken_off_before_its_first_event_is_named_and_not_tried_again() {
    let (base_url, seen) = start_server().await;
    let client = OpenAiClient::new(&LlmConfig {
        max_retries: 2,
        retry_base_ms: 10,
        ..config(&base_url, true)
    })
    .unwrap();
    let err = bounded(&client, ChatRequest::new("s", "break off"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Protocol(_)), "{err:?}");
    assert!(err.to_string().contains("before its first event"), "{err}");
    assert!(err.to_string().contains("stream = false"), "{err}");
    assert_eq!(seen.bodies.lock().unwrap().len(), 1);
}
