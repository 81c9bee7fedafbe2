//! Sessions linked to their messaging provider over `mnemo serve` (seed 000: "Link sessions to
//! provider/chat_id/user_id"): an event's `provider` is stored with the session its user's turn
//! opens, shown in the provenance of the session's memories, documented in the OpenAPI
//! document, exported with the session and imported back; a malformed provider is refused,
//! naming `provider`, and nothing of its request is stored.

use reqwest::{Client, Method, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

fn turn(id: &str, kind: &str, session: &str, minute: u32, provider: Option<&str>) -> Value {
    let mut event = json!({"id": id, "type": kind, "at": format!("2026-11-03T10:{minute:02}:00Z"),
        "session_id": session, "text": format!("Turn {id} about the Lisbon trip")});
    if let Some(provider) = provider {
        event["provider"] = json!(provider);
    }
    event
}

/// The provider a memory's provenance shows.
async fn provenance_provider(served: &Served, key: &str, memory_id: &str) -> Value {
    let (status, origin) = served
        .call(
            Some(key),
            None,
            Method::GET,
            &format!("/v1/memories/{memory_id}/provenance"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{origin}");
    origin["made_by"]["provider"].clone()
}

/// Posts events with `key`; the status and the memory ids of the results.
async fn post(served: &Served, key: &str, events: Vec<Value>) -> (StatusCode, Value, Vec<String>) {
    let (status, body) = served
        .call(
            Some(key),
            None,
            Method::POST,
            "/v1/events",
            Some(json!({ "events": events })),
        )
        .await;
    let ids = body["results"]
        .as_array()
        .map(|results| {
            results
                .iter()
                .filter_map(|result| result["memory_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (status, body, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_events_provider_is_its_sessions_and_shown_in_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);

    // The OpenAPI document describes the field.
    let (_, document) = served
        .call(None, None, Method::GET, "/openapi.json", None)
        .await;
    let field = &document["components"]["schemas"]["EventBody"]["properties"]["provider"];
    assert!(field.to_string().contains("messaging provider"), "{field}");

    let (status, body, ids) = post(
        &served,
        &ana,
        vec![
            turn("t1", "user_message", "s1", 0, Some("telegram")),
            turn("t2", "agent_response", "s1", 1, Some("telegram")),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let [said, answered] = [ids[0].clone(), ids[1].clone()];
    assert_eq!(provenance_provider(&served, &ana, &said).await, "telegram");
    assert_eq!(
        provenance_provider(&served, &ana, &answered).await,
        "telegram"
    );

    // A later turn naming another provider leaves the session's as it was.
    let (status, body, ids) = post(
        &served,
        &ana,
        vec![turn("t3", "user_message", "s1", 2, Some("slack"))],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        provenance_provider(&served, &ana, &ids[0]).await,
        "telegram"
    );

    // A session whose turns name none has none.
    let (status, body, ids) = post(
        &served,
        &ana,
        vec![turn("t4", "user_message", "s2", 3, None)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        provenance_provider(&served, &ana, &ids[0]).await,
        Value::Null
    );

    // A malformed provider is refused, naming it, and nothing of the batch is stored.
    let (_, before) = served
        .call(Some(&ana), None, Method::GET, "/v1/stats", None)
        .await;
    for bad in ["t".repeat(300), "tele\ngram".to_owned(), "   ".to_owned()] {
        let (status, refused, _) = post(
            &served,
            &ana,
            vec![
                turn("ok1", "user_message", "s3", 4, Some("telegram")),
                turn("bad1", "user_message", "s3", 5, Some(&bad)),
            ],
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("events[1].provider"), "{bad:?}: {message}");
    }
    let (_, after) = served
        .call(Some(&ana), None, Method::GET, "/v1/stats", None)
        .await;
    assert_eq!(after["episodes"], before["episodes"], "{after}");

    // The export carries the session's provider; imported into a fresh store, the memory's
    // provenance shows it there too.
    let (_, exported) = served
        .call(Some(&ana), None, Method::GET, "/v1/export", None)
        .await;
    let export = exported.as_str().unwrap().to_owned();
    let sessions: Vec<Value> = export
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["type"] == "sessions_consolidations")
        .map(|line| line["row"].clone())
        .collect();
    assert!(
        sessions
            .iter()
            .any(|row| row["session_id"] == "s1" && row["provider"] == "telegram"),
        "{sessions:?}"
    );
    let other = tempfile::tempdir().unwrap();
    let fresh = Served::start(other.path(), CONFIG, &[]);
    let response = Client::new()
        .post(format!("{}/v1/import", fresh.url))
        .bearer_auth(&fresh.admin_key)
        .header("content-type", "application/x-ndjson")
        .body(export)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let ana_there = create_key(other.path(), &["--user", "ana"]);
    assert_eq!(
        provenance_provider(&fresh, &ana_there, &said).await,
        "telegram"
    );
}
