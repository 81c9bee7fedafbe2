//! Hostile input: malformed and oversized events, tool arguments and files each get an error
//! that names the problem, and change nothing; the good input around them is stored as usual.
//! The limits are config options (`max_content_chars`, `max_event_bytes`, `max_batch_size`,
//! `max_search_limit`).

use crate::common;

use chrono::{TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::ToolScope;
use serde_json::{json, Value};

use crate::common::mnemo;

fn check(dir: &std::path::Path) -> Value {
    common::check(dir, CONFIG)
}

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n\
    [extensions.markdown_memory]\nper_user = false\n";

fn event(id: &str, text: &str) -> Value {
    json!({"type": "user_message", "id": id, "at": "2026-05-01T10:00:00Z",
        "session_id": "s1", "user_id": "ana", "text": text})
}

fn line(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

#[test]
fn ingest_refuses_each_bad_line_by_name_and_stores_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut missing_session = event("e9", "no session");
    missing_session
        .as_object_mut()
        .unwrap()
        .remove("session_id");
    let mut wrong_type = event("e10", "x");
    wrong_type["text"] = json!(42);
    let mut unknown_field = event("e11", "x");
    unknown_field["priority"] = json!("high");
    // Each bad line, and a word its error must contain.
    let bad: Vec<(Vec<u8>, &str)> = vec![
        (line(&event("e2", &"x".repeat(10 << 20))), "max_event_bytes"),
        (
            line(&event("e3", &"word ".repeat(20_000))),
            "max_content_chars",
        ),
        (line(&event("e4", "before\u{0}after")), "NUL"),
        ("[".repeat(100_000).into_bytes(), "recursion limit"),
        (
            b"{\"type\": \"user_message\", \"text\": \"\xff\xfe\"}".to_vec(),
            "not UTF-8",
        ),
        (line(&missing_session), "missing field `session_id`"),
        (line(&wrong_type), "invalid type: integer `42`"),
        (line(&unknown_field), "unknown field `priority`"),
        (line(&event("", "an empty id")), "`id` must not be empty"),
        (b"not json at all".to_vec(), "not JSON"),
    ];
    let mut input = line(&event("e1", "The boiler was serviced on Monday"));
    input.push(b'\n');
    for (bytes, _) in &bad {
        input.extend_from_slice(bytes);
        input.push(b'\n');
    }
    input.extend(line(&event("e12", "The gate code is 4411")));
    input.push(b'\n');

    let mut command = mnemo(dir.path(), CONFIG);
    command.arg("ingest");
    let output = common::run_with_input(command, &input);
    assert!(!output.status.success(), "bad lines make the run fail");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let replies: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|reply| serde_json::from_str(reply).unwrap())
        .collect();
    assert_eq!(replies.len(), bad.len() + 2, "{replies:?}");
    assert_eq!(replies[0]["ack"], "e1");
    for (index, (_, word)) in bad.iter().enumerate() {
        let reply = &replies[index + 1];
        assert_eq!(reply["line"], index + 2, "{reply}");
        let error = reply["error"].as_str().unwrap_or_default();
        assert!(error.contains(word), "line {}: {error}", index + 2);
    }
    assert_eq!(replies[bad.len() + 1]["ack"], "e12");

    let report = check(dir.path());
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["memories"], 2, "only the two good events: {report}");
}

#[test]
fn import_reports_bad_lines_and_imports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let mut bytes = line(&event("e1", "The boiler was serviced on Monday"));
    bytes.extend_from_slice(b"\n\xc3\x28 broken UTF-8\n");
    bytes.extend(line(&event("e2", &"y".repeat(2 << 20))));
    bytes.push(b'\n');
    bytes.extend(line(&event("e3", "The gate code is 4411")));
    std::fs::write(&file, bytes).unwrap();
    let output = mnemo(dir.path(), CONFIG)
        .arg("import")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("events.jsonl:2: the line is not UTF-8 text"),
        "{stderr}"
    );
    assert!(stderr.contains("events.jsonl:3: the line is"), "{stderr}");
    assert!(stderr.contains("max_event_bytes"), "{stderr}");
    let report = check(dir.path());
    assert_eq!(report["memories"], 2, "{report}");
}

fn scope() -> ToolScope {
    ToolScope {
        user_id: "ana".into(),
        session_id: Some("s1".into()),
        chat_id: None,
        at: Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, 0).unwrap(),
        caller: mnemo_kernel::ToolCaller::Client,
    }
}

