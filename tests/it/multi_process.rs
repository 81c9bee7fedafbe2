//! Several mnemo processes on one store at once, as users run them: `mnemo ingest` producers,
//! an `import`, `remember` commands and `mcp` servers, all writing to one data directory. Every write either
//! commits or is refused with an error that names its cause; none fails with "database is
//! locked", none is lost. Opening a fresh data directory from several processes at once is
//! safe: they do not race on creating the schema.
//!
//! `MNEMO_STRESS_WRITES` sets the events each writer sends (default 150; `make stress` runs
//! 2,000), `MNEMO_STRESS_WRITERS` the `ingest` processes (default 3, beside the import and the
//! `remember` loop).

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Stdio};
use std::thread;

use serde_json::{json, Value};

use crate::common;

/// Memory and the fast NER only: no model to load, so the processes spend their time writing.
const CONFIG: &str = "[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n";

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn event(writer: &str, index: usize) -> String {
    json!({
        "type": if index.is_multiple_of(2) { "user_message" } else { "agent_response" },
        "id": format!("{writer}-{index}"),
        "at": format!("2026-05-01T{:02}:{:02}:{:02}Z", (index / 3600) % 24, (index / 60) % 60, index % 60),
        "session_id": format!("{writer}-s{}", index / 50),
        "user_id": writer,
        "text": format!("{writer} says number {index}: the Lisbon budget and Priya's review"),
    })
    .to_string()
}

/// What one `mnemo ingest` process reported: acknowledged event ids and error lines.
struct IngestReport {
    acknowledged: usize,
    errors: Vec<String>,
    success: bool,
}

/// Feeds `count` events to a `mnemo ingest` and reads its acknowledgements as they come.
fn ingest(dir: &Path, writer: String, count: usize) -> thread::JoinHandle<IngestReport> {
    let mut child: Child = common::mnemo_in(dir)
        .arg("ingest")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = thread::spawn(move || {
        for index in 0..count {
            writeln!(stdin, "{}", event(&writer, index)).unwrap();
        }
    });
    thread::spawn(move || {
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (mut acknowledged, mut errors) = (0, Vec::new());
        for line in stdout.lines() {
            let reply: Value = serde_json::from_str(&line.unwrap()).unwrap();
            match reply.get("error") {
                Some(error) => errors.push(error.to_string()),
                None => acknowledged += 1,
            }
        }
        feeder.join().unwrap();
        let output = child.wait_with_output().unwrap();
        if !output.status.success() {
            errors.push(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        IngestReport {
            acknowledged,
            errors,
            success: output.status.success(),
        }
    })
}

/// Saves `count` facts through a `mnemo mcp` server for `user`, one `tools/call` after another;
/// returns the error replies.
fn mcp_writer(dir: &Path, user: String, count: usize) -> thread::JoinHandle<Vec<String>> {
    let mut child = common::mnemo_in(dir)
        .args(["mcp", "--user", &user])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    thread::spawn(move || {
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut request = |id: usize, method: &str, params: Value| -> Value {
            let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            writeln!(stdin, "{message}").unwrap();
            loop {
                let mut line = String::new();
                assert!(
                    stdout.read_line(&mut line).unwrap() > 0,
                    "mcp closed stdout"
                );
                let reply: Value = serde_json::from_str(&line).unwrap();
                if reply["id"] == json!(id) {
                    return reply;
                }
            }
        };
        request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "multi-process", "version": "1"}}),
        );
        let mut errors = Vec::new();
        for index in 1..=count {
            let reply = request(
                index,
                "tools/call",
                json!({"name": "remember_fact", "arguments":
                    {"content": format!("{user} noted item {index} for the Lisbon budget")}}),
            );
            if reply.get("error").is_some() || reply["result"]["isError"] == json!(true) {
                errors.push(reply.to_string());
            }
        }
        drop(stdin);
        let _ = child.wait();
        errors
    })
}

