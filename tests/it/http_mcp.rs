//! MCP over streamable HTTP at `/mcp` of `mnemo serve`, as an MCP client speaks it: JSON-RPC
//! posted with a bearer key, answers as server-sent events, a session id from the handshake.
//! The tools act for the key's user; no argument can name another.

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

/// An MCP client session over HTTP.
struct McpSession {
    client: Client,
    url: String,
    key: String,
    act_for: Option<String>,
    session: Option<String>,
    next_id: u64,
}

impl McpSession {
    fn new(served: &Served, key: &str, act_for: Option<&str>) -> Self {
        Self {
            client: Client::new(),
            url: format!("{}/mcp", served.url),
            key: key.to_owned(),
            act_for: act_for.map(str::to_owned),
            session: None,
            next_id: 1,
        }
    }

    /// Posts one JSON-RPC message; returns the status and the JSON-RPC answer, if any.
    async fn post(&mut self, message: Value) -> (StatusCode, Option<Value>) {
        let mut request = self
            .client
            .post(&self.url)
            .bearer_auth(&self.key)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .json(&message);
        if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-06-18");
        }
        if let Some(user) = &self.act_for {
            request = request.header("x-mnemo-user", user);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.to_str().unwrap().to_owned());
        }
        let text = response.text().await.unwrap();
        // Server-sent events: the answer is the `data:` line that carries an `id`.
        let answer = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|value| value.get("id").is_some())
            .or_else(|| serde_json::from_str(&text).ok());
        (status, answer)
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let (status, answer) = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert_eq!(status, StatusCode::OK, "{method}: {answer:?}");
        answer.unwrap_or_else(|| panic!("{method}: no answer"))
    }

    async fn initialize(&mut self) -> Value {
        let answer = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "1"}}),
            )
            .await;
        assert!(self.session.is_some(), "the handshake names a session");
        let (status, _) = self
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert!(status.is_success(), "{status}");
        answer
    }

    async fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }
}

/// The text of a tool result's first content block, as JSON.
fn tool_json(answer: &Value) -> Value {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    serde_json::from_str(text).unwrap_or(Value::String(text.to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_acts_for_the_key_and_offers_the_stdio_tools() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let ben = create_key(dir.path(), &["--user", "ben"]);

    // No key, no MCP.
    let response = Client::new()
        .post(format!("{}/mcp", served.url))
        .header(ACCEPT, "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);

    // A session that could never act is refused at once, with the API's JSON error: an admin
    // key naming no user, a chat-bound key naming no chat.
    let team = create_key(dir.path(), &["--user", "ana", "--chat", "team"]);
    for (key, code) in [
        (served.admin_key.as_str(), "user_required"),
        (team.as_str(), "forbidden"),
    ] {
        let response = Client::new()
            .post(format!("{}/mcp", served.url))
            .bearer_auth(key)
            .header(ACCEPT, "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
            .send()
            .await
            .unwrap();
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], code, "{error}");
    }

    let mut session = McpSession::new(&served, &ana, None);
    let info = session.initialize().await;
    assert_eq!(info["result"]["serverInfo"]["name"], "mnemo", "{info}");
    let tools = session.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    for expected in ["search_memory", "remember", "correct_fact", "forget_memory"] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }

    let saved = session
        .call_tool("remember", json!({"content": "Ana keeps bees on the roof"}))
        .await;
    let saved = tool_json(&saved);
    let id = saved["saved"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{saved}"))
        .to_owned();
    // No tool argument names the user: a `user_id` is refused, and nothing is stored for it.
    let refused = session
        .call_tool(
            "remember",
            json!({"content": "Ben's secret", "user_id": "ben"}),
        )
        .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");

    // It is Ana's: found through her key over the JSON API, not through Ben's.
    let fetch = |key: &str| {
        Client::new()
            .get(format!("{}/v1/memories/{id}", served.url))
            .bearer_auth(key)
            .send()
    };
    assert_eq!(fetch(&ana).await.unwrap().status(), StatusCode::OK);
    assert_eq!(fetch(&ben).await.unwrap().status(), StatusCode::NOT_FOUND);
    let mut bens = McpSession::new(&served, &ben, None);
    bens.initialize().await;
    let found = tool_json(
        &bens
            .call_tool("search_memory", json!({"query": "bees roof"}))
            .await,
    );
    assert_eq!(found, json!([]), "Ben's search finds nothing of Ana's");
    let found = tool_json(
        &session
            .call_tool("search_memory", json!({"query": "bees roof"}))
            .await,
    );
    assert_eq!(found[0]["id"], id.as_str(), "{found}");

    // An admin key acts for the user it names.
    let admin = served.admin_key.clone();
    let mut as_ana = McpSession::new(&served, &admin, Some("ana"));
    as_ana.initialize().await;
    let found = tool_json(
        &as_ana
            .call_tool("search_memory", json!({"query": "bees"}))
            .await,
    );
    assert_eq!(found[0]["id"], id.as_str(), "{found}");
    let context = as_ana
        .request(
            "prompts/get",
            json!({"name": "memory_context", "arguments": {"query": "bees"}}),
        )
        .await;
    let text = context["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("bees"), "{context}");
    assert!(
        served.stop(),
        "SIGTERM ends the server cleanly with MCP sessions open"
    );
}
