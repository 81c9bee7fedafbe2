//! `mnemo serve` as an HTTP client meets it: a real server process on a loopback port, API keys
//! made with `mnemo keys create`, and plain HTTP requests.

use reqwest::{Client, Method, StatusCode};
use serde_json::{json, Value};

use crate::common;

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

/// A request with `key`, and its status and JSON body.
async fn call(
    served: &Served,
    key: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    served.call(key, None, method, path, body).await
}

fn turn(id: &str, session: &str, text: &str) -> Value {
    json!({"id": id, "type": "user_message", "at": "2026-11-20T10:00:00Z",
           "session_id": session, "text": text})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stores_searches_corrects_and_forgets_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let key = create_key(dir.path(), &["--user", "ana"]);
    let key = Some(key.as_str());

    // Events: acknowledged once stored, and idempotent by id.
    let batch = json!({"events": [
        turn("e1", "s1", "My sister Maria moved to Lisbon last spring."),
        turn("e2", "s1", "She teaches surfing there on weekends."),
    ]});
    let (status, stored) = call(
        &served,
        key,
        Method::POST,
        "/v1/events",
        Some(batch.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["results"][0]["stored"], true);
    assert!(stored["results"][0]["memory_id"]
        .as_str()
        .unwrap()
        .starts_with("ep_"));
    let (_, again) = call(&served, key, Method::POST, "/v1/events", Some(batch)).await;
    // A resend (its acknowledgement lost) stores nothing and names the memory it became.
    assert_eq!(again["results"][0]["stored"], false, "{again}");
    assert_eq!(again["results"][1]["stored"], false, "{again}");
    assert_eq!(
        again["results"][0]["memory_id"],
        stored["results"][0]["memory_id"]
    );
    assert_eq!(
        again["results"][1]["memory_id"],
        stored["results"][1]["memory_id"]
    );
    assert!(again["results"][1]["memory_id"].is_string(), "{again}");

    // Remember, then find it with the reasons it ranked.
    let (status, remembered) = call(
        &served,
        key,
        Method::POST,
        "/v1/memories",
        Some(json!({"content": "Ana is allergic to peanuts", "subjects": []})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{remembered}");
    let fact = remembered["id"].as_str().unwrap().to_owned();
    let (status, found) = call(
        &served,
        key,
        Method::POST,
        "/v1/search",
        Some(json!({"query": "peanuts allergy", "mode": "fts"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let hit = &found["hits"][0];
    assert_eq!(hit["memory"]["id"], fact.as_str());
    assert_eq!(hit["why"]["fusion"], "rrf", "a single mode ranks by RRF");
    assert_eq!(hit["why"]["lists"][0]["list"], "fts");
    assert_eq!(hit["why"]["lists"][0]["rank"], 1);
    assert!(
        hit["why"]["lists"][0]["score"].as_f64().unwrap() > 0.0,
        "{hit}"
    );
    // Hybrid search records the fusion the service used: the configured score fusion.
    let (status, found) = call(
        &served,
        key,
        Method::POST,
        "/v1/search",
        Some(json!({"query": "peanuts allergy"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["hits"][0]["why"]["fusion"], "scores", "{found}");

    // Correct: the old fact is replaced, the new one is found.
    let (status, corrected) = call(
        &served,
        key,
        Method::POST,
        &format!("/v1/memories/{fact}/correct"),
        Some(json!({"content": "Ana is allergic to hazelnuts, not peanuts"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{corrected}");
    let new_fact = corrected["replaced_by"].as_str().unwrap().to_owned();
    let (_, old) = call(
        &served,
        key,
        Method::GET,
        &format!("/v1/memories/{fact}"),
        None,
    )
    .await;
    assert_eq!(old["active"], false, "{old}");
    let (status, confirmed) = call(
        &served,
        key,
        Method::POST,
        &format!("/v1/memories/{new_fact}/confirm"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{confirmed}");

    // Pages: newest first, with the offset of the next page.
    let (_, page) = call(&served, key, Method::GET, "/v1/memories?limit=2", None).await;
    assert_eq!(page["memories"].as_array().unwrap().len(), 2, "{page}");
    assert_eq!(page["next_offset"], 2);
    let (_, rest) = call(
        &served,
        key,
        Method::GET,
        "/v1/memories?limit=2&offset=2",
        None,
    )
    .await;
    assert_eq!(rest["next_offset"], Value::Null, "{rest}");

    // The correction keeps the people the fact is about, and the old fact names its successor.
    let (_, about) = call(
        &served,
        key,
        Method::POST,
        "/v1/memories",
        Some(json!({"content": "My sister Maria works as a nurse", "subjects": ["Maria"]})),
    )
    .await;
    let about = about["id"].as_str().unwrap().to_owned();
    let (_, before) = call(
        &served,
        key,
        Method::GET,
        &format!("/v1/memories/{about}"),
        None,
    )
    .await;
    let (_, fixed) = call(
        &served,
        key,
        Method::POST,
        &format!("/v1/memories/{about}/correct"),
        Some(json!({"content": "My sister Maria works as a doctor"})),
    )
    .await;
    let successor = fixed["replaced_by"].as_str().unwrap();
    let (_, after) = call(
        &served,
        key,
        Method::GET,
        &format!("/v1/memories/{successor}"),
        None,
    )
    .await;
    assert_eq!(after["subject_ids"], before["subject_ids"], "{after}");
    assert_eq!(after["memory_type"], before["memory_type"]);
    let (_, retired) = call(
        &served,
        key,
        Method::GET,
        &format!("/v1/memories/{about}"),
        None,
    )
    .await;
    assert_eq!(retired["superseded_by_id"], successor, "{retired}");
    // Only facts are corrected or confirmed: a turn is refused with 400, not "not found".
    let turn_id = stored["results"][0]["memory_id"].as_str().unwrap();
    let (status, error) = call(
        &served,
        key,
        Method::POST,
        &format!("/v1/memories/{turn_id}/confirm"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only facts"),
        "{error}"
    );

    // Forget: gone, and a second forget is "not found".
    let path = format!("/v1/memories/{new_fact}");
    let (status, _) = call(&served, key, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, gone) = call(&served, key, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(gone["error"]["code"], "not_found");
    let (status, _) = call(&served, key, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The context for a prompt, and the people memory knows.
    let (_, people) = call(&served, key, Method::GET, "/v1/people", None).await;
    assert_eq!(people["people"][0]["name"], "Maria", "{people}");
    assert_eq!(people["people"][0]["relation"], "sister");
    let (_, context) = call(
        &served,
        key,
        Method::POST,
        "/v1/context",
        Some(json!({"query": "What does my sister do?"})),
    )
    .await;
    assert!(
        context["text"].as_str().unwrap().contains("Maria"),
        "{context}"
    );
    assert!(served.stop(), "SIGTERM ends the server cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_decide_who_may_do_what() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let bob = create_key(dir.path(), &["--user", "bob"]);
    let team = create_key(dir.path(), &["--user", "cy", "--chat", "team"]);
    let admin = served.admin_key.clone();

    // No key, a wrong key, a malformed header: 401 with a code and the Bearer challenge.
    for key in [None, Some("mnemo_kxxxx_nonsense")] {
        let (status, body) = call(&served, key, Method::GET, "/v1/stats", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    // The probes and the document need no key.
    let (status, _) = call(&served, None, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&served, None, Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, document) = call(&served, None, Method::GET, "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(document["paths"]["/v1/search"]["post"].is_object());

    // A user key acts for its own user only; an event of another user is refused whole.
    let (status, body) = served
        .call(Some(&bob), Some("ana"), Method::GET, "/v1/stats", None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let mut theirs = turn("x1", "s", "Ana's secret");
    theirs["user_id"] = json!("ana");
    let batch = json!({"events": [turn("b1", "s", "Bob's note"), theirs]});
    let (status, body) = call(&served, Some(&bob), Method::POST, "/v1/events", Some(batch)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("events[1]"),
        "{body}"
    );
    let (_, stats) = call(&served, Some(&bob), Method::GET, "/v1/stats", None).await;
    assert_eq!(
        stats["episodes"], 0,
        "nothing of a refused batch is stored: {stats}"
    );

    // Ana's memory is not Bob's: his search does not find it, and its id is "not found".
    let (_, made) = call(
        &served,
        Some(&ana),
        Method::POST,
        "/v1/memories",
        Some(json!({"content": "Ana's door code is 4711"})),
    )
    .await;
    let id = made["id"].as_str().unwrap();
    let (_, found) = call(
        &served,
        Some(&bob),
        Method::POST,
        "/v1/search",
        Some(json!({"query": "door code"})),
    )
    .await;
    assert_eq!(found["hits"], json!([]), "{found}");
    for method in [Method::GET, Method::DELETE] {
        let (status, _) = call(
            &served,
            Some(&bob),
            method,
            &format!("/v1/memories/{id}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (status, _) = call(&served, Some(&bob), Method::DELETE, "/v1/users/ana", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // An admin key acts for the user it names, and only it runs jobs.
    let (_, stats) = served
        .call(Some(&admin), Some("ana"), Method::GET, "/v1/stats", None)
        .await;
    assert_eq!(stats["facts"], 1, "{stats}");
    let (status, body) = call(&served, Some(&admin), Method::GET, "/v1/memories", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "user_required");
    let (status, _) = call(&served, Some(&ana), Method::GET, "/v1/jobs", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, run) = call(
        &served,
        Some(&admin),
        Method::POST,
        "/v1/jobs/expire_memories/run",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["ok"], true);

    // A key bound to a chat acts there only.
    let (status, _) = call(
        &served,
        Some(&team),
        Method::POST,
        "/v1/search",
        Some(json!({"query": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = call(
        &served,
        Some(&team),
        Method::POST,
        "/v1/search",
        Some(json!({"query": "x", "chat_id": "team"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // The scheme is case-insensitive.
    let response = Client::new()
        .get(format!("{}/v1/stats", served.url))
        .header("authorization", format!("bearer {ana}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    // Revoked while the server runs: refused from the next request on.
    let listed = common::mnemo_in(dir.path())
        .args(["keys", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let bob_id = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["user_id"] == "bob")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let revoked = common::mnemo_in(dir.path())
        .args(["keys", "revoke", &bob_id])
        .output()
        .unwrap();
    assert!(revoked.status.success());
    let (status, _) = call(&served, Some(&bob), Method::GET, "/v1/stats", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Erasure by the user's own key.
    let (status, erased) = call(&served, Some(&ana), Method::DELETE, "/v1/users/ana", None).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["memories_removed"], 1);
    // Erasing a user revokes the user's keys.
    let (status, _) = call(&served, Some(&ana), Method::GET, "/v1/stats", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_that_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &["--max-body-bytes", "4096"]);
    let secret = create_key(dir.path(), &["--user", "ana"]);
    let key = Some(secret.as_str());
    let cases = [
        (json!({"query": 1}), "invalid_request", "query"),
        (
            json!({"query": "x", "limit": 0}),
            "invalid_request",
            "limit",
        ),
        (
            json!({"query": "x", "limit": 51}),
            "invalid_request",
            "limit",
        ),
        (
            json!({"query": "x", "mode": "magic"}),
            "invalid_request",
            "mode",
        ),
        (
            json!({"query": "x", "colour": "red"}),
            "invalid_request",
            "colour",
        ),
        (
            json!({"query": "x", "since": "yesterday"}),
            "invalid_request",
            "since",
        ),
        (
            json!({"query": "x", "chat_id": " "}),
            "invalid_request",
            "chat_id",
        ),
    ];
    for (body, code, named) in cases {
        let (status, error) =
            call(&served, key, Method::POST, "/v1/search", Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert_eq!(error["error"]["code"], code, "{body}: {error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(named),
            "{body}: the message names `{named}`: {message}"
        );
    }
    let response = Client::new()
        .post(format!("{}/v1/search", served.url))
        .bearer_auth(&secret)
        .header("content-type", "application/json")
        .body("{\"query\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "invalid_json");
    let response = Client::new()
        .post(format!("{}/v1/memories", served.url))
        .bearer_auth(&secret)
        .json(&json!({"content": "x".repeat(5000)}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "payload_too_large", "{error}");
    let (status, error) = call(&served, key, Method::GET, "/v1/nothing", None).await;
    assert_eq!(
        (status, &error["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("not_found"))
    );
    let (status, error) = call(&served, key, Method::PUT, "/v1/search", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{error}");
    // A batch names the event and the field that is wrong, and stores nothing of itself.
    let good = turn("g1", "s", "A fine turn");
    let mut bad_time = turn("g2", "s", "Another");
    bad_time["at"] = json!("yesterday");
    let mut blank = turn("g3", "s", "x");
    blank["text"] = json!("  ");
    for (bad, named) in [(bad_time, "events[1].at"), (blank, "events[1]: `text`")] {
        let batch = json!({"events": [good.clone(), bad]});
        let (status, error) = call(&served, key, Method::POST, "/v1/events", Some(batch)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "names {named}: {message}");
    }
    let (status, error) = call(
        &served,
        key,
        Method::POST,
        "/v1/events",
        Some(json!({"id": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing field"),
        "{error}"
    );
    // None of it stored anything.
    let (_, stats) = call(&served, key, Method::GET, "/v1/stats", None).await;
    assert_eq!(
        (stats["episodes"].clone(), stats["facts"].clone()),
        (json!(0), json!(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_takes_turns_for_the_key_and_an_export_back_with_an_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let import = |key: String, body: String| {
        let url = format!("{}/v1/import", served.url);
        async move {
            let response = Client::new()
                .post(url)
                .bearer_auth(key)
                .header("content-type", "application/x-ndjson")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    // Turns without a user are the key's; one naming another user is refused, with nothing
    // of the file stored.
    let own = "{\"type\":\"user_message\",\"at\":\"2026-11-20T10:00:00Z\",\"session_id\":\"s\",\"text\":\"Ana grows tomatoes\"}";
    let foreign = "{\"type\":\"user_message\",\"at\":\"2026-11-20T10:00:00Z\",\"session_id\":\"s\",\"user_id\":\"ben\",\"text\":\"Ben's line\"}";
    let (status, refused) = import(ana.clone(), format!("{own}\n{foreign}\n")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 2"),
        "{refused}"
    );
    let (status, report) = import(ana.clone(), format!("{own}\n")).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["events"], 1);
    let (_, again) = import(ana.clone(), format!("{own}\n")).await;
    assert_eq!(
        again["events_present"], 1,
        "an event without an id is stored once: {again}"
    );

    // Rows of an export need an admin key; into a fresh server they restore the turn.
    let (_, exported) = served
        .call(Some(&ana), None, Method::GET, "/v1/export", None)
        .await;
    let export = exported.as_str().unwrap().to_owned();
    let (status, _) = import(ana.clone(), export.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let other = tempfile::tempdir().unwrap();
    let fresh = Served::start(other.path(), CONFIG, &[]);
    let response = Client::new()
        .post(format!("{}/v1/import", fresh.url))
        .bearer_auth(&fresh.admin_key)
        .body(export)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (_, stats) = fresh
        .call(
            Some(&fresh.admin_key),
            Some("ana"),
            Method::GET,
            "/v1/stats",
            None,
        )
        .await;
    assert_eq!(stats["episodes"], 1, "{stats}");
}