fn stored(dir: &Path, kind: &str) -> u64 {
    let output = common::mnemo_in(dir)
        .args(["stats", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
    stats["counts"][kind].as_u64().unwrap()
}

#[test]
fn writers_in_several_processes_commit_everything_without_lock_errors() {
    let writes = setting("MNEMO_STRESS_WRITES", 150);
    let writers = setting("MNEMO_STRESS_WRITERS", 3);
    let remembers = 8;
    let (servers, server_writes) = (2, writes / 3);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), CONFIG).unwrap();
    let import_file = dir.path().join("import.jsonl");
    let lines: Vec<String> = (0..writes).map(|index| event("importer", index)).collect();
    std::fs::write(&import_file, lines.join("\n") + "\n").unwrap();

    let producers: Vec<_> = (0..writers)
        .map(|writer| ingest(dir.path(), format!("writer{writer}"), writes))
        .collect();
    let importer = common::mnemo_in(dir.path())
        .arg("import")
        .arg(&import_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mcp_servers: Vec<_> = (0..servers)
        .map(|server| mcp_writer(dir.path(), format!("mcp{server}"), server_writes))
        .collect();
    let rememberer = {
        let dir = dir.path().to_owned();
        thread::spawn(move || {
            (0..remembers)
                .map(|index| {
                    common::mnemo_in(&dir)
                        .args(["remember", &format!("Fact number {index} about the garden")])
                        .args(["--user", "rememberer"])
                        .output()
                        .unwrap()
                })
                .filter(|output| !output.status.success())
                .map(|output| String::from_utf8_lossy(&output.stderr).into_owned())
                .collect::<Vec<_>>()
        })
    };

    let mut acknowledged = 0;
    let mut refused = Vec::new();
    for producer in producers {
        let report = producer.join().unwrap();
        acknowledged += report.acknowledged;
        refused.extend(report.errors);
        assert!(report.success || !refused.is_empty());
    }
    let import = importer.wait_with_output().unwrap();
    let import_stderr = String::from_utf8_lossy(&import.stderr).into_owned();
    let remember_failures = rememberer.join().unwrap();
    let mcp_failures: Vec<String> = mcp_servers
        .into_iter()
        .flat_map(|server| server.join().unwrap())
        .collect();
    let episodes = stored(dir.path(), "episode");
    let facts = stored(dir.path(), "fact");
    eprintln!(
        "{writers} ingest processes x {writes} events, 1 import x {writes}, {remembers} remember \
         processes, {servers} mcp servers x {server_writes} facts: {acknowledged} acknowledged, \
         {} refused, {} mcp errors; stored {episodes} episodes and {facts} facts",
        refused.len(),
        mcp_failures.len()
    );

    assert!(
        refused.is_empty(),
        "{} writes refused, first: {:?}",
        refused.len(),
        refused.first()
    );
    assert_eq!(acknowledged, writers * writes);
    assert!(import.status.success(), "import failed: {import_stderr}");
    assert!(
        !import_stderr.contains("locked"),
        "import met a lock: {import_stderr}"
    );
    assert!(remember_failures.is_empty(), "{remember_failures:?}");
    assert!(mcp_failures.is_empty(), "{mcp_failures:?}");
    // Nothing acknowledged is lost, nothing is stored twice.
    assert_eq!(episodes, ((writers + 1) * writes) as u64);
    assert_eq!(facts, (remembers + servers * server_writes) as u64);
    let check = common::check(dir.path(), CONFIG);
    assert_eq!(check["problems"], json!([]), "{check}");
}

#[test]
fn processes_opening_a_fresh_store_at_once_do_not_race_on_its_schema() {
    for trial in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), CONFIG).unwrap();
        let children: Vec<Child> = (0..3)
            .map(|index| {
                common::mnemo_in(dir.path())
                    .args(["remember", &format!("Opened by process {index}")])
                    .args(["--user", "ana"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "trial {trial}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let output = common::mnemo_in(dir.path())
            .args(["stats", "--json"])
            .output()
            .unwrap();
        let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(stats["counts"]["fact"], 3, "trial {trial}: {stats}");
    }
}
