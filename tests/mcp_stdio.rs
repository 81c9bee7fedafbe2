//! `mnemo mcp` driven over stdio with raw JSON-RPC, as an MCP client would: initialize,
//! tools/list, tools/call remember, then tools/call search_memory.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Client {
    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its response arrives.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).unwrap();
            assert!(
                read > 0,
                "the server closed stdout before answering {method}"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) {
                return message;
            }
        }
    }
}

#[test]
fn an_mcp_client_lists_and_calls_the_memory_tools() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["mcp", "--user", "ana"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // A watchdog, so a hung server fails the test instead of hanging it.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let mut client = Client {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        child,
    };

    let init = client.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "mnemo");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let list = client.request(2, "tools/list", json!({}));
    let tools: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    for expected in [
        "search_memory",
        "remember",
        "recall",
        "remember_fact",
        "forget_memory",
    ] {
        assert!(
            tools.contains(&expected),
            "{expected} missing from {tools:?}"
        );
    }
    let remember_schema = &list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "remember")
        .unwrap()["inputSchema"];
    assert_eq!(remember_schema["type"], "object");

    let saved = client.request(
        3,
        "tools/call",
        json!({"name": "remember", "arguments": {"content": "Ana plays the cello on Sundays", "subjects": ["Ana"]}}),
    );
    assert_eq!(saved["result"]["isError"], false, "{saved}");
    let text = saved["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("fact_"), "{text}");

    let found = client.request(
        4,
        "tools/call",
        json!({"name": "search_memory", "arguments": {"query": "cello"}}),
    );
    let hits: Value =
        serde_json::from_str(found["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        hits[0]["content"], "Ana plays the cello on Sundays",
        "{found}"
    );

    let bad = client.request(
        5,
        "tools/call",
        json!({"name": "search_memory", "arguments": {"query": 42}}),
    );
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert!(bad["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("argument `query`"));

    drop(client.stdin);
    let status = client.child.wait().unwrap();
    assert!(
        status.success(),
        "the server exits cleanly when stdin closes"
    );
}