async fn start(dir: &std::path::Path) -> Kernel {
    Kernel::builder(
        mnemo_host::builtin_extensions(),
        Config::parse(CONFIG, "test.toml").unwrap(),
    )
    .virtual_clock(Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, 0).unwrap())
    .data_dir(dir)
    .start()
    .await
    .unwrap()
}

/// An array nested `depth` deep, built without recursion.
fn nested(depth: usize) -> Value {
    let mut value = json!("core");
    for _ in 0..depth {
        value = Value::Array(vec![value]);
    }
    value
}

#[tokio::test]
async fn wrong_tool_arguments_are_refused_by_name_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = start(dir.path()).await;
    kernel
        .call_tool(
            &scope(),
            "remember",
            json!({"content": "Ana likes green tea"}),
        )
        .await
        .unwrap();
    let stats = || async {
        kernel
            .call_tool(&scope(), "memory_stats", json!({}))
            .await
            .unwrap()["counts"]
            .clone()
    };
    let before = stats().await;
    let many: Vec<Value> = (0..10_000)
        .map(|n| json!({"content": format!("fact {n}")}))
        .collect();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "remember",
            json!({"content": "x".repeat(10 << 20)}),
            "argument `content`",
        ),
        ("remember", json!({"content": "tea\u{0}time"}), "NUL"),
        ("remember", json!({"facts": many}), "argument `facts`"),
        (
            "remember",
            json!({"content": 7}),
            "expected string, found integer",
        ),
        (
            "remember",
            json!({"content": nested(1_000)}),
            "argument `content`",
        ),
        (
            "remember",
            json!({"content": "ok", "secret": true}),
            "secret",
        ),
        ("remember", json!({}), "give `content`"),
        (
            "search_memory",
            json!({"query": ["tea"]}),
            "argument `query`",
        ),
        (
            "search_memory",
            json!({"query": "tea", "limit": 1_000_000_000}),
            "argument `limit`",
        ),
        (
            "search_memory",
            json!({"query": "tea", "since": "last week"}),
            "since",
        ),
        (
            "forget_memory",
            json!({"memory_id": {"$ne": null}}),
            "argument `memory_id`",
        ),
        (
            "forget_memory",
            json!({"memory_id": "fact_does_not_exist"}),
            "no memory",
        ),
        (
            "md_learn_fact",
            json!({"topic": "../../etc/passwd", "content": "x"}),
            "topic",
        ),
        ("md_remember", json!({"content": "a\u{0}b"}), "NUL"),
    ];
    for (tool, arguments, word) in cases {
        let error = kernel
            .call_tool(&scope(), tool, arguments)
            .await
            .expect_err(tool)
            .to_string();
        assert!(error.contains(word), "{tool}: {error}");
        assert!(
            error.len() < 2_000,
            "{tool}: the error does not echo the input back"
        );
    }
    assert_eq!(stats().await, before, "nothing was stored");
    let files: Vec<String> = std::fs::read_dir(dir.path().join("markdown/world"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.is_empty(), "{files:?}");
    kernel.shutdown().await;
}

#[tokio::test]
async fn a_memory_file_edited_into_invalid_utf8_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = start(dir.path()).await;
    std::fs::write(
        dir.path().join("markdown/MEMORY.md"),
        b"# Memory\n- caf\xe9 on Fridays (Latin-1)\n- likes green tea\n",
    )
    .unwrap();
    let recalled = kernel
        .call_tool(&scope(), "md_recall", json!({}))
        .await
        .unwrap();
    let content = recalled["content"].as_str().unwrap();
    assert!(content.contains("caf\u{fffd} on Fridays"), "{content}");
    assert!(content.contains("likes green tea"), "{content}");
    kernel.shutdown().await;
}

/// One id rule on every path: a user id the wire refuses (a tab, over 256 bytes, blank) is
/// refused on the command line too, by name, and nothing is stored.
#[test]
fn ids_the_wire_refuses_are_refused_on_the_command_line_too() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value) in [
        ("--user", "a\tb".to_owned()),
        ("--user", "u".repeat(100_000)),
        ("--user", " ".to_owned()),
    ] {
        let output = mnemo(dir.path(), CONFIG)
            .args(["remember", "A fact", flag, &value])
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("field `user`"), "{stderr}");
    }
    let output = mnemo(dir.path(), CONFIG)
        .args(["remember", "A fact", "--user", "ana", "--chat", ""])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("field `chat` must not be empty"));
    let stats = mnemo(dir.path(), CONFIG)
        .args(["stats", "--json"])
        .output()
        .unwrap();
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["counts"]["fact"], 0, "{stats}");
}
