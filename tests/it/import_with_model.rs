//! `mnemo import` with a model configured stores the events and leaves consolidation to the
//! jobs: before, every session the file closed was consolidated inline, one model call after
//! another (40 events took 404 s with a local model, with no sign of progress).

use serde_json::json;

use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};

use crate::common;

const CONFIG: &str = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n\
    [extensions.memory]\n[extensions.memory_maintenance]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_asks_the_model_nothing_and_the_job_consolidates_afterwards() {
    let server = HttpTestServer::respond_with(|_| {
        let facts = json!({"facts": [{"content": "The user plans a trip to Porto", "sources": [1]}],
            "contradictions": []});
        CannedAnswer::json(&json!({"choices": [{"message": {"role": "assistant",
            "content": facts.to_string()}, "finish_reason": "stop"}]}))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let lines: Vec<String> = (0..6)
        .map(|n| {
            json!({"type": "user_message", "id": format!("e{n}"),
                "at": format!("2026-03-02T0{n}:00:00Z"), "session_id": format!("s{n}"),
                "user_id": "ana", "text": format!("Day {n}: I plan a trip to Porto")})
            .to_string()
        })
        .collect();
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    let base_url = server.base_url.clone();
    let path = dir.path().to_owned();
    let mnemo = move |args: Vec<String>| {
        let (path, base_url) = (path.clone(), base_url.clone());
        tokio::task::spawn_blocking(move || {
            common::mnemo(&path, CONFIG)
                .args(args)
                .env("MNEMO_LLM_BASE_URL", base_url)
                .env("MNEMO_LLM_MODEL", "test-model")
                .output()
                .unwrap()
        })
    };

    let import = mnemo(vec!["import".into(), events.display().to_string()])
        .await
        .unwrap();
    assert!(import.status.success(), "{import:?}");
    assert_eq!(server.received().len(), 0, "import asked the model");

    let run = mnemo(vec![
        "jobs".into(),
        "run".into(),
        "execute_consolidation".into(),
    ])
    .await
    .unwrap();
    let report = String::from_utf8_lossy(&run.stdout);
    assert!(report.contains("6 sessions consolidated"), "{report}");
    assert!(!server.received().is_empty());
}
