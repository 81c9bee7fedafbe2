//! Degradation: a provider or the disk fails, and mnemo says so in words an operator can act
//! on, keeps what it acknowledged, and catches up when the fault is gone. Never a panic, never a
//! silent loss.
//!
//! - The embedding server is down: turns are still stored and found by full text; their vectors
//!   wait in the queue and are made once it is back.
//! - The model is down, then slow: the finished session stays pending with its episodes, and is
//!   consolidated once the model answers.
//! - The disk is full (a file size limit on the process): the writes it hits fail with an error
//!   that says so; every acknowledged event is stored, and resending the rest completes the store.
//! - The database is read-only: mnemo refuses to start, naming the file, and changes nothing.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer, ReceivedRequest};
use mnemo_kernel::{ConversationEvent, ToolScope};
use mnemo_memory::{MemoryApi, MemoryService, SessionKey};
use serde_json::{json, Value};

use crate::common::mnemo;

fn check(dir: &std::path::Path) -> Value {
    common::check(dir, NO_MODEL)
}

fn turn(id: &str, session: &str, minute: u32, text: &str) -> mnemo_kernel::Event {
    let at = Utc.with_ymd_and_hms(2026, 4, 6, 9, minute, 0).unwrap();
    let line = json!({"type": "user_message", "id": id, "at": at.to_rfc3339(),
        "session_id": session, "user_id": "ana", "text": text});
    ConversationEvent::from_value(line).unwrap().into_event()
}

fn ana_s1() -> SessionKey {
    SessionKey::new("ana", None, "s1")
}

fn scope() -> ToolScope {
    ToolScope {
        user_id: "ana".into(),
        session_id: Some("probe".into()),
        chat_id: None,
        at: Utc.with_ymd_and_hms(2026, 4, 6, 12, 0, 0).unwrap(),
        caller: mnemo_kernel::ToolCaller::Client,
    }
}

async fn start(config: &str, dir: &Path) -> (Kernel, Arc<MemoryService>) {
    let kernel = Kernel::builder(
        mnemo_host::builtin_extensions(),
        Config::parse(config, "test.toml").unwrap(),
    )
    .data_dir(dir)
    .start()
    .await
    .unwrap();
    let service = kernel.context().services().get::<MemoryService>().unwrap();
    (kernel, service)
}

/// An OpenAI-style embeddings answer: one small vector per input, from its length.
fn embeddings(request: &ReceivedRequest) -> CannedAnswer {
    let inputs = request.body["input"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, input)| {
            let length = input.as_str().unwrap_or_default().len() as f32;
            json!({"object": "embedding", "index": index, "embedding": [1.0, length / 100.0, 0.5]})
        })
        .collect();
    CannedAnswer::json(&json!({"object": "list", "data": data}))
}

