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
    /// A client of the server `child` after the MCP handshake, with the server's answer to
    /// `initialize`.
    fn connect(mut child: Child) -> (Self, Value) {
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
        client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (client, init)
    }

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

/// `mnemo mcp --user ana` on a fresh data directory (memory without a model) offering every
/// memory tool, with a watchdog that kills it after two minutes, so a hung server fails its
/// test instead of hanging it.
fn start_server() -> (tempfile::TempDir, Child) {
    start_server_with("tools = \"all\"\n")
}

/// As [`start_server`], with `memory_keys` in `[extensions.memory]`.
fn start_server_with(memory_keys: &str) -> (tempfile::TempDir, Child) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n{memory_keys}"
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_mnemo"))
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
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    (dir, child)
}

#[test]
fn an_mcp_client_lists_and_calls_the_memory_tools() {
    let (_dir, child) = start_server();
    let (mut client, init) = Client::connect(child);
    assert_eq!(init["result"]["serverInfo"]["name"], "mnemo");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );

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

/// Lines the server writes, read on a thread so that a test can wait with a deadline.
fn lines_of(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<Value> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(message) = serde_json::from_str(&line) else {
                break;
            };
            if sender.send(message).is_err() {
                break;
            }
        }
    });
    receiver
}

#[test]
fn bad_request_lines_get_a_json_rpc_error_and_the_server_goes_on() {
    let (_dir, mut child) = start_server();
    let mut stdin = child.stdin.take().unwrap();
    let replies = lines_of(child.stdout.take().unwrap());
    let mut send = |line: &[u8]| {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let next = |what: &str| -> Value {
        replies
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no answer to {what} within 30 s"))
    };

    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(next("initialize")["id"], 1);
    send(br#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#);

    send(b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": ");
    let malformed = next("malformed JSON");
    assert_eq!(malformed["id"], Value::Null, "{malformed}");
    assert_eq!(malformed["error"]["code"], -32700, "{malformed}");

    send(br#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "remember", "arguments": {"content": "half a pair \ud800 here"}}}"#);
    let surrogate = next("a lone surrogate");
    assert_eq!(surrogate["id"], Value::Null, "{surrogate}");
    assert_eq!(surrogate["error"]["code"], -32700, "{surrogate}");
    assert!(
        surrogate["error"]["message"]
            .as_str()
            .unwrap()
            .contains("hex escape"),
        "{surrogate}"
    );

    let mut oversized =
        br#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "remember", "arguments": {"content": ""#
            .to_vec();
    oversized.extend(std::iter::repeat_n(b'x', 2 << 20));
    oversized.extend(br#""}}}"#);
    send(&oversized);
    let too_long = next("an oversized request");
    assert_eq!(too_long["error"]["code"], -32600, "{too_long}");
    assert!(
        too_long["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the limit is 1048576 bytes"),
        "{too_long}"
    );

    // The server goes on: the next request is answered, and nothing was stored meanwhile.
    send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "memory_stats", "arguments": {}}})
            .to_string()
            .as_bytes(),
    );
    let stats = next("memory_stats");
    assert_eq!(stats["id"], 5, "{stats}");
    let counts: Value =
        serde_json::from_str(stats["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(counts["counts"]["fact"], 0, "{counts}");

    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the server exits cleanly when stdin closes"
    );
}

/// The memory context block, which mnemo puts in its own system prompt, offered to MCP clients
/// as the prompt `memory_context` (for a query) and the resource `mnemo://memory/context`.
#[test]
fn an_mcp_client_gets_the_memory_context_as_a_prompt_and_a_resource() {
    let (_dir, child) = start_server();
    let (mut client, init) = Client::connect(child);
    let capabilities = &init["result"]["capabilities"];
    assert!(capabilities["prompts"].is_object(), "{init}");
    assert!(capabilities["resources"].is_object(), "{init}");
    let saved = client.request(
        2,
        "tools/call",
        json!({"name": "remember", "arguments": {"content": "My sister Inés plays the cello", "subjects": ["my sister Inés"]}}),
    );
    assert_eq!(saved["result"]["isError"], false, "{saved}");

    let prompts = client.request(3, "prompts/list", json!({}));
    let prompt = &prompts["result"]["prompts"][0];
    assert_eq!(prompt["name"], "memory_context", "{prompts}");
    assert_eq!(prompt["arguments"][0]["name"], "query", "{prompts}");
    assert_eq!(prompt["arguments"][0]["required"], true, "{prompts}");

    let got = client.request(
        4,
        "prompts/get",
        json!({"name": "memory_context", "arguments": {"query": "Who plays the cello?"}}),
    );
    let message = &got["result"]["messages"][0];
    assert_eq!(message["role"], "user", "{got}");
    let block = message["content"]["text"].as_str().unwrap_or_default();
    assert!(block.contains("## Known People"), "{got}");
    assert!(block.contains("cello"), "{got}");

    let missing = client.request(
        5,
        "prompts/get",
        json!({"name": "memory_context", "arguments": {}}),
    );
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("query"),
        "{missing}"
    );

    let resources = client.request(6, "resources/list", json!({}));
    let uri = resources["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(uri, "mnemo://memory/context", "{resources}");
    let read = client.request(7, "resources/read", json!({"uri": uri}));
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["uri"], "mnemo://memory/context", "{read}");
    assert!(
        contents["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Inés"),
        "{read}"
    );
    let unknown = client.request(8, "resources/read", json!({"uri": "mnemo://nothing"}));
    assert!(unknown["error"]["code"].is_number(), "{unknown}");

    drop(client.stdin);
    assert!(client.child.wait().unwrap().success());
}

/// The shipped default offers a client four memory tools, one per job, and they work.
#[test]
fn by_default_a_client_sees_one_memory_tool_per_job() {
    let (_dir, child) = start_server_with("");
    let (mut client, _) = Client::connect(child);
    let list = client.request(2, "tools/list", json!({}));
    let mut tools: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    tools.sort_unstable();
    assert_eq!(
        tools,
        ["correct_fact", "forget_memory", "remember", "search_memory"]
    );
    let saved = client.request(
        3,
        "tools/call",
        json!({"name": "remember", "arguments": {"content": "Ana's locker code is 4471"}}),
    );
    let saved: Value =
        serde_json::from_str(saved["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let id = saved["saved"][0]["id"].as_str().unwrap().to_owned();
    let corrected = client.request(
        4,
        "tools/call",
        json!({"name": "correct_fact", "arguments": {"id": id, "content": "Ana's locker code is 4472"}}),
    );
    assert_eq!(corrected["result"]["isError"], false, "{corrected}");
    let found = client.request(
        5,
        "tools/call",
        json!({"name": "search_memory", "arguments": {"query": "locker code"}}),
    );
    let text = found["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("4472") && !text.contains("4471"), "{text}");
    let unknown = client.request(
        6,
        "tools/call",
        json!({"name": "recall", "arguments": {"query": "locker"}}),
    );
    assert_eq!(
        unknown["error"]["message"], "unknown tool `recall`",
        "{unknown}"
    );
    drop(client.stdin);
    assert!(client.child.wait().unwrap().success());
}
