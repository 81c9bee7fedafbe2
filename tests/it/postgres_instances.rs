//! Three `mnemo serve` instances on one PostgreSQL database, as behind a load balancer: users'
//! turns arrive at any instance, some sent twice to different ones, while every instance's
//! scheduler fires the same jobs every two seconds. Nothing is lost, nothing is stored twice,
//! every memory gets one vector, and each due run of a job runs in one instance only.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::common;

use crate::common::server::{create_key, Served};

const USERS: [&str; 3] = ["ana", "ben", "cal"];
const TURNS_PER_USER: usize = 40;
/// Jobs every instance schedules every two seconds.
const JOBS: [&str; 2] = ["expire_memories", "execute_decay"];

fn config(url: &str) -> String {
    format!(
        "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\ndatabase_url = \"{url}\"\n\
         expiry_cron = \"*/2 * * * * *\"\n\
         [extensions.memory_maintenance]\ndecay_cron = \"*/2 * * * * *\"\n"
    )
}

fn turn(user: &str, index: usize) -> Value {
    let at = chrono::DateTime::parse_from_rfc3339("2026-03-02T08:00:00Z").unwrap()
        + chrono::Duration::minutes(index as i64);
    json!({
        "id": format!("{user}-{index}"),
        "type": if index.is_multiple_of(2) { "user_message" } else { "agent_response" },
        "at": at.to_rfc3339(),
        "session_id": format!("{user}-s{}", index / 10),
        "text": format!("{user} turn {index}: the Lisbon trip with Dana, note {}", index * 7),
    })
}

