//! The command line's smaller promises: stored text cannot drive the terminal, `jobs run` fails
//! when its job's items failed, and a memory saved in a chat belongs to that chat.

use std::path::Path;
use std::process::{Command, Output};

use chrono::Utc;
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use mnemo_kernel::ToolScope;
use serde_json::{json, Value};

use crate::common;

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n";

fn run(dir: &Path, config: &str, args: &[&str]) -> Output {
    common::mnemo(dir, config).args(args).output().unwrap()
}

/// Runs `args` and returns standard output; the command must succeed.
fn ok(dir: &Path, config: &str, args: &[&str]) -> String {
    let output = run(dir, config, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The control characters in `text` other than newline.
fn controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect()
}

#[test]
fn stored_escape_sequences_reach_the_terminal_only_as_visible_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "Ana's colour is \u{1b}[31mred\u{1b}[0m\u{1b}]0;owned\u{7}\rand \u{9b}2J more";
    ok(
        dir.path(),
        CONFIG,
        &["remember", hostile, "--user", "ana", "--subject", "Ana"],
    );

    let listing = ok(dir.path(), CONFIG, &["search", "colour", "--user", "ana"]);
    assert_eq!(controls(&listing), Vec::<char>::new(), "{listing:?}");
    assert!(
        listing.contains(r"Ana's colour is \e[31mred\e[0m\e]0;owned\u{7}\rand \u{9b}2J more"),
        "{listing}"
    );
    assert_eq!(listing.lines().count(), 1, "one line per hit: {listing}");

    // JSON stays exact: the text comes back byte for byte.
    let hits: Value = serde_json::from_str(&ok(
        dir.path(),
        CONFIG,
        &["search", "colour", "--user", "ana", "--json"],
    ))
    .unwrap();
    assert_eq!(hits[0]["content"], hostile);

    let markdown = ok(dir.path(), CONFIG, &["export", "--format", "markdown"]);
    assert_eq!(controls(&markdown), Vec::<char>::new(), "{markdown:?}");
    assert!(markdown.contains(r"\e[31mred\e[0m"), "{markdown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_fails_when_the_job_reports_failures() {
    // A model that answers every request with prose instead of the facts asked for.
    let server = HttpTestServer::respond_with(|_| {
        CannedAnswer::json(&json!({"choices": [{"message": {"role": "assistant",
            "content": "I would rather talk about the weather."}, "finish_reason": "stop"}]}))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n\
        [extensions.memory_maintenance]\nenabled = true\n";
    let base_url = server.base_url.clone();
    let path = dir.path().to_path_buf();
    let consolidate = move || {
        common::mnemo(&path, config)
            .args(["jobs", "run", "execute_consolidation"])
            .env("MNEMO_LLM_BASE_URL", &base_url)
            .env("MNEMO_LLM_MODEL", "test-model")
            .output()
            .unwrap()
    };

    // Nothing pending: nothing failed, and the run succeeds.
    let idle = tokio::task::spawn_blocking(consolidate.clone())
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&idle.stdout).to_string();
    assert!(report.contains(" 0 failed"), "{report}");
    assert!(
        idle.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&idle.stderr)
    );

    let events = dir.path().join("events.jsonl");
    let lines: Vec<String> = (0..4)
        .map(|n| {
            json!({"type": if n % 2 == 0 { "user_message" } else { "agent_response" },
                "id": format!("e{n}"), "at": format!("2026-03-02T08:0{n}:00Z"),
                "session_id": "s1", "user_id": "ana",
                "text": format!("message {n}: my sister moves to Porto in May")})
            .to_string()
        })
        .collect();
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    ok(dir.path(), config, &["import", events.to_str().unwrap()]);

    let failed = tokio::task::spawn_blocking(consolidate).await.unwrap();
    let report = String::from_utf8_lossy(&failed.stdout).to_string();
    let stderr = String::from_utf8_lossy(&failed.stderr).to_string();
    assert!(
        report.contains("0 sessions consolidated") && report.contains(" 1 failed"),
        "{report}{stderr}"
    );
    assert!(!failed.status.success(), "every session failed: {report}");
    assert!(stderr.contains("1 of its items failed"), "{stderr}");
}

#[test]
fn remember_in_a_chat_belongs_to_that_chat() {
    let dir = tempfile::tempdir().unwrap();
    let search = |user: &str, chat: Option<&str>| -> Vec<String> {
        let mut args = vec!["search", "locker", "--user", user, "--json"];
        if let Some(chat) = chat {
            args.extend(["--chat", chat]);
        }
        let hits: Value = serde_json::from_str(&ok(dir.path(), CONFIG, &args)).unwrap();
        hits.as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["content"].as_str().unwrap().to_owned())
            .collect()
    };
    const MINE: &str = "My locker at the gym is number 212";
    const TEAM: &str = "The team locker code is 9021";
    ok(
        dir.path(),
        CONFIG,
        &["remember", MINE, "--user", "ana", "--chat", "gym"],
    );
    ok(
        dir.path(),
        CONFIG,
        &[
            "remember", TEAM, "--user", "ana", "--chat", "gym", "--shared",
        ],
    );
    let mut in_gym = search("ana", Some("gym"));
    in_gym.sort();
    assert_eq!(in_gym, vec![MINE.to_owned(), TEAM.to_owned()]);
    assert_eq!(search("ana", Some("work")), Vec::<String>::new());
    assert_eq!(search("ana", None), Vec::<String>::new());
    assert_eq!(
        search("ben", Some("gym")),
        vec![TEAM.to_owned()],
        "only the shared one reaches another member of the chat"
    );
    let refused = run(
        dir.path(),
        CONFIG,
        &["remember", TEAM, "--user", "ana", "--shared"],
    );
    assert!(!refused.status.success(), "--shared needs a chat");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_tools_keep_what_they_store_in_the_callers_chat() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(
        mnemo_host::builtin_extensions(),
        Config::parse(CONFIG, "test.toml").unwrap(),
    )
    .data_dir(dir.path())
    .start()
    .await
    .unwrap();
    let scope = |chat: Option<&str>| ToolScope {
        user_id: "ana".to_owned(),
        session_id: Some("s1".to_owned()),
        chat_id: chat.map(str::to_owned),
        at: Utc::now(),
        caller: mnemo_kernel::ToolCaller::Client,
    };
    let gym = scope(Some("gym"));
    for (tool, arguments) in [
        (
            "remember",
            json!({"content": "The locker by the sauna is mine"}),
        ),
        (
            "store_memory",
            json!({"content": "The locker key hangs at reception", "memory_type": "fact"}),
        ),
        (
            "store_memory",
            json!({"content": "Today the locker room is closed", "memory_type": "conversation"}),
        ),
        (
            "set_context",
            json!({"key": "locker", "value": "locker 212 today"}),
        ),
    ] {
        kernel.call_tool(&gym, tool, arguments).await.unwrap();
    }
    let found = |scope: ToolScope| {
        let kernel = kernel.clone();
        async move {
            let hits = kernel
                .call_tool(
                    &scope,
                    "search_memory",
                    json!({"query": "locker", "mode": "fts", "limit": 50}),
                )
                .await
                .unwrap();
            hits.as_array().unwrap().len()
        }
    };
    assert_eq!(found(scope(Some("gym"))).await, 4);
    assert_eq!(found(scope(Some("work"))).await, 0);
    assert_eq!(found(scope(None)).await, 0);

    // A context value is the chat's own: another chat neither reads nor replaces it.
    let value = |chat: Option<&'static str>| {
        let kernel = kernel.clone();
        async move {
            kernel
                .call_tool(&scope(chat), "get_context", json!({"key": "locker"}))
                .await
                .unwrap()["value"]
                .clone()
        }
    };
    assert_eq!(value(Some("work")).await, Value::Null);
    kernel
        .call_tool(
            &scope(Some("work")),
            "set_context",
            json!({"key": "locker", "value": "no locker at work"}),
        )
        .await
        .unwrap();
    assert_eq!(value(Some("gym")).await, "locker 212 today");
    assert_eq!(value(Some("work")).await, "no locker at work");
    assert_eq!(value(None).await, Value::Null);
    kernel.shutdown().await;
}

