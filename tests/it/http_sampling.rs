//! MCP sampling: `mnemo serve` with no `[llm]` consolidates a user's conversation with that
//! user's own MCP client's model (`sampling/createMessage` on the client's event stream), and
//! never with another user's client. The test is the MCP client: it answers the request with
//! the model's words (scripted), and checks that the fact is saved.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Client, Response, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n\
    [extensions.memory_maintenance]\n[extensions.memory_reflection]\nenabled = false\n";

/// An MCP client that offers sampling, with its event stream open.
struct SamplingClient {
    url: String,
    key: String,
    session: String,
    stream: Response,
    buffer: String,
}

impl SamplingClient {
    async fn connect(served: &Served, key: &str) -> Self {
        let client = Client::new();
        let url = format!("{}/mcp", served.url);
        let post = |body: Value, session: Option<&str>| {
            let mut request = client
                .post(&url)
                .bearer_auth(key)
                .header(ACCEPT, "application/json, text/event-stream")
                .header(CONTENT_TYPE, "application/json")
                .json(&body);
            if let Some(session) = session {
                request = request
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-06-18");
            }
            request.send()
        };
        let response = post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
                "clientInfo": {"name": "sampling-test", "version": "1"}}}),
            None,
        )
        .await
        .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        response.text().await.unwrap();
        let initialized = post(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            Some(&session),
        )
        .await
        .unwrap();
        assert!(
            initialized.status().is_success(),
            "{}",
            initialized.status()
        );
        // The stream on which the server sends its own requests.
        let stream = client
            .get(&url)
            .bearer_auth(key)
            .header(ACCEPT, "text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        Self {
            url,
            key: key.to_owned(),
            session,
            stream,
            buffer: String::new(),
        }
    }

    /// The next JSON-RPC request the server sends within `wait`, if any (pings are skipped).
    async fn next_request(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buffer.find('\n') {
                let line: String = self.buffer.drain(..=end).collect();
                if let Some(data) = line.trim().strip_prefix("data:") {
                    if let Ok(message) = serde_json::from_str::<Value>(data.trim()) {
                        if message.get("method").is_some_and(|m| m != "ping")
                            && message.get("id").is_some()
                        {
                            return Some(message);
                        }
                    }
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.chunk())
                .await
                .ok()?;
            match chunk {
                Ok(Some(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Answers the server's request `id` with the model's `text`.
    async fn answer(&self, id: &Value, text: &str) {
        let response = Client::new()
            .post(&self.url)
            .bearer_auth(&self.key)
            .header(ACCEPT, "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": id, "result": {
                "role": "assistant", "content": {"type": "text", "text": text},
                "model": "client-model", "stopReason": "endTurn"}}))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
    }
}

async fn post(served: &Served, key: &str, path: &str, body: Value) -> Value {
    let response = Client::new()
        .post(format!("{}{path}", served.url))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidation_asks_the_users_own_client_through_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let ben = create_key(dir.path(), &["--user", "ben"]);
    let admin = served.admin_key.clone();

    // Before any client offers sampling there is no model: the job skips, counting no failure.
    let turns = json!({"events": [
        {"id": "a1", "type": "user_message", "at": "2026-11-20T10:00:00Z", "session_id": "s1",
         "text": "My sister Maria moved to Lisbon last spring."},
        {"id": "a2", "type": "agent_response", "at": "2026-11-20T10:00:05Z", "session_id": "s1",
         "text": "Lisbon is lovely in spring."},
    ]});
    post(&served, &ana, "/v1/events", turns).await;
    let run = post(
        &served,
        &admin,
        "/v1/jobs/execute_consolidation/run",
        json!({}),
    )
    .await;
    assert_eq!(run["ok"], true, "{run}");
    assert!(run["report"].as_str().unwrap().contains("skipped"), "{run}");

    let mut anas_client = SamplingClient::connect(&served, &ana).await;
    let mut bens_client = SamplingClient::connect(&served, &ben).await;
    // A new session of Ana's closes s1, and its consolidation asks her client's model.
    let next = json!({"id": "a3", "type": "user_message", "at": "2026-11-21T09:00:00Z",
                      "session_id": "s2", "text": "Good morning"});
    post(&served, &ana, "/v1/events", next).await;
    let request = anas_client
        .next_request(Duration::from_secs(60))
        .await
        .expect("the server asks Ana's client to sample");
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let params = &request["params"];
    assert!(
        params["systemPrompt"]
            .as_str()
            .unwrap()
            .contains("save_facts"),
        "{params}"
    );
    assert!(
        params["messages"].to_string().contains("Lisbon"),
        "{params}"
    );
    anas_client
        .answer(
            &request["id"],
            r#"{"facts": [{"content": "Ana's sister Maria moved to Lisbon", "sources": [1]}]}"#,
        )
        .await;

    let fetch_facts = || async {
        let response = Client::new()
            .get(format!("{}/v1/memories?kind=fact", served.url))
            .bearer_auth(&ana)
            .send()
            .await
            .unwrap();
        let facts: Value = response.json().await.unwrap();
        facts["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|memory| memory["content"].as_str().unwrap().to_owned())
            .collect::<Vec<String>>()
    };
    let mut contents = fetch_facts().await;
    for _ in 0..100 {
        if !contents.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        contents = fetch_facts().await;
    }
    assert_eq!(contents, ["Ana's sister Maria moved to Lisbon"]);
    // The job consolidates what is still pending, Ana's open session s2, with her model too;
    // s1 is done and not asked about again.
    let job = {
        let (url, admin) = (served.url.clone(), admin.clone());
        tokio::spawn(async move {
            let response = Client::new()
                .post(format!("{url}/v1/jobs/execute_consolidation/run"))
                .bearer_auth(admin)
                .send()
                .await
                .unwrap();
            response.json::<Value>().await.unwrap()
        })
    };
    let request = anas_client
        .next_request(Duration::from_secs(60))
        .await
        .expect("the job asks Ana's client about s2");
    let asked = request["params"]["messages"].to_string();
    assert!(
        asked.contains("Good morning") && !asked.contains("Lisbon"),
        "{asked}"
    );
    anas_client.answer(&request["id"], r#"{"facts": []}"#).await;
    let run = tokio::time::timeout(Duration::from_secs(60), job)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(fetch_facts().await, ["Ana's sister Maria moved to Lisbon"]);
    // Ben's client, connected all along, was never asked about Ana's conversation.
    assert_eq!(
        bens_client.next_request(Duration::from_millis(500)).await,
        None
    );
}
