//! Identity anchoring over `mnemo serve` (seed 000: "Add identity anchoring via
//! external_id/external_provider on Person (for stable IDs across username changes)"): a
//! memory's subject carries a person's external id; a later subject with that id is the same
//! person whatever the name (the new name an alias); `GET /v1/people` shows the id and finds the
//! person by it; the same id under another user is another person; a conflicting or malformed
//! id is refused, naming the problem, and nothing is stored. The OpenAPI document describes it.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

/// A request with `key`: its status and body.
async fn call(
    served: &Served,
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    served.call(Some(key), None, method, path, body).await
}

/// Remembers `content` about `subjects` with `key`.
async fn remember(
    served: &Served,
    key: &str,
    content: &str,
    subjects: Value,
) -> (StatusCode, Value) {
    call(
        served,
        key,
        Method::POST,
        "/v1/memories",
        Some(json!({"content": content, "subjects": subjects})),
    )
    .await
}

/// The people of `key`'s user, as `GET /v1/people` + `query` lists them.
async fn people(served: &Served, key: &str, query: &str) -> Vec<Value> {
    let (status, body) = call(
        served,
        key,
        Method::GET,
        &format!("/v1/people{query}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["people"].as_array().cloned().unwrap_or_default()
}

/// The contents and subject ids of `key`'s user's memories, newest first.
async fn memories(served: &Served, key: &str) -> Vec<(String, Value)> {
    let (status, body) = call(served, key, Method::GET, "/v1/memories", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["memories"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|memory| {
            (
                memory["content"].as_str().unwrap_or_default().to_owned(),
                memory["subject_ids"].clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_external_id_anchors_them_whatever_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let ben = create_key(dir.path(), &["--user", "ben"]);

    // The OpenAPI document describes the subject with an external id, the id on a person, and
    // the look-up.
    let (_, document) = served
        .call(None, None, Method::GET, "/openapi.json", None)
        .await;
    let schemas = &document["components"]["schemas"];
    let anchored = &schemas["AnchoredSubject"]["properties"];
    assert!(
        anchored["external_id"].is_object() && anchored["provider"].is_object(),
        "{anchored}"
    );
    assert_eq!(
        schemas["RememberBody"]["properties"]["subjects"]["items"]["$ref"],
        "#/components/schemas/SubjectBody"
    );
    let subject = schemas["SubjectBody"].to_string();
    assert!(
        subject.contains("#/components/schemas/AnchoredSubject")
            && subject.contains("#/components/schemas/NameText"),
        "{subject}"
    );
    assert!(schemas["PersonView"]["properties"]["external_id"].is_object());
    let parameters = document["paths"]["/v1/people"]["get"]["parameters"].to_string();
    assert!(
        parameters.contains("\"external_id\"") && parameters.contains("\"provider\""),
        "{parameters}"
    );

    let sarah_subject = json!([{"name": "Sarah", "external_id": "12345", "provider": "telegram"}]);
    let (status, body) = remember(&served, &ana, "Sarah likes Italian food", sarah_subject).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["subjects"], json!(["Sarah"]));
    let listed = people(&served, &ana, "").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (
            &listed[0]["name"],
            &listed[0]["external_id"],
            &listed[0]["provider"]
        ),
        (&json!("Sarah"), &json!("12345"), &json!("telegram"))
    );
    let sarah_id = listed[0]["id"].clone();

    // Renamed on Telegram (and the provider spelt otherwise): the same person.
    let sally = json!([{"name": "Sally", "external_id": "12345", "provider": "Telegram"}]);
    let (status, body) = remember(
        &served,
        &ana,
        "Sally started learning the cello",
        sally.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["subjects"], json!(["Sarah"]));
    let found = people(&served, &ana, "?provider=telegram&external_id=12345").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["id"], sarah_id);
    assert_eq!(found[0]["name"], "Sarah");
    assert_eq!(found[0]["aliases"], json!(["Sally"]));
    for (content, subjects) in memories(&served, &ana).await {
        assert_eq!(subjects, json!([sarah_id.clone()]), "{content}");
    }
    assert!(people(&served, &ana, "?provider=telegram&external_id=4242")
        .await
        .is_empty());

    // Another user: the same id is another person, and neither sees the other's.
    let (status, body) = remember(&served, &ben, "Sally plays padel", sally).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["subjects"], json!(["Sally"]));
    let bens = people(&served, &ben, "?provider=telegram&external_id=12345").await;
    assert_eq!(bens.len(), 1, "{bens:?}");
    assert_ne!(bens[0]["id"], sarah_id);
    assert_eq!(bens[0]["name"], "Sally");
    let anas = people(&served, &ana, "?provider=telegram&external_id=12345").await;
    assert_eq!(anas[0]["id"], sarah_id);

    // Refused, naming the problem, with nothing stored: another id for Sarah (even after a
    // good subject in the same request), an unknown id without a name, a malformed id or
    // subject.
    let before_people = people(&served, &ana, "").await;
    let refusals = [
        (
            json!([
                {"name": "Tom", "external_id": "777", "provider": "telegram"},
                {"name": "Sarah", "external_id": "999", "provider": "telegram"}
            ]),
            "carries telegram id `12345`",
        ),
        (
            json!([{"external_id": "555", "provider": "telegram"}]),
            "give the subject a `name`",
        ),
        (
            json!([{"name": "Tom", "external_id": " ", "provider": "telegram"}]),
            "blank",
        ),
        (
            json!([{"name": "Tom", "external_id": "1", "provider": "telegram", "role": "x"}]),
            "role",
        ),
        (json!([42]), "a subject is a name or an object"),
    ];
    for (subjects, says) in refusals {
        let (status, body) = remember(&served, &ana, "Tom fixed the sink", subjects.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{subjects}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{subjects}: {body}");
    }
    assert_eq!(people(&served, &ana, "").await, before_people);
    let contents: Vec<String> = memories(&served, &ana)
        .await
        .into_iter()
        .map(|(content, _)| content)
        .collect();
    assert_eq!(
        contents,
        [
            "Sally started learning the cello",
            "Sarah likes Italian food"
        ]
    );
    // Either half of an id filters by it.
    for query in ["?provider=TELEGRAM", "?external_id=12345"] {
        let found = people(&served, &ana, query).await;
        assert_eq!(found.len(), 1, "{query}: {found:?}");
        assert_eq!(found[0]["id"], sarah_id, "{query}");
    }
    assert!(people(&served, &ana, "?provider=slack").await.is_empty());
    assert!(served.stop());
}
