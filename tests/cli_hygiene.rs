//! The command line's smaller promises: stored text cannot drive the terminal, and `jobs run`
//! fails when its job's items failed.

use std::path::Path;
use std::process::Output;

use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use serde_json::{json, Value};

mod common;

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

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
    let config = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n\
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