/// Log lines carry ANSI colours only on a terminal, and not even there with `NO_COLOR`.
#[test]
fn log_colours_only_on_a_terminal_without_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let output = common::mnemo(dir.path(), CONFIG)
        .args(["-v", "stats"])
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("INFO"), "-v logs at info: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "colours in a pipe: {stderr:?}");

    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped the terminal half: no `script` command for a pseudo-terminal");
        return;
    }
    let on_a_terminal = |no_color: Option<&str>| {
        let command_line = format!(
            "'{}' --config '{}' --data-dir '{}' -v stats",
            env!("CARGO_BIN_EXE_mnemo"),
            dir.path().join("config.toml").display(),
            dir.path().join("data").display()
        );
        let mut command = Command::new("script");
        command
            .args(["-qec", &command_line, "/dev/null"])
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR");
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let output = command.output().unwrap();
        assert!(output.status.success());
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let shown = on_a_terminal(None);
    assert!(
        shown.contains("INFO") && shown.contains("\u{1b}["),
        "{shown:?}"
    );
    let shown = on_a_terminal(Some("1"));
    assert!(
        shown.contains("INFO") && !shown.contains('\u{1b}'),
        "{shown:?}"
    );
}

/// `mnemo export | head`, `mnemo search ... | head`: a reader that leaves early ends the command
/// quietly and successfully, with no "Broken pipe" (nor a panic) on stderr.
#[test]
fn a_reader_that_stops_reading_ends_export_and_search_quietly() {
    let dir = tempfile::tempdir().unwrap();
    ok(
        dir.path(),
        CONFIG,
        &[
            "remember",
            "The boiler was serviced on Monday",
            "--user",
            "ana",
        ],
    );
    for args in [
        &["export"][..],
        &["export", "--format", "markdown"],
        &["search", "boiler", "--user", "ana"],
        &["search", "boiler", "--user", "ana", "--json"],
    ] {
        let mut child = common::mnemo_in(dir.path())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the command has written anything.
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}");
        assert!(
            !stderr.to_lowercase().contains("broken pipe")
                && !stderr.contains("panicked")
                && !stderr.contains("mnemo:"),
            "{args:?}: {stderr}"
        );
    }
}

