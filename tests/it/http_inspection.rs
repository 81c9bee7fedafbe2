//! What the inspector reads from `mnemo serve`, checked over plain HTTP: the page itself without
//! a key, listing filters, a fact's provenance and chain of versions, the caller's entities, and
//! the admin's users and job history, each kept to what the key may see.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

fn turn(id: &str, day: u32, text: &str) -> Value {
    json!({"id": id, "type": "user_message", "at": format!("2026-11-{day:02}T10:00:00Z"),
           "session_id": format!("s{day}"), "text": text})
}

fn contents(page: &Value) -> Vec<String> {
    page["memories"]
        .as_array()
        .unwrap_or_else(|| panic!("not a page: {page}"))
        .iter()
        .map(|memory| memory["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_page_loads_without_a_key_and_keeps_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let client = reqwest::Client::new();
    for (path, kind) in [
        ("/", "text/html"),
        ("/inspector/inspector.js", "text/javascript"),
        ("/inspector/inspector.css", "text/css"),
    ] {
        let response = client
            .get(format!("{}{path}", served.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers().clone();
        let content_type = headers["content-type"].to_str().unwrap();
        assert!(content_type.starts_with(kind), "{path}: {content_type}");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(
            policy.contains("default-src 'none'") && policy.contains("script-src 'self'"),
            "{path}: {policy}"
        );
        let body = response.text().await.unwrap();
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} loads nothing from elsewhere"
        );
    }
    // The API behind it still needs a key.
    let (status, _) = served
        .call(None, None, Method::GET, "/v1/memories", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_provenance_and_entities_show_one_user_only() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let bob = create_key(dir.path(), &["--user", "bob"]);
    let admin = served.admin_key.clone();
    let call = |key: &str, method: Method, path: &str, body: Option<Value>| {
        let key = key.to_owned();
        let path = path.to_owned();
        let served = &served;
        async move { served.call(Some(&key), None, method, &path, body).await }
    };

    let (status, stored) = call(
        &ana,
        Method::POST,
        "/v1/events",
        Some(json!({"events": [
            turn("a1", 3, "I met Priya at the Lisbon office."),
            turn("a2", 10, "Priya wants to climb in Sintra."),
            turn("a3", 17, "The weather was grey all week."),
        ]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    let (status, _) = call(
        &bob,
        Method::POST,
        "/v1/events",
        Some(json!({"events": [turn("b1", 10, "Priya is my dentist in Lisbon.")]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // Time filters: `since` inclusive, `until` exclusive, by when it was said.
    let (status, page) = call(
        &ana,
        Method::GET,
        "/v1/memories?since=2026-11-05T00:00:00Z&until=2026-11-17T10:00:00Z",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(contents(&page), vec!["Priya wants to climb in Sintra."]);
    let (status, refused) = call(
        &ana,
        Method::GET,
        "/v1/memories?since=2026-11-17T00:00:00Z&until=2026-11-05T00:00:00Z",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`since`"),
        "{refused}"
    );

    // Entities: Ana's, most mentioned first; the listing filter by one of them.
    let (status, entities) = call(&ana, Method::GET, "/v1/entities", None).await;
    assert_eq!(status, StatusCode::OK, "{entities}");
    let priya = entities["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entity| entity["name"] == "Priya")
        .unwrap_or_else(|| panic!("no Priya among {entities}"))
        .clone();
    assert_eq!(priya["memories"], 2, "{priya}");
    let priya_id = priya["id"].as_str().unwrap();
    let (_, about) = call(
        &ana,
        Method::GET,
        &format!("/v1/memories?entity_id={priya_id}"),
        None,
    )
    .await;
    let mut about = contents(&about);
    about.sort();
    assert_eq!(
        about,
        vec![
            "I met Priya at the Lisbon office.",
            "Priya wants to climb in Sintra."
        ]
    );
    // Bob's Priya is another entity: his key lists none of Ana's memories through hers.
    let (_, bob_entities) = call(&bob, Method::GET, "/v1/entities", None).await;
    assert!(
        !bob_entities.to_string().contains(priya_id),
        "{bob_entities}"
    );
    let (status, nothing) = call(
        &bob,
        Method::GET,
        &format!("/v1/memories?entity_id={priya_id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(contents(&nothing).is_empty(), "{nothing}");

    // Provenance: a told fact, corrected twice; each version knows the chain both ways.
    let (_, told) = call(
        &ana,
        Method::POST,
        "/v1/memories",
        Some(json!({"content": "Ana's climbing grade is 5c"})),
    )
    .await;
    let first = told["id"].as_str().unwrap().to_owned();
    let (_, corrected) = call(
        &ana,
        Method::POST,
        &format!("/v1/memories/{first}/correct"),
        Some(json!({"content": "Ana's climbing grade is 6a"})),
    )
    .await;
    let second = corrected["replaced_by"].as_str().unwrap().to_owned();
    let (_, corrected) = call(
        &ana,
        Method::POST,
        &format!("/v1/memories/{second}/correct"),
        Some(json!({"content": "Ana's climbing grade is 6b"})),
    )
    .await;
    let third = corrected["replaced_by"].as_str().unwrap().to_owned();

    let (status, origin) = call(
        &ana,
        Method::GET,
        &format!("/v1/memories/{first}/provenance"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{origin}");
    assert_eq!(origin["made_by"]["how"], "remembered", "{origin}");
    assert_eq!(origin["replaced"], json!([]));
    let newer: Vec<&str> = origin["replaced_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["id"].as_str().unwrap())
        .collect();
    assert_eq!(newer, vec![second.as_str(), third.as_str()]);

    let (_, latest) = call(
        &ana,
        Method::GET,
        &format!("/v1/memories/{third}/provenance"),
        None,
    )
    .await;
    assert_eq!(latest["made_by"]["how"], "correction", "{latest}");
    assert_eq!(latest["made_by"]["job_run"], Value::Null);
    let older: Vec<&str> = latest["replaced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["id"].as_str().unwrap())
        .collect();
    assert_eq!(older, vec![second.as_str(), first.as_str()], "newest first");
    assert_eq!(latest["replaced_by"], json!([]));
    assert_eq!(
        latest["sources"][0]["id"],
        second.as_str(),
        "it corrects the second"
    );

    // Another user's key learns nothing of it.
    let (status, hidden) = call(
        &bob,
        Method::GET,
        &format!("/v1/memories/{third}/provenance"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{hidden}");

    // The admin's views: every user, and the job history; user keys may not.
    for key in [&ana, &bob] {
        for path in ["/v1/users", "/v1/jobs/runs"] {
            let (status, _) = call(key, Method::GET, path, None).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        }
    }
    let (status, users) = call(&admin, Method::GET, "/v1/users", None).await;
    assert_eq!(status, StatusCode::OK, "{users}");
    assert_eq!(
        users["users"],
        json!([{"user_id": "ana", "memories": 6}, {"user_id": "bob", "memories": 1}])
    );
    let (status, none_yet) = call(&admin, Method::GET, "/v1/jobs/runs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(none_yet["runs"], json!([]));
    let (status, _) = call(&admin, Method::POST, "/v1/jobs/expire_memories/run", None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, runs) = call(&admin, Method::GET, "/v1/jobs/runs", None).await;
    assert_eq!(runs["runs"][0]["name"], "expire_memories", "{runs}");
    assert_eq!(runs["runs"][0]["ok"], true, "{runs}");
    let started: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(runs["runs"][0]["at"].clone()).unwrap();
    let finished: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(runs["runs"][0]["finished_at"].clone()).unwrap();
    assert!(started <= finished, "{runs}");

    // The store keeps the history: a restarted server still shows the run.
    assert!(served.stop(), "mnemo serve did not stop cleanly");
    let served = Served::start(dir.path(), CONFIG, &[]);
    let (status, kept) = served
        .call(
            Some(&served.admin_key),
            None,
            Method::GET,
            "/v1/jobs/runs?limit=5",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!(kept["runs"][0]["name"], "expire_memories", "{kept}");
    assert_eq!(kept["runs"][0]["at"], runs["runs"][0]["at"], "{kept}");
}
