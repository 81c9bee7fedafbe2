//! Shutdown in order: what uses the memory store stops before the store's pool is closed, so a
//! shutdown never logs "indexing failed … closed pool".

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer, ReceivedRequest};
use mnemo_kernel::{ConversationEvent, Event};
use mnemo_memory::MemoryService;

use crate::common;
use serde_json::{json, Value};

/// Log lines, collected from a subscriber on this thread.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An OpenAI-style embeddings answer: one small vector per input.
fn embeddings(request: &ReceivedRequest) -> CannedAnswer {
    let count = request.body["input"].as_array().map_or(0, Vec::len);
    let data: Vec<Value> = (0..count)
        .map(|index| json!({"object": "embedding", "index": index, "embedding": [1.0, 0.5, 0.25]}))
        .collect();
    CannedAnswer::json(&json!({"object": "list", "data": data}))
}

/// Embeddings from the test server at `base_url`, with NER and memory on.
fn remote_embedding_config(base_url: &str) -> String {
    format!(
        "[extensions.embedding]\nprovider = \"remote\"\nbase_url = \"{base_url}\"\nmodel = \"m\"\n\
         dimensions = 3\ntimeout_secs = 10\n[extensions.ner]\n[extensions.memory]\n"
    )
}

/// A kernel on `dir` with [`remote_embedding_config`], and its memory service.
async fn start_kernel(base_url: &str, dir: &std::path::Path) -> (Kernel, Arc<MemoryService>) {
    let config = Config::parse(&remote_embedding_config(base_url), "test.toml").unwrap();
    let kernel = Kernel::builder(mnemo_host::builtin_extensions(), config)
        .data_dir(dir)
        .start()
        .await
        .unwrap();
    let service = kernel.context().services().get::<MemoryService>().unwrap();
    (kernel, service)
}

/// One user turn to store.
fn boiler_turn() -> Event {
    ConversationEvent::from_value(json!({"type": "user_message", "id": "e1",
        "at": "2026-04-06T09:00:00Z", "session_id": "s1", "user_id": "ana",
        "text": "The boiler was serviced on Monday"}))
    .unwrap()
    .into_event()
}

/// The background indexer is waiting for the embedding server when the kernel shuts down. It
/// must be stopped with the store, not wake up afterwards to write into a closed pool.
///
/// A current-thread runtime, so that every task logs to this thread's subscriber and the
/// runtime (with any task left running) outlives the shutdown.
#[tokio::test(flavor = "current_thread")]
async fn shutdown_stops_the_indexer_before_closing_the_store() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);

    let server = HttpTestServer::respond_with(|request| {
        embeddings(request).delayed(Duration::from_millis(700))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (kernel, service) = start_kernel(&server.base_url, dir.path()).await;
    let turn = boiler_turn();
    // Stored at once; its vector is the background indexer's work, which asks the server and
    // waits for the answer.
    assert!(service.ingest(&turn).await.unwrap().is_some());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while server.received().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !server.received().is_empty(),
        "the indexer asked the embedding server for a vector"
    );
    kernel.shutdown().await;
    // Time for the answer to arrive, and for an indexer still running to try to store it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let logs = logs.text();
    assert!(!logs.contains("indexing failed"), "{logs}");
    assert!(!logs.contains("closed pool"), "{logs}");
}

/// A command that stores something with the embedding extension on ends without a warning.
#[test]
fn a_command_that_stores_with_embeddings_on_ends_without_warnings() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(HttpTestServer::respond_with(|request| {
        embeddings(request).delayed(Duration::from_millis(100))
    }));
    let dir = tempfile::tempdir().unwrap();
    let config = remote_embedding_config(&server.base_url);
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(dir.path().join("config.toml"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args([
            "remember",
            "The boiler was serviced on Monday",
            "--user",
            "ana",
        ])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("indexing failed"), "{stderr}");
    assert!(!stderr.contains("closed pool"), "{stderr}");
    assert!(
        !server.received().is_empty(),
        "the fact was sent to the embedding server"
    );
}

