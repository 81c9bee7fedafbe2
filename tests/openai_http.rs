//! The OpenAI-compatible client against a real local HTTP server: the wire format both ways,
//! errors, timeouts, and a whole agent turn through the kernel.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_kernel::{
    ChatMessage, ChatRequest, Config, Kernel, LlmClient, LlmConfig, LlmError, LlmProvider,
    OpenAiClient, ToolSpec, TurnInput,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One canned answer: status, body, and a delay before answering.
#[derive(Clone)]
struct Answer {
    status: u16,
    body: String,
    delay: Duration,
}

fn ok(body: Value) -> Answer {
    Answer {
        status: 200,
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
struct Received {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// A minimal HTTP/1.1 server: one request per connection, answers in order.
struct TestServer {
    base_url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

async fn serve(answers: Vec<Answer>) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        for answer in answers {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 4096];
            let header_end = loop {
                let n = stream.read(&mut chunk).await.unwrap();
                assert!(n > 0, "client closed before sending headers");
                buffer.extend_from_slice(&chunk[..n]);
                if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                    break end + 4;
                }
            };
            let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
            let mut lines = head.split("\r\n");
            let request_line = lines.next().unwrap_or_default().to_owned();
            let headers: Vec<(String, String)> = lines
                .filter_map(|line| line.split_once(':'))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .collect();
            let length: usize = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .map(|(_, v)| v.parse().unwrap())
                .unwrap_or(0);
            while buffer.len() < header_end + length {
                let n = stream.read(&mut chunk).await.unwrap();
                buffer.extend_from_slice(&chunk[..n]);
            }
            let body = serde_json::from_slice(&buffer[header_end..header_end + length])
                .unwrap_or(Value::Null);
            log.lock().unwrap().push(Received {
                request_line,
                headers,
                body,
            });
            tokio::time::sleep(answer.delay).await;
            let response = format!(
                "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                answer.status,
                answer.body.len(),
                answer.body
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    });
    TestServer { base_url, received }
}

fn config(base_url: &str, timeout_secs: u64) -> LlmConfig {
    LlmConfig {
        provider: LlmProvider::Openai,
        base_url: base_url.to_owned(),
        model: "test-model".to_owned(),
        api_key: Some("sk-local".to_owned()),
        timeout_secs,
        ..LlmConfig::default()
    }
}

fn text_reply(text: &str) -> Value {
    json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
}

#[tokio::test]
async fn sends_the_protocol_and_reads_text_and_tool_calls() {
    let server = serve(vec![
        ok(text_reply("hello there")),
        ok(json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "search_notes", "arguments": "{\"query\":\"coffee\"}"}}
        ]}, "finish_reason": "tool_calls"}]})),
    ])
    .await;
    let client = OpenAiClient::new(&config(&server.base_url, 10)).unwrap();
    let mut request = ChatRequest::new("be brief", "hi");
    request.tools = vec![ToolSpec {
        name: "search_notes".into(),
        description: "find notes".into(),
        parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    }];
    let reply = client.complete(request.clone()).await.unwrap();
    assert_eq!(reply.content.as_deref(), Some("hello there"));
    assert!(reply.tool_calls.is_empty());

    let reply = client.complete(request).await.unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].id, "call_7");
    assert_eq!(reply.tool_calls[0].arguments, json!({"query": "coffee"}));

    let received = server.received.lock().unwrap().clone();
    assert_eq!(
        received[0].request_line,
        "POST /v1/chat/completions HTTP/1.1"
    );
    assert_eq!(received[0].header("authorization"), Some("Bearer sk-local"));
    let body = &received[0].body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "search_notes");
}

#[tokio::test]
async fn server_errors_timeouts_and_garbage_are_named() {
    let server = serve(vec![
        Answer {
            status: 429,
            body: "{\"error\":\"rate limited\"}".into(),
            delay: Duration::ZERO,
        },
        Answer {
            status: 200,
            body: "<html>not json</html>".into(),
            delay: Duration::ZERO,
        },
        Answer {
            status: 200,
            body: text_reply("too late").to_string(),
            delay: Duration::from_secs(3),
        },
    ])
    .await;
    let client = OpenAiClient::new(&config(&server.base_url, 1)).unwrap();
    let request = ChatRequest::new("s", "u");
    match client.complete(request.clone()).await {
        Err(LlmError::Status { status, body }) => {
            assert_eq!(status, 429);
            assert!(body.contains("rate limited"));
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    let err = client.complete(request.clone()).await.unwrap_err();
    assert!(matches!(err, LlmError::Protocol(_)), "{err:?}");
    assert!(err.to_string().contains("not JSON"), "{err}");
    assert_eq!(
        client.complete(request).await.unwrap_err(),
        LlmError::Timeout(1)
    );

    let nowhere = OpenAiClient::new(&config("http://127.0.0.1:1/v1", 2)).unwrap();
    let err = nowhere
        .complete(ChatRequest::new("s", "u"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Transport(_)), "{err:?}");
}

#[tokio::test]
async fn a_whole_agent_turn_over_http_calls_the_tool_and_replies() {
    let server = serve(vec![
        ok(json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add_note", "arguments": "{\"text\":\"buy oat milk\"}"}}
        ]}, "finish_reason": "tool_calls"}]})),
        ok(text_reply("Noted: oat milk.")),
    ])
    .await;
    let text = format!(
        "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n[extensions.notes]\n",
        server.base_url
    );
    let config = Config::parse(&text, "test.toml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(mnemo::builtin_extensions(), config)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let input = TurnInput {
        user_id: "ana".into(),
        session_id: "s1".into(),
        chat_id: None,
        text: "remember to buy oat milk".into(),
    };
    let history = [
        ChatMessage::user("earlier question"),
        ChatMessage::assistant("earlier answer"),
    ];
    let outcome = kernel.run_turn(&input, &history).await.unwrap();
    assert_eq!(outcome.reply, "Noted: oat milk.");
    assert_eq!(outcome.rounds, 2);
    assert_eq!(outcome.tool_calls.len(), 1);
    assert!(outcome.tool_calls[0].1.is_ok());

    let received = server.received.lock().unwrap().clone();
    let second = &received[1].body["messages"];
    let roles: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "tool"]
    );
    assert_eq!(second[4]["tool_calls"][0]["function"]["name"], "add_note");
    assert_eq!(second[5]["tool_call_id"], "call_1");
    kernel.settle().await;
    assert_eq!(kernel.context().router().published("agent_response"), 1);
    let found = kernel
        .call_tool(
            &mnemo_kernel::ToolScope {
                user_id: "ana".into(),
                session_id: None,
                chat_id: None,
                at: kernel.context().now(),
            },
            "search_notes",
            json!({"query": "oat milk"}),
        )
        .await
        .unwrap();
    assert_eq!(found[0]["content"], "buy oat milk");
    kernel.shutdown().await;
}
