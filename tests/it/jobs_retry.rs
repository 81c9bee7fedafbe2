//! `mnemo jobs retry`: after a model outage used up a session's consolidation attempts (or a
//! memory's enrichment attempts), every run reports it as given up and fails; the retry command
//! gives it a fresh start, and the next run consolidates it once the model answers.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use serde_json::json;
use tempfile::TempDir;

use crate::common;

const CONFIG: &str = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n\
    [extensions.memory]\n[extensions.memory_maintenance]\nmax_consolidation_attempts = 1\n\
    max_enrichment_attempts = 1\n";

fn run(dir: &Path, base_url: &str, args: &[&str]) -> Output {
    common::mnemo(dir, CONFIG)
        .args(args)
        .env("MNEMO_LLM_BASE_URL", base_url)
        .env("MNEMO_LLM_MODEL", "test-model")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A store in a new directory holding one turn of ana's, imported.
fn store_with_turn(text: &str) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let line = json!({"type": "user_message", "id": "e1", "at": "2026-03-02T08:00:00Z",
        "session_id": "s1", "user_id": "ana", "text": text});
    std::fs::write(&events, format!("{line}\n")).unwrap();
    let import = common::mnemo(dir.path(), CONFIG)
        .arg("import")
        .arg(&events)
        .output()
        .unwrap();
    assert!(import.status.success(), "{import:?}");
    dir
}

/// `mnemo ARGS` on the store in `dir` with the model at `base_url`, off the test's runtime.
async fn mnemo(dir: &TempDir, base_url: &str, args: &'static [&'static str]) -> Output {
    let (path, base_url): (PathBuf, String) = (dir.path().to_owned(), base_url.to_owned());
    tokio::task::spawn_blocking(move || run(&path, &base_url, args))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_given_up_after_an_outage_is_consolidated_after_a_retry() {
    let up = Arc::new(AtomicBool::new(false));
    let server = {
        let up = Arc::clone(&up);
        HttpTestServer::respond_with(move |_| {
            if !up.load(Ordering::SeqCst) {
                return CannedAnswer::raw(503, "{\"error\": \"overloaded\"}");
            }
            let facts = json!({"facts": [{"content": "The user's sister moves to Porto in May",
                "sources": [1]}], "contradictions": []});
            CannedAnswer::json(&json!({"choices": [{"message": {"role": "assistant",
                "content": facts.to_string()}, "finish_reason": "stop"}]}))
        })
        .await
    };
    let dir = store_with_turn("My sister moves to Porto in May");
    let base_url = server.base_url.clone();

    // The outage uses up the one attempt; the next run gives the session up, says how to
    // try it again, and fails, as every run does while it is given up.
    let failed = mnemo(&dir, &base_url, &["jobs", "run", "execute_consolidation"]).await;
    assert!(stdout(&failed).contains(" 1 failed"), "{}", stdout(&failed));
    assert!(!failed.status.success());
    let given_up = mnemo(&dir, &base_url, &["jobs", "run", "execute_consolidation"]).await;
    let report = stdout(&given_up);
    assert!(
        report.contains("0 failed")
            && report.contains("1 sessions given up after 1 failed attempts")
            && report.contains("`mnemo jobs retry`"),
        "{report}"
    );
    assert!(!given_up.status.success(), "{given_up:?}");

    // The model is back, but only a retry brings the session back.
    up.store(true, Ordering::SeqCst);
    let still_given_up = mnemo(&dir, &base_url, &["jobs", "run", "execute_consolidation"]).await;
    assert!(stdout(&still_given_up).contains("1 sessions given up"));
    assert!(!still_given_up.status.success());
    let retry = mnemo(&dir, &base_url, &["jobs", "retry"]).await;
    assert!(retry.status.success(), "{retry:?}");
    assert!(
        stdout(&retry).starts_with("1 sessions and 0 memories"),
        "{}",
        stdout(&retry)
    );
    let done = mnemo(&dir, &base_url, &["jobs", "run", "execute_consolidation"]).await;
    assert!(
        stdout(&done).contains("1 sessions consolidated (1 facts)")
            && !stdout(&done).contains("given up"),
        "{}",
        stdout(&done)
    );
    assert!(done.status.success(), "{done:?}");
    let again = mnemo(&dir, &base_url, &["jobs", "retry"]).await;
    assert!(stdout(&again).starts_with("0 sessions and 0 memories"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_whose_enrichment_was_given_up_fails_each_run_until_a_retry() {
    let server =
        HttpTestServer::respond_with(|_| CannedAnswer::raw(503, "{\"error\": \"overloaded\"}"))
            .await;
    let dir = store_with_turn("My sister Dana moves to Porto in May");
    let base_url = server.base_url.clone();

    let failed = mnemo(
        &dir,
        &base_url,
        &["jobs", "run", "execute_entity_enrichment"],
    )
    .await;
    assert!(
        stdout(&failed).contains("1 failed") && !stdout(&failed).contains("given up"),
        "{failed:?}"
    );
    assert!(!failed.status.success());
    let given_up = mnemo(
        &dir,
        &base_url,
        &["jobs", "run", "execute_entity_enrichment"],
    )
    .await;
    let report = stdout(&given_up);
    assert!(
        report.contains("0 failed, 1 memories given up after 1 failed attempts")
            && report.contains("`mnemo jobs retry`"),
        "{report}"
    );
    assert!(!given_up.status.success(), "{given_up:?}");
    let retry = mnemo(&dir, &base_url, &["jobs", "retry"]).await;
    assert!(
        stdout(&retry).starts_with("0 sessions and 1 memories"),
        "{retry:?}"
    );
}