/// A kernel that was shut down and dropped frees its extensions' services. The memory service
/// holds the kernel's context, which holds the services: without the kernel clearing them at
/// shutdown, the cycle kept the service, its store and its embedding model alive, which
/// `mnemo eval` (a kernel per case) saw as about 140 MB more memory for every case.
#[tokio::test]
async fn a_kernel_shut_down_and_dropped_frees_its_services() {
    let server = HttpTestServer::respond_with(embeddings).await;
    let dir = tempfile::tempdir().unwrap();
    let (kernel, service) = start_kernel(&server.base_url, dir.path()).await;
    let turn = boiler_turn();
    assert!(service.ingest(&turn).await.unwrap().is_some());
    let watch = Arc::downgrade(&service);
    drop(service);
    kernel.shutdown().await;
    assert!(
        kernel.context().services().get::<MemoryService>().is_none(),
        "a shut-down kernel publishes no services"
    );
    drop(kernel);
    // Tasks the shutdown ended may still be dropping their handles on other workers.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while watch.upgrade().is_some() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        watch.upgrade().is_none(),
        "the memory service outlived its kernel"
    );
}

/// A turn of about 1,200 characters, different for each `index`.
fn long_turn(index: usize) -> Value {
    let sentence = format!(
        "On day {index} we talked about the harbour survey, the ferry timetable for route {} \
         and the budget line {} that Dana wants to move into the spring. ",
        index % 97,
        index * 7
    );
    json!({
        "id": format!("long-{index}"),
        "type": if index.is_multiple_of(2) { "user_message" } else { "agent_response" },
        "at": "2026-11-20T10:00:00Z",
        "session_id": format!("s{}", index / 50),
        "text": sentence.repeat(8),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_thousands_of_texts_queued_exits_within_the_grace_and_keeps_what_it_acked() {
    const GRACE: Duration = Duration::from_millis(4_000);
    const EVENTS: usize = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[kernel]\nshutdown_grace_ms = {}\n[extensions.embedding]\n[extensions.ner]\n\
         [extensions.memory]\n",
        GRACE.as_millis()
    );
    let served = common::server::Served::start(dir.path(), &config, &[]);
    let key = common::server::create_key(dir.path(), &["--user", "ana"]);
    let mut acknowledged = 0;
    for batch in 0..EVENTS / 500 {
        let events: Vec<Value> = (batch * 500..(batch + 1) * 500).map(long_turn).collect();
        let (status, reply) = served
            .call(
                Some(&key),
                None,
                reqwest::Method::POST,
                "/v1/events",
                Some(json!({ "events": events })),
            )
            .await;
        assert_eq!(status, reqwest::StatusCode::OK, "{reply}");
        acknowledged += reply["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|result| result["stored"] == true)
            .count();
    }
    assert_eq!(acknowledged, EVENTS);
    let (_, stats) = served
        .call(Some(&key), None, reqwest::Method::GET, "/v1/stats", None)
        .await;
    let queued = stats["pending_index"].as_i64().unwrap();
    assert!(queued > 1_000, "the indexer has thousands to do: {stats}");

    let signalled = std::time::Instant::now();
    assert!(served.stop(), "mnemo serve exits cleanly on SIGTERM");
    let took = signalled.elapsed();
    // The grace, and a little for the process to end.
    assert!(
        took < GRACE + Duration::from_millis(1_500),
        "exited after {took:?}"
    );

    // Every acknowledged event is stored, the rest of the queue with it.
    let output = common::mnemo_in(dir.path())
        .args(["stats", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["counts"]["episode"], EVENTS, "{stats}");
    assert!(stats["pending_index"].as_i64().unwrap() > 0, "{stats}");
    eprintln!("SIGTERM with {queued} texts queued: exited after {took:?}");
}
