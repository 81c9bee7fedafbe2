//! `mnemo jobs retry`: after a model outage used up a session's consolidation attempts, the
//! session was skipped for good; the retry command gives it a fresh start, and the next run
//! consolidates it once the model answers.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use serde_json::json;

use crate::common;

const CONFIG: &str = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n\
    [extensions.memory]\n[extensions.memory_maintenance]\nmax_consolidation_attempts = 1\n";

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
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let line = json!({"type": "user_message", "id": "e1", "at": "2026-03-02T08:00:00Z",
        "session_id": "s1", "user_id": "ana", "text": "My sister moves to Porto in May"});
    std::fs::write(&events, format!("{line}\n")).unwrap();
    let base_url = server.base_url.clone();
    let path: PathBuf = dir.path().to_owned();
    let mnemo = move |args: &'static [&'static str]| {
        let (path, base_url) = (path.clone(), base_url.clone());
        tokio::task::spawn_blocking(move || run(&path, &base_url, args))
    };

    let import = common::mnemo(dir.path(), CONFIG)
        .arg("import")
        .arg(&events)
        .output()
        .unwrap();
    assert!(import.status.success(), "{import:?}");

    // The outage uses up the one attempt; the next run skips the session for good.
    let failed = mnemo(&["jobs", "run", "execute_consolidation"])
        .await
        .unwrap();
    assert!(stdout(&failed).contains(" 1 failed"), "{}", stdout(&failed));
    let skipped = mnemo(&["jobs", "run", "execute_consolidation"])
        .await
        .unwrap();
    assert!(
        stdout(&skipped).contains("1 skipped"),
        "{}",
        stdout(&skipped)
    );

    // The model is back, but only a retry brings the session back.
    up.store(true, Ordering::SeqCst);
    let still_skipped = mnemo(&["jobs", "run", "execute_consolidation"])
        .await
        .unwrap();
    assert!(stdout(&still_skipped).contains("1 skipped"));
    let retry = mnemo(&["jobs", "retry"]).await.unwrap();
    assert!(retry.status.success(), "{retry:?}");
    assert!(
        stdout(&retry).starts_with("1 sessions and 0 memories"),
        "{}",
        stdout(&retry)
    );
    let done = mnemo(&["jobs", "run", "execute_consolidation"])
        .await
        .unwrap();
    assert!(
        stdout(&done).contains("1 sessions consolidated (1 facts)"),
        "{}",
        stdout(&done)
    );
    let again = mnemo(&["jobs", "retry"]).await.unwrap();
    assert!(stdout(&again).starts_with("0 sessions and 0 memories"));
}