/// Posts `body` as a client behind a load balancer does: a 503 (a pool busy past its wait on a
/// loaded machine, with `Retry-After: 1`) acknowledged nothing, so the same events are sent
/// again after a second, at most ten times. Their ids keep a resend from storing anything twice.
async fn send_until_taken(
    instance: &Served,
    key: &str,
    body: &Value,
) -> (reqwest::StatusCode, Value) {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (status, reply) = instance
            .call(
                Some(key),
                None,
                Method::POST,
                "/v1/events",
                Some(body.clone()),
            )
            .await;
        if status != reqwest::StatusCode::SERVICE_UNAVAILABLE || attempts == 10 {
            return (status, reply);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Each job's runs in each instance, from `GET /v1/jobs`.
async fn job_runs(instances: &[Served]) -> HashMap<String, u64> {
    let mut runs = HashMap::new();
    for instance in instances {
        let (_, body) = instance
            .call(
                Some(&instance.admin_key),
                None,
                Method::GET,
                "/v1/jobs",
                None,
            )
            .await;
        for job in body["jobs"].as_array().unwrap() {
            *runs
                .entry(job["name"].as_str().unwrap().to_owned())
                .or_default() += job["runs"].as_u64().unwrap();
        }
    }
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_lose_duplicate_and_repeat_nothing() {
    let url = mnemo_pg_fixture::fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let instances: Vec<Served> = (0..3)
        .map(|_| Served::start(dir.path(), &config(&url), &[]))
        .collect();
    let keys: HashMap<&str, String> = USERS
        .iter()
        .map(|user| (*user, create_key(dir.path(), &["--user", user])))
        .collect();
    let started = Instant::now();

    // Each user's turns go to the instances in turn, and every fourth is sent again to the next
    // instance at the same time.
    let instances = std::sync::Arc::new(instances);
    let mut writers = Vec::new();
    for user in USERS {
        let key = keys[user].clone();
        let instances = std::sync::Arc::clone(&instances);
        writers.push(tokio::spawn(async move {
            let mut stored: HashMap<String, usize> = HashMap::new();
            for index in 0..TURNS_PER_USER {
                let body = json!({"events": [turn(user, index)]});
                let first = &instances[index % 3];
                let second = &instances[(index + 1) % 3];
                let sends = if index.is_multiple_of(4) { 2 } else { 1 };
                let replies = futures::future::join_all(
                    [first, second][..sends]
                        .iter()
                        .map(|instance| send_until_taken(instance, &key, &body)),
                )
                .await;
                for (status, reply) in replies {
                    assert_eq!(status, reqwest::StatusCode::OK, "{reply}");
                    if reply["results"][0]["stored"] == true {
                        *stored.entry(format!("{user}-{index}")).or_default() += 1;
                    }
                }
            }
            stored
        }));
    }
    let mut stored: HashMap<String, usize> = HashMap::new();
    for writer in writers {
        stored.extend(writer.await.unwrap());
    }
    let events = USERS.len() * TURNS_PER_USER;
    assert_eq!(
        stored.len(),
        events,
        "every event was acknowledged as stored once"
    );
    assert!(stored.values().all(|times| *times == 1), "{stored:?}");

    // Let the schedulers fire a few times, then compare the runs with the claims.
    tokio::time::sleep(Duration::from_secs(8).saturating_sub(started.elapsed())).await;
    let runs = job_runs(&instances).await;
    for job in JOBS {
        let claimed: u64 = mnemo_pg_fixture::query(
            &url,
            &format!("SELECT COUNT(*) FROM job_runs WHERE job = '{job}'"),
        )
        .parse()
        .unwrap();
        let ran = runs[job];
        assert!(ran >= 2, "{job} ran {ran} times in 8 s");
        // A run is claimed before it starts: at most the one due while we read was claimed and
        // not yet counted. Three instances each running every due time would count three times
        // the claims.
        assert!(
            ran <= claimed && claimed <= ran + 1,
            "{job}: {ran} runs for {claimed} claimed due times"
        );
    }

    // Every memory gets its vector once the indexers are done.
    let deadline = Instant::now() + Duration::from_secs(180);
    let report = loop {
        let output = common::mnemo_in(dir.path())
            .env("MNEMO_DATABASE_URL", &url)
            .args(["check", "--json"])
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        if report["queued"] == 0 || Instant::now() > deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["memories"], json!(events), "{report}");
    assert_eq!(report["vectors"], json!(events), "{report}");
    assert_eq!(report["queued"], json!(0), "{report}");
    let recorded = mnemo_pg_fixture::query(
        &url,
        "SELECT COUNT(*), COUNT(DISTINCT (user_id, event_id)) FROM ingested_events",
    );
    assert_eq!(recorded, format!("{events}|{events}"));
}

/// Whether every instance refuses `key` at its next request.
async fn refused_by_all(instances: &[Served], key: &str) -> bool {
    for instance in instances {
        let (status, _) = instance
            .call(Some(key), None, Method::GET, "/v1/stats", None)
            .await;
        if status != reqwest::StatusCode::UNAUTHORIZED {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_on_one_instance_works_on_all_and_a_revocation_reaches_all_at_once() {
    let url = mnemo_pg_fixture::fresh_database();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = format!("[extensions.memory]\ndatabase_url = \"{url}\"\n");
    // Each instance has its own data directory, as on separate machines: only the database is
    // shared.
    let instances: Vec<Served> = dirs
        .iter()
        .map(|dir| Served::start(dir.path(), &config, &[]))
        .collect();
    let admin = instances[0].admin_key.clone();
    let make = |user: &'static str| {
        let instance = &instances[0];
        let admin = admin.clone();
        async move {
            let (status, made) = instance
                .call(
                    Some(&admin),
                    None,
                    Method::POST,
                    "/v1/keys",
                    Some(json!({"user_id": user})),
                )
                .await;
            assert_eq!(status, reqwest::StatusCode::CREATED, "{made}");
            (
                made["id"].as_str().unwrap().to_owned(),
                made["key"].as_str().unwrap().to_owned(),
            )
        }
    };
    let (dora_id, dora) = make("dora").await;
    for instance in &instances {
        let (status, body) = instance
            .call(Some(&dora), None, Method::GET, "/v1/stats", None)
            .await;
        assert_eq!(status, reqwest::StatusCode::OK, "{body}");
        assert_eq!(body["user_id"], "dora");
    }

    // Revoked through the second instance (with the third's admin key): refused on all.
    let (status, body) = instances[1]
        .call(
            Some(&instances[2].admin_key),
            None,
            Method::DELETE,
            &format!("/v1/keys/{dora_id}"),
            None,
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    // Each server reads the key from the store at every request: no delay to wait out.
    assert!(refused_by_all(&instances, &dora).await);

    // Erasing a user through one instance revokes the user's keys on all.
    let (_, eve) = make("eve").await;
    let (status, body) = instances[2]
        .call(Some(&eve), None, Method::DELETE, "/v1/users/eve", None)
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert!(refused_by_all(&instances, &eve).await);
    let (_, listed) = instances[1]
        .call(Some(&admin), None, Method::GET, "/v1/keys", None)
        .await;
    let revoked: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|key| key["revoked_at"].is_string())
        .filter_map(|key| key["user_id"].as_str())
        .collect();
    assert_eq!(revoked, ["dora", "eve"], "{listed}");
}

/// `scripts/postgres ARGS`; its last line of output (the URL, for `start`).
fn postgres_script(args: &[&str]) -> String {
    let output = std::process::Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres"),
    )
    .args(args)
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "scripts/postgres {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// One request of the outage test: when it was sent (since the test began), how long its
/// answer took, its status, its `Retry-After` and its error message.
struct Sent {
    at: Duration,
    took: Duration,
    status: u16,
    retry_after: Option<String>,
    message: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_postgres_is_down_requests_get_503_within_a_second_and_recover_without_restarts() {
    let pg_dir = tempfile::tempdir().unwrap();
    // As root the server runs as `nobody`, who must reach its directory.
    std::fs::set_permissions(
        pg_dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let server_dir = pg_dir.path().join("server");
    let url = postgres_script(&["start", server_dir.to_str().unwrap()]);
    let discard = scopeguard(server_dir.clone());
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        dir.path(),
        &format!("[extensions.memory]\ndatabase_url = \"{url}\"\n"),
        &[],
    );
    let key = create_key(dir.path(), &["--user", "ana"]);
    let client = reqwest::Client::new();
    let began = Instant::now();
    let stop_clients = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for client_index in 0..3 {
        let (client, url, key) = (client.clone(), served.url.clone(), key.clone());
        let stop = stop_clients.clone();
        clients.push(tokio::spawn(async move {
            let mut sent = Vec::new();
            let mut acked = Vec::new();
            let mut index = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let id = format!("c{client_index}-{index}");
                index += 1;
                let at = began.elapsed();
                let response = client
                    .post(format!("{url}/v1/events"))
                    .bearer_auth(&key)
                    .json(
                        &json!({"id": id, "type": "user_message", "at": "2026-11-20T10:00:00Z",
                        "session_id": "s", "text": format!("turn {id} about the Lisbon trip")}),
                    )
                    .send()
                    .await
                    .unwrap();
                let took = began.elapsed() - at;
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .map(|value| value.to_str().unwrap().to_owned());
                let body: Value = response.json().await.unwrap();
                if status == 200 && body["results"][0]["stored"] == true {
                    acked.push(id);
                }
                sent.push(Sent {
                    at,
                    took,
                    status,
                    retry_after,
                    message: body["error"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                });
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (sent, acked)
        }));
    }
    let ready = |client: reqwest::Client, url: String| async move {
        client
            .get(format!("{url}/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ready(client.clone(), served.url.clone()).await, 200);

    // PostgreSQL goes away.
    postgres_script(&["stop", server_dir.to_str().unwrap()]);
    let down = began.elapsed();
    let mut not_ready_after = None;
    while not_ready_after.is_none() && began.elapsed() < down + Duration::from_secs(5) {
        if ready(client.clone(), served.url.clone()).await == 503 {
            not_ready_after = Some(began.elapsed() - down);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(began.elapsed() - down)).await;

    // It comes back on its port; the server finds it again by itself. The script returns once
    // PostgreSQL answers, so it is down only until the script is started.
    let restarting = began.elapsed();
    let restarted = postgres_script(&["start", server_dir.to_str().unwrap()]);
    assert_eq!(
        restarted, url,
        "scripts/postgres starts it again on its port"
    );
    let up = began.elapsed();
    let mut ready_after = None;
    while ready_after.is_none() && began.elapsed() < up + Duration::from_secs(10) {
        if ready(client.clone(), served.url.clone()).await == 200 {
            ready_after = Some(began.elapsed() - up);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_clients.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut sent = Vec::new();
    let mut acked = Vec::new();
    for client in clients {
        let (client_sent, client_acked) = client.await.unwrap();
        sent.extend(client_sent);
        acked.extend(client_acked);
    }

    let not_ready_after =
        not_ready_after.expect("/readyz never said 503 while PostgreSQL was down");
    assert!(
        not_ready_after < Duration::from_secs(1),
        "/readyz said 503 after {not_ready_after:?}"
    );
    let ready_after = ready_after.expect("the server never found PostgreSQL again");
    // No answer took longer than the connect timeout and a little.
    let slowest = sent.iter().map(|sent| sent.took).max().unwrap();
    assert!(
        slowest < Duration::from_millis(1_500),
        "an answer took {slowest:?}"
    );
    // While it was down, every answer was 503 `unavailable` with `Retry-After`, saying why.
    let during: Vec<&Sent> = sent
        .iter()
        .filter(|sent| sent.at > down + Duration::from_secs(1) && sent.at + sent.took < restarting)
        .collect();
    assert!(
        during.len() > 10,
        "{} requests while it was down",
        during.len()
    );
    for sent in &during {
        assert_eq!(sent.status, 503, "{}", sent.message);
        assert_eq!(sent.retry_after.as_deref(), Some("1"));
        assert!(
            sent.message.contains("connection refused"),
            "{}",
            sent.message
        );
    }
    // Afterwards, stored again.
    let after: Vec<&Sent> = sent
        .iter()
        .filter(|sent| sent.at > up + ready_after)
        .collect();
    assert!(!after.is_empty() && after.iter().all(|sent| sent.status == 200));
    // Every acknowledged event is stored.
    let stored: Vec<String> = mnemo_pg_fixture::query(&url, "SELECT event_id FROM ingested_events")
        .lines()
        .map(str::to_owned)
        .collect();
    let missing: Vec<&String> = acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not stored: {missing:?}"
    );
    eprintln!(
        "{} requests, {} acknowledged, {} stored; 503 from /readyz after {not_ready_after:?}, \
         ready again {ready_after:?} after PostgreSQL; slowest answer {slowest:?}",
        sent.len(),
        acked.len(),
        stored.len()
    );
    drop(discard);
}

/// Discards the PostgreSQL server in `dir` when dropped, whatever the test's outcome.
fn scopeguard(dir: std::path::PathBuf) -> impl Drop {
    struct Discard(std::path::PathBuf);
    impl Drop for Discard {
        fn drop(&mut self) {
            let _ = std::process::Command::new(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres"),
            )
            .arg("discard")
            .arg(&self.0)
            .status();
        }
    }
    Discard(dir)
}

/// One MCP message posted to `instance` with `key` (on `session`, if any): the status, the
/// JSON-RPC answer if there is one, and the session id the answer names.
async fn mcp_post(
    instance: &Served,
    key: &str,
    session: Option<&str>,
    method: reqwest::Method,
    message: Option<Value>,
) -> (u16, Option<Value>, Option<String>) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}/mcp", instance.url))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream");
    if let Some(message) = message {
        request = request.json(&message);
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let named = response
        .headers()
        .get("mcp-session-id")
        .map(|value| value.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    let answer = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|value| value.get("id").is_some())
        .or_else(|| serde_json::from_str(&text).ok());
    (status, answer, named)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_opened_on_one_instance_continues_on_another_for_its_key_only() {
    let url = mnemo_pg_fixture::fresh_database();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = format!(
        "[extensions.embedding]\nenabled = false\n[extensions.ner]\n\
         [extensions.memory]\ndatabase_url = \"{url}\"\n"
    );
    let instances: Vec<Served> = dirs
        .iter()
        .map(|dir| Served::start(dir.path(), &config, &[]))
        .collect();
    let ana = create_key(dirs[0].path(), &["--user", "ana"]);
    let ben = create_key(dirs[1].path(), &["--user", "ben"]);
    let call = |id: u64, name: &str, arguments: Value| {
        Some(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}))
    };

    let (status, answer, session) = mcp_post(
        &instances[0],
        &ana,
        None,
        Method::POST,
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "fleet-test", "version": "1"}}})),
    )
    .await;
    assert_eq!(status, 200, "{answer:?}");
    let session = session.expect("the handshake names a session");
    let (status, _, _) = mcp_post(
        &instances[1],
        &ana,
        Some(&session),
        Method::POST,
        Some(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
    )
    .await;
    assert!((200..300).contains(&status), "{status}");
    // The session continues on the third instance, and what it stored is found on the second.
    let (status, answer, _) = mcp_post(
        &instances[2],
        &ana,
        Some(&session),
        Method::POST,
        call(
            2,
            "remember",
            json!({"content": "Ana keeps bees on the roof"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{answer:?}");
    assert!(answer.as_ref().unwrap()["result"].is_object(), "{answer:?}");
    let (status, answer, _) = mcp_post(
        &instances[1],
        &ana,
        Some(&session),
        Method::POST,
        call(3, "search_memory", json!({"query": "bees roof"})),
    )
    .await;
    assert_eq!(status, 200, "{answer:?}");
    assert!(answer.unwrap().to_string().contains("bees on the roof"));

    // Another user's key can neither use the session nor end it, on any instance.
    for instance in &instances {
        let (status, answer, _) = mcp_post(
            instance,
            &ben,
            Some(&session),
            Method::POST,
            call(4, "search_memory", json!({"query": "bees"})),
        )
        .await;
        assert_eq!(status, 404, "{answer:?}");
        let (status, _, _) = mcp_post(instance, &ben, Some(&session), Method::DELETE, None).await;
        assert_eq!(status, 404);
    }
    let (status, _, _) = mcp_post(
        &instances[0],
        &ana,
        Some(&session),
        Method::POST,
        call(5, "search_memory", json!({"query": "bees"})),
    )
    .await;
    assert_eq!(status, 200, "the session survived the other key's attempts");

    // Its own key ends it; then it is gone everywhere.
    let (status, _, _) = mcp_post(&instances[1], &ana, Some(&session), Method::DELETE, None).await;
    assert!((200..300).contains(&status), "{status}");
    for instance in &instances {
        let (status, _, _) = mcp_post(
            instance,
            &ana,
            Some(&session),
            Method::POST,
            call(6, "search_memory", json!({"query": "bees"})),
        )
        .await;
        assert_eq!(status, 404);
    }
}