#[tokio::test]
async fn an_embedding_server_that_is_down_delays_vectors_and_loses_nothing() {
    let down = Arc::new(AtomicBool::new(true));
    let switch = down.clone();
    let server = HttpTestServer::respond_with(move |request| {
        if switch.load(Ordering::SeqCst) {
            CannedAnswer::raw(503, "{\"error\": \"the embedding service is overloaded\"}")
        } else {
            embeddings(request)
        }
    })
    .await;
    let config = format!(
        "[extensions.embedding]\nprovider = \"remote\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         dimensions = 3\ntimeout_secs = 1\nretry_base_ms = 10\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n",
        server.base_url
    );
    let dir = tempfile::tempdir().unwrap();
    let (kernel, service) = start(&config, dir.path()).await;
    let texts = [
        "The boiler was serviced on Monday",
        "Priya moved the budget review to Thursday",
        "The spare tyre is in the garage loft",
    ];
    for (index, text) in texts.iter().enumerate() {
        let stored = service
            .ingest(&turn(&format!("e{index}"), "s1", index as u32, text))
            .await
            .expect("storing a turn does not wait for the embedding server");
        assert!(stored.is_some());
    }

    // Down: nothing is indexed, everything waits in the queue, full-text search still answers.
    assert_eq!(service.index_pending().await, 0);
    let report = service.check_integrity().await.unwrap();
    assert_eq!((report.memories, report.queued), (3, 3), "{report:?}");
    assert_eq!(report.problems(), Vec::<String>::new());
    let hits = kernel
        .call_tool(
            &scope(),
            "search_memory",
            json!({"query": "boiler serviced"}),
        )
        .await
        .expect("search degrades to full text, it does not fail");
    assert!(hits.to_string().contains("boiler"), "{hits}");
    assert!(
        server.received().len() >= 2,
        "the indexer and the query both asked the server"
    );

    // Back: the queue drains and vector search finds the turns.
    down.store(false, Ordering::SeqCst);
    let mut indexed = 0;
    for _ in 0..10 {
        indexed += service.index_pending().await;
        let report = service.check_integrity().await.unwrap();
        if report.queued == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report = service.check_integrity().await.unwrap();
    assert_eq!((report.vectors, report.queued), (Some(3), 0), "{report:?}");
    assert!(indexed <= 3, "nothing indexed twice: {indexed}");
    let hits = kernel
        .call_tool(
            &scope(),
            "search_memory",
            json!({"query": "garage loft", "mode": "vector", "limit": 3}),
        )
        .await
        .unwrap();
    assert_eq!(hits.as_array().map(Vec::len), Some(3), "{hits}");
    kernel.shutdown().await;
}

/// The model's words for a consolidation or conflict-check prompt.
fn model_reply() -> CannedAnswer {
    let content = json!({
        "facts": [{"content": "Ana's boiler was serviced on Monday", "sources": [1]}],
        "contradictions": []
    })
    .to_string();
    CannedAnswer::json(
        &json!({"choices": [{"message": {"role": "assistant", "content": content},
        "finish_reason": "stop"}]}),
    )
}

const MODEL_DOWN: u8 = 0;
const MODEL_SLOW: u8 = 1;
const MODEL_UP: u8 = 2;

#[tokio::test]
async fn a_model_that_is_down_or_slow_leaves_the_session_pending_until_it_answers() {
    let mode = Arc::new(AtomicU8::new(MODEL_DOWN));
    let switch = mode.clone();
    let server = HttpTestServer::respond_with(move |_| match switch.load(Ordering::SeqCst) {
        MODEL_DOWN => CannedAnswer::raw(500, "{\"error\": \"internal error\"}"),
        MODEL_SLOW => model_reply().delayed(Duration::from_secs(3)),
        _ => model_reply(),
    })
    .await;
    let config = format!(
        "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\ntimeout_secs = 1\n\
         [extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n\
         [extensions.memory_maintenance]\n",
        server.base_url
    );
    let dir = tempfile::tempdir().unwrap();
    let (kernel, service) = start(&config, dir.path()).await;
    kernel
        .publish(turn("e1", "s1", 0, "The boiler was serviced on Monday"))
        .await
        .unwrap();
    kernel
        .publish(turn("e2", "s1", 1, "It cost 140 euros"))
        .await
        .unwrap();
    // A new session closes s1, whose consolidation then fails against the model that is down.
    kernel
        .publish(turn("e3", "s2", 30, "Now about the garden"))
        .await
        .unwrap();
    kernel.settle().await;
    let pending = |service: Arc<MemoryService>| async move {
        service
            .get_pending_consolidations()
            .await
            .unwrap()
            .into_iter()
            .find(|pending| pending.session == ana_s1())
    };
    let first = pending(service.clone())
        .await
        .expect("s1 stays pending after the failure");
    assert!(first.attempts >= 1, "{first:?}");
    assert!(!service.is_session_consolidated(&ana_s1()).await.unwrap());

    // Slow: the call is cut at the timeout and counted as one more failed attempt.
    mode.store(MODEL_SLOW, Ordering::SeqCst);
    let run = kernel.run_job("execute_consolidation").await.unwrap();
    let outcome = format!("{:?}", run.outcome);
    assert!(outcome.contains("did not answer within 1 s"), "{outcome}");
    let second = pending(service.clone()).await.expect("still pending");
    assert!(second.attempts > first.attempts, "{second:?}");

    // Nothing was lost meanwhile, and nothing half-made was saved.
    let stats = kernel
        .call_tool(&scope(), "memory_stats", json!({}))
        .await
        .unwrap();
    assert_eq!(stats["counts"]["episode"], 3, "{stats}");
    assert_eq!(stats["counts"]["fact"], 0, "{stats}");

    // Up: the next run consolidates it.
    mode.store(MODEL_UP, Ordering::SeqCst);
    kernel.run_job("execute_consolidation").await.unwrap();
    assert!(service.is_session_consolidated(&ana_s1()).await.unwrap());
    let facts = kernel
        .call_tool(
            &scope(),
            "search_memory",
            json!({"query": "boiler serviced", "kind": "fact"}),
        )
        .await
        .unwrap();
    assert!(facts.to_string().contains("Ana's boiler"), "{facts}");
    kernel.shutdown().await;
}

const NO_MODEL: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n";

fn event_line(index: usize) -> String {
    json!({"type": "user_message", "id": format!("e{index}"), "at": "2026-04-06T09:00:00Z",
        "session_id": "s1", "user_id": "ana",
        "text": format!("Note {index} about the boiler, the budget and the garden: {}", "lorem ipsum ".repeat(25))})
    .to_string()
}

/// Runs `mnemo ingest` on `lines`; with `blocks`, under a file size limit of that many 512-byte
/// blocks (`ulimit -f`, with SIGXFSZ ignored so that a write past it fails instead of killing
/// the process). Returns the acknowledged ids and the error replies.
fn ingest(dir: &Path, lines: &[String], blocks: Option<u64>) -> (Vec<String>, Vec<String>) {
    let base = mnemo(dir, NO_MODEL);
    let mut command = match blocks {
        Some(blocks) => {
            let mut limited = Command::new("sh");
            limited
                .arg("-c")
                .arg(format!(
                    "ulimit -f {blocks} && trap '' XFSZ && exec \"$0\" \"$@\""
                ))
                .arg(base.get_program())
                .args(base.get_args());
            for (key, value) in base.get_envs() {
                match value {
                    Some(value) => limited.env(key, value),
                    None => limited.env_remove(key),
                };
            }
            limited
        }
        None => base,
    };
    command.arg("ingest").env_remove("RUST_LOG");
    let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let output = common::run_with_input(command, input.as_bytes());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let mut acked = Vec::new();
    let mut errors = Vec::new();
    for reply in String::from_utf8(output.stdout).unwrap().lines() {
        let reply: Value = serde_json::from_str(reply).unwrap();
        match reply["ack"].as_str() {
            Some(id) => acked.push(id.to_owned()),
            None => errors.push(reply["error"].as_str().unwrap_or_default().to_owned()),
        }
    }
    (acked, errors)
}

#[test]
fn a_full_disk_fails_the_writes_it_hits_and_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..300).map(event_line).collect();
    // 1 MB per file: the schema fits, the log fills after a few dozen turns.
    let (acked, errors) = ingest(dir.path(), &lines, Some(2048));
    assert!(
        !errors.is_empty(),
        "the limit was never reached, so the test proves nothing"
    );
    for error in &errors {
        assert!(
            error.contains("disk is full") || error.contains("file size limit"),
            "an operator should read what happened: {error}"
        );
    }
    // Every acknowledged event is in the store, and only those.
    let report = check(dir.path());
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["memories"], acked.len(), "{report}");

    // Without the limit, resending everything stores the rest once.
    let (again, errors) = ingest(dir.path(), &lines, None);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(again.len(), 300);
    let report = check(dir.path());
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["memories"], 300, "{report}");
}