/// The markdown export lists a session's turns in the order they were said, not by id.
#[test]
fn markdown_export_lists_turns_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    // Newest first in the file, so that neither the file's order nor an id given in storing
    // order is the time order.
    let minutes = [5, 4, 3, 2, 1, 0];
    let events: String = minutes
        .iter()
        .map(|minute| {
            format!(
                "{}\n",
                json!({"type": "user_message", "id": format!("e{minute}"),
                    "at": format!("2026-03-02T08:0{minute}:00Z"), "session_id": "s1",
                    "user_id": "ana", "text": format!("turn number {minute}")})
            )
        })
        .collect();
    std::fs::write(dir.path().join("events.jsonl"), events).unwrap();
    let events = dir.path().join("events.jsonl");
    ok(dir.path(), CONFIG, &["import", events.to_str().unwrap()]);
    let turns = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|line| line.split_once("turn number "))
            .map(|(_, number)| number.trim_end_matches('"').chars().take(1).collect())
            .collect()
    };
    let in_time_order: Vec<String> = (0..6).map(|minute| minute.to_string()).collect();
    // The lossless export lists rows by id: not the time order, or this test would prove nothing.
    let by_id = turns(&ok(dir.path(), CONFIG, &["export"]));
    assert_eq!(by_id.len(), 6, "{by_id:?}");
    assert_ne!(by_id, in_time_order, "the ids happen to be in time order");
    let markdown = ok(dir.path(), CONFIG, &["export", "--format", "markdown"]);
    assert_eq!(turns(&markdown), in_time_order, "{markdown}");
}
