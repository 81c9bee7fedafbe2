//! The OpenAI-compatible client against a real local HTTP server: the wire format both ways,
//! errors, timeouts, and a whole agent turn through the kernel.

use std::time::Duration;

use mnemo_kernel::host::{Config, Kernel, LlmConfig, LlmProvider, OpenAiClient, TurnInput};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use mnemo_kernel::{ChatMessage, ChatRequest, LlmClient, LlmError, ToolSpec};
use serde_json::{json, Value};

async fn serve(answers: Vec<CannedAnswer>) -> HttpTestServer {
    HttpTestServer::start(answers).await
}

fn ok(body: Value) -> CannedAnswer {
    CannedAnswer::json(&body)
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

    let received = server.received();
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
        CannedAnswer::raw(429, "{\"error\":\"rate limited\"}"),
        CannedAnswer::raw(200, "<html>not json</html>"),
        CannedAnswer::json(&text_reply("too late")).delayed(Duration::from_secs(3)),
    ])
    .await;
    let no_retries = LlmConfig {
        max_retries: 0,
        ..config(&server.base_url, 1)
    };
    let client = OpenAiClient::new(&no_retries).unwrap();
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

    let nowhere = OpenAiClient::new(&LlmConfig {
        retry_base_ms: 10,
        ..config("http://127.0.0.1:1/v1", 2)
    })
    .unwrap();
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
    let kernel = Kernel::builder(mnemo_devtools::dev_extensions(), config)
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

    let received = server.received();
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
                caller: mnemo_kernel::ToolCaller::Client,
            },
            "search_notes",
            json!({"query": "oat milk"}),
        )
        .await
        .unwrap();
    assert_eq!(found[0]["content"], "buy oat milk");
    kernel.shutdown().await;
}

/// A base URL without `/v1` reaches a server that has no `/chat/completions`: the error names
/// the URL and says what to try instead of a bare 404.
#[tokio::test]
async fn a_404_suggests_the_missing_v1() {
    let server = serve(vec![CannedAnswer::raw(404, "{\"detail\":\"Not Found\"}")]).await;
    let without_v1 = server.base_url.trim_end_matches("/v1").to_owned();
    let client = OpenAiClient::new(&config(&without_v1, 5)).unwrap();
    let err = client
        .complete(ChatRequest::new("s", "u"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LlmError::NotFound {
            url: format!("{without_v1}/chat/completions")
        }
    );
    assert!(err.to_string().contains("end in /v1"), "{err}");
}

#[tokio::test]
async fn an_overloaded_or_restarting_server_is_tried_again_and_a_bad_request_is_not() {
    let server = serve(vec![
        CannedAnswer::raw(503, "{\"error\":\"loading model\"}"),
        CannedAnswer::raw(429, "{\"error\":\"rate limited\"}"),
        ok(text_reply("third time lucky")),
        CannedAnswer::raw(400, "{\"error\":\"bad request\"}"),
        ok(text_reply("never asked for")),
    ])
    .await;
    let client = OpenAiClient::new(&LlmConfig {
        max_retries: 2,
        retry_base_ms: 10,
        ..config(&server.base_url, 5)
    })
    .unwrap();
    let reply = client.complete(ChatRequest::new("s", "u")).await.unwrap();
    assert_eq!(reply.content.as_deref(), Some("third time lucky"));
    assert_eq!(server.received().len(), 3, "two retries, then the answer");
    let err = client
        .complete(ChatRequest::new("s", "u"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Status { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(server.received().len(), 4, "a 400 is not tried again");
}

#[tokio::test]
async fn retries_end_after_max_retries_with_the_last_error() {
    let server = serve(vec![
        CannedAnswer::raw(502, "{\"error\":\"bad gateway 1\"}"),
        CannedAnswer::raw(502, "{\"error\":\"bad gateway 2\"}"),
        ok(text_reply("too late")),
    ])
    .await;
    let client = OpenAiClient::new(&LlmConfig {
        max_retries: 1,
        retry_base_ms: 10,
        ..config(&server.base_url, 5)
    })
    .unwrap();
    let err = client
        .complete(ChatRequest::new("s", "u"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bad gateway 2"), "{err}");
    assert_eq!(server.received().len(), 2);
}
