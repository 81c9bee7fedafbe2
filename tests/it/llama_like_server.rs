//! The paths that talk to a real model (agent turn with tools, consolidation, conflict check,
//! reflection), run against a local OpenAI-compatible server that behaves the way llama.cpp's
//! server does with a small model:
//! - tools in a request without `tool_choice` are dropped, and the model answers in prose;
//! - a tool schema with `maxLength` breaks its grammar engine (HTTP 500);
//! - a request without `max_tokens` runs on past the client's timeout;
//! - JSON replies come wrapped in prose.
//!
//! Scripted replies stand in only for the model's words; the server, the HTTP client and every
//! extension are the real ones.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel, TurnInput};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer, ReceivedRequest};
use mnemo_kernel::{ConversationEvent, ToolScope};
use serde_json::{json, Value};

fn message(content: &str) -> CannedAnswer {
    CannedAnswer::json(&json!({"choices": [{"message": {"role": "assistant",
        "content": content}, "finish_reason": "stop"}]}))
}

fn tool_call(name: &str, arguments: Value) -> CannedAnswer {
    CannedAnswer::json(
        &json!({"choices": [{"message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]},
        "finish_reason": "tool_calls"}]}),
    )
}

/// What llama.cpp's server with a small model answers to `request`.
fn llama_like(request: &ReceivedRequest) -> CannedAnswer {
    let body = &request.body;
    if body.get("max_tokens").is_none() {
        // It generates until its own limit, long after the client gave up.
        return message("and so on").delayed(Duration::from_secs(5));
    }
    if body["tools"].to_string().contains("maxLength") {
        return CannedAnswer::raw(500, "{\"error\": \"failed to parse grammar\"}");
    }
    let tools_honoured = body.get("tools").is_some() && body.get("tool_choice").is_some();
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let answered_a_tool = body["messages"]
        .as_array()
        .is_some_and(|messages| messages.iter().any(|m| m["role"] == "tool"));
    if system.contains("extract durable facts") {
        let facts = json!({"facts": [{"content": "Lena moved to Porto in March to study",
            "sources": [1]}]});
        return if tools_honoured {
            tool_call("save_facts", facts)
        } else {
            message(&format!(
                "Sure! Here are the facts I found:\n{facts}\nLet me know if you need more."
            ))
        };
    }
    if system.contains("contradict") {
        return message("After checking: {\"contradictions\": []} That is all.");
    }
    if system.contains("weekly reflection") {
        return message(
            "Family was on the user's mind this week: a sister in Porto and plans to visit her.",
        );
    }
    // An agent turn.
    if tools_honoured && !answered_a_tool {
        return tool_call(
            "remember",
            json!({"content": "My sister Lena lives in Porto", "subjects": ["my sister Lena"]}),
        );
    }
    message("I will remember that.")
}

fn turn(id: &str, session: &str, minute: u32, text: &str) -> mnemo_kernel::Event {
    let at = Utc.with_ymd_and_hms(2026, 4, 6, 9, minute, 0).unwrap();
    let line = json!({"type": "user_message", "id": id, "at": at.to_rfc3339(),
        "session_id": session, "user_id": "ana", "text": text});
    ConversationEvent::from_value(line).unwrap().into_event()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_model_on_a_llama_cpp_like_server_reaches_every_path() {
    let server = HttpTestServer::respond_with(llama_like).await;
    let config = Config::parse(
        &format!(
            "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"smollm2\"\n\
             timeout_secs = 2\n\
             [extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n\
             [extensions.memory_maintenance]\n[extensions.memory_reflection]\nmin_facts = 1\n",
            server.base_url
        ),
        "test.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kernel = Arc::new(
        Kernel::builder(mnemo_host::builtin_extensions(), config)
            .data_dir(dir.path())
            .start()
            .await
            .unwrap(),
    );

    // An agent turn: the model gets the tools (with `tool_choice`) and calls `remember`.
    let input = TurnInput {
        user_id: "ana".into(),
        session_id: "s1".into(),
        chat_id: None,
        text: "Remember that my sister Lena lives in Porto".into(),
    };
    let outcome = kernel.run_turn(&input, &[]).await.unwrap();
    assert_eq!(outcome.tool_calls.len(), 1, "{outcome:?}");
    assert!(outcome.tool_calls[0].1.is_ok(), "{outcome:?}");
    assert_eq!(outcome.reply, "I will remember that.");

    // A session of turns, closed by the next one: consolidated through the named tool.
    kernel
        .publish(turn(
            "e1",
            "s2",
            10,
            "Lena moved to Porto in March, she studies there",
        ))
        .await
        .unwrap();
    kernel
        .publish(turn("e2", "s3", 40, "Good morning"))
        .await
        .unwrap();
    kernel.settle().await;
    let scope = ToolScope {
        user_id: "ana".into(),
        session_id: Some("probe".into()),
        chat_id: None,
        at: Utc::now(),
        caller: mnemo_kernel::ToolCaller::Client,
    };
    let facts = kernel
        .call_tool(
            &scope,
            "search_memory",
            json!({"query": "Lena moved March", "kind": "fact"}),
        )
        .await
        .unwrap();
    let facts = facts.to_string();
    assert!(facts.contains("Lena moved to Porto in March"), "{facts}");
    assert!(
        facts.contains("\"confidence\":0.8"),
        "an extracted fact: {facts}"
    );

    // The weekly reflection.
    let run = kernel.run_job("execute_reflection").await.unwrap();
    let outcome = format!("{:?}", run.outcome);
    assert!(outcome.contains("1 reflections written"), "{outcome}");

    // Every request was bounded and, where it offered tools, said how to use them, and no tool
    // schema carried a length keyword.
    let received = server.received();
    assert!(received.len() >= 4, "{} requests", received.len());
    for request in &received {
        let body = &request.body;
        assert!(body["max_tokens"].as_u64().is_some(), "{body}");
        if body.get("tools").is_some() {
            assert!(body.get("tool_choice").is_some(), "{body}");
            assert!(!body["tools"].to_string().contains("maxLength"), "{body}");
        }
    }
    kernel.shutdown().await;
}
