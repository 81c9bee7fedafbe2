//! The extension inside a real kernel: config checks, tool errors, and a session buffer that
//! survives a restart.

use std::fs;
use std::sync::Arc;

use mnemo_kernel::host::{Config, ExtensionRegistry, Kernel, ScriptedLlm, ScriptedReply};
use mnemo_kernel::{Event, EventPayload, ToolError, ToolScope};
use serde_json::{json, Value};

use super::common::{announce, at, buffered, start};

fn scope() -> ToolScope {
    ToolScope {
        user_id: "ana".into(),
        session_id: Some("s1".into()),
        chat_id: None,
        at: at("2026-03-02T09:00:00Z"),
        caller: mnemo_kernel::ToolCaller::Client,
    }
}

async fn say(kernel: &Kernel, user: bool, text: &str) {
    let payload = if user {
        EventPayload::UserMessage { text: text.into() }
    } else {
        EventPayload::AgentResponse { text: text.into() }
    };
    kernel
        .publish(Event::new(kernel.context().now(), payload).with_scope(
            Some("s1".into()),
            Some("ana".into()),
            None,
        ))
        .await
        .unwrap();
    kernel.settle().await;
}

#[tokio::test]
async fn bad_config_values_are_all_reported_at_start() {
    let config = Config::parse(
        "[extensions.markdown_memory]\nagent_id = \"../x\"\ntool_prefix = \"md.\"\nmemory_window = 5\nkeep_messages = 9\n",
        "test.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let error = Kernel::builder(
        ExtensionRegistry::new().with(mnemo_markdown_memory::factory()),
        config,
    )
    .data_dir(dir.path())
    .start()
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("3 problems"), "{error}");
    for key in ["agent_id", "tool_prefix", "keep_messages"] {
        assert!(error.contains(&format!("key `{key}`")), "{error}");
    }
}