/// Both ways a store can be read-only: the file alone (SQLite then opens it read-only without
/// an error, and mnemo must notice), and the file with its directory (the open fails).
#[test]
fn a_read_only_database_is_refused_by_name_and_left_unchanged() {
    refused_read_only(false);
    refused_read_only(true);
}

fn refused_read_only(directory_too: bool) {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::os::unix::process::CommandExt as _;

    let dir = tempfile::tempdir().unwrap();
    let (acked, _) = ingest(dir.path(), &[event_line(0)], None);
    assert_eq!(acked, ["e0"]);
    let data = dir.path().join("data");
    let database = data.join("memory.db");
    std::fs::set_permissions(&database, std::fs::Permissions::from_mode(0o444)).unwrap();
    // Without the directory, others may write in it (the test may run as `nobody`).
    let directory_mode = if directory_too { 0o555 } else { 0o777 };
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(directory_mode)).unwrap();
    for path in [dir.path().to_path_buf(), dir.path().join("config.toml")] {
        let mode = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let before = std::fs::read(&database).unwrap();

    let mut command = mnemo(dir.path(), NO_MODEL);
    // Root writes through file modes; run as `nobody` then, so that the modes count.
    if std::fs::metadata(dir.path()).unwrap().uid() == 0 {
        command.uid(65534).gid(65534);
    }
    let output = command
        .args(["remember", "The gate code changed", "--user", "ana"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("read-only") && stderr.contains(&database.display().to_string()),
        "the error names the file and the reason ({}): {stderr}",
        if directory_too {
            "file and directory"
        } else {
            "file only"
        }
    );
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        std::fs::read(&database).unwrap(),
        before,
        "the file is unchanged"
    );
}