#[tokio::test]
async fn tool_errors_name_the_problem_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = start(
        "[extensions.markdown_memory]\n",
        dir.path(),
        Arc::new(ScriptedLlm::new()),
    )
    .await;
    let names: Vec<String> = kernel.tools().into_iter().map(|tool| tool.name).collect();
    assert_eq!(
        names,
        vec![
            "md_recall",
            "md_remember",
            "md_reflect",
            "md_learn_fact",
            "md_search_history"
        ]
    );
    let before = fs::read_dir(dir.path().join("markdown/world"))
        .unwrap()
        .count();
    for (topic, reason) in [
        ("../../etc/passwd", "contains `..`"),
        ("/etc/passwd", "is an absolute path"),
        ("a/b", "contains a path separator"),
        ("bad\u{0}name", "contains a NUL character"),
    ] {
        let error = kernel
            .call_tool(
                &scope(),
                "md_learn_fact",
                json!({"topic": topic, "content": "x"}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(error, ToolError::InvalidArguments { .. }),
            "{topic:?}: {error:?}"
        );
        assert!(error.to_string().contains(reason), "{error}");
    }
    let error = kernel
        .call_tool(
            &scope(),
            "md_learn_fact",
            json!({"topic": "x".repeat(65), "content": "x"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("the limit is 64"), "{error}");
    let error = kernel
        .call_tool(&scope(), "md_reflect", json!({"content": "   "}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("argument `content` is blank"), "{error}");
    let error = kernel
        .call_tool(&scope(), "md_search_history", json!({"query": "the of a"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("no searchable words"), "{error}");
    assert_eq!(
        fs::read_dir(dir.path().join("markdown/world"))
            .unwrap()
            .count(),
        before
    );
    kernel.shutdown().await;
}

#[tokio::test]
async fn buffered_messages_survive_a_restart_and_new_consolidates_them() {
    let dir = tempfile::tempdir().unwrap();
    // One shared set of files (per_user = false), so the test can look at them by path.
    let config = "[extensions.markdown_memory]\nmax_memory_size = 256\nper_user = false\n";
    let first = start(config, dir.path(), Arc::new(ScriptedLlm::new())).await;
    say(&first, true, "I adopted a cat named Miso").await;
    say(&first, false, "Lovely! How old is Miso?").await;
    first.shutdown().await;
    let buffer =
        fs::read_to_string(dir.path().join("markdown/.sessions/ana/_personal/s1.jsonl")).unwrap();
    assert_eq!(buffered(&buffer).len(), 2);

    // A long memory written by hand: the prompt must ask to compress it.
    fs::write(
        dir.path().join("markdown/MEMORY.md"),
        format!("# Memory\n{}", "- an old fact\n".repeat(30)),
    )
    .unwrap();
    let llm = Arc::new(ScriptedLlm::new());
    llm.push(ScriptedReply::Text(
        json!({
            "history_entry": "[2026-03-02 09:00] The user adopted a cat named Miso.",
            "memory_update": "# Memory\n- The user has a cat named Miso."
        })
        .to_string(),
    ));
    let second = start(config, dir.path(), llm.clone()).await;
    say(&second, true, "/new").await;

    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    let prompt = &requests[0].messages[1].content;
    assert!(
        prompt.contains("user: I adopted a cat named Miso"),
        "{prompt}"
    );
    assert!(
        prompt.contains("assistant: Lovely! How old is Miso?"),
        "{prompt}"
    );
    assert!(prompt.contains("over the limit of 256 bytes"), "{prompt}");
    assert!(!prompt.contains("/new"), "{prompt}");

    // A compression the size budget asked for stands, though it dropped a hand-written line:
    // the history says which line went, once, and the whole previous file is kept in
    // MEMORY.history/.
    assert_eq!(
        fs::read_to_string(dir.path().join("markdown/MEMORY.md")).unwrap(),
        "# Memory\n- The user has a cat named Miso.\n"
    );
    let history = fs::read_to_string(dir.path().join("markdown/HISTORY.md")).unwrap();
    assert!(
        history.contains("[memory-compressed] session s1: MEMORY.md was over its 256-byte budget"),
        "{history}"
    );
    assert_eq!(history.matches("- an old fact").count(), 1, "{history}");
    assert_eq!(
        fs::read_to_string(
            dir.path()
                .join("markdown/MEMORY.history/MEMORY-2026-03-02T09-00-00.000Z.md")
        )
        .unwrap(),
        format!("# Memory\n{}", "- an old fact\n".repeat(30))
    );
    assert!(!dir
        .path()
        .join("markdown/.sessions/ana/_personal/s1.jsonl")
        .exists());
    let found = second
        .call_tool(&scope(), "md_search_history", json!({"query": "Miso"}))
        .await
        .unwrap();
    assert_eq!(found[0]["source"], Value::from("HISTORY-2026-03.md"));
    assert!(found[0]["content"]
        .as_str()
        .unwrap()
        .contains("adopted a cat"));
    second.shutdown().await;
}

/// The announcements of the `memory` extension, as a third party publishes them: by topic and
/// field names.
#[tokio::test]
async fn a_shared_workspace_drops_forgotten_messages_and_an_erased_users_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[extensions.markdown_memory]\nper_user = false\n";
    let kernel = start(config, dir.path(), Arc::new(ScriptedLlm::new())).await;
    let buffer = dir.path().join("markdown/.sessions/ana/_personal/s1.jsonl");
    say(&kernel, true, "ok").await;
    say(&kernel, false, "ok, noted that the gate code is 7781").await;
    say(&kernel, true, "The gate code is 7781 for the whole summer").await;
    fs::write(
        dir.path().join("markdown/MEMORY.md"),
        "# Memory\n- ok\n- The gate code is 7781 for the whole summer\n- likes tea\n",
    )
    .unwrap();

    // A short text goes only where it stands alone; a long one wherever it is copied.
    announce(
        &kernel,
        "memory.forgotten",
        json!({"content": "ok", "user_id": "ana", "session_id": "s1"}),
    )
    .await;
    let lines = fs::read_to_string(&buffer).unwrap();
    assert_eq!(buffered(&lines).len(), 2, "{lines}");
    assert!(lines.contains("ok, noted"));
    announce(
        &kernel,
        "memory.forgotten",
        json!({"content": "The gate code is 7781 for the whole summer", "user_id": "ana", "session_id": "s1", "kind": "episode"}),
    )
    .await;
    assert_eq!(buffered(&fs::read_to_string(&buffer).unwrap()).len(), 1);
    assert_eq!(
        fs::read_to_string(dir.path().join("markdown/MEMORY.md")).unwrap(),
        "# Memory\n- likes tea\n"
    );

    // Erasing the user drops their sessions' buffers; the shared memory file is not theirs alone.
    announce(
        &kernel,
        "memory.user_erased",
        json!({"user_id": "ana", "session_ids": ["s1"]}),
    )
    .await;
    assert!(!buffer.exists());
    assert!(dir.path().join("markdown/MEMORY.md").exists());
    // A malformed announcement is an error for this handler, not a crash of the kernel.
    announce(&kernel, "memory.user_erased", json!({"session_ids": 7})).await;
    kernel.shutdown().await;
}
