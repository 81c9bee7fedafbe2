//! "As of" over HTTP (issue #47, item 4): a birthday told and corrected later is found as the
//! user believed it before the correction, as it was true all along, and as it is now, by
//! `/v1/search` and `/v1/context`; a bad `as_of_axis` is refused by name.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

/// The contents of the hits of a `/v1/search` reply.
fn contents(found: &Value) -> Vec<String> {
    found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["memory"]["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrected_birthday_is_found_as_believed_then_as_true_then_and_as_now() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let call = |method: Method, path: &str, body: Value| {
        let (served, ana, path) = (&served, ana.clone(), path.to_owned());
        async move {
            served
                .call(Some(&ana), None, method, &path, Some(body))
                .await
        }
    };
    let (status, told) = call(
        Method::POST,
        "/v1/memories",
        json!({"content": "Ana's birthday is on May 3"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{told}");
    let id = told["id"].as_str().unwrap().to_owned();
    // Timestamps are whole seconds: the question's time lies two seconds on each side.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let between = chrono::Utc::now().to_rfc3339();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let (status, corrected) = call(
        Method::POST,
        &format!("/v1/memories/{id}/correct"),
        json!({"content": "Ana's birthday is on May 5"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{corrected}");

    let search = |extra: Value| {
        let mut body = json!({"query": "birthday", "limit": 10});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        call(Method::POST, "/v1/search", body)
    };
    for (extra, expected) in [
        (json!({}), "Ana's birthday is on May 5"),
        (json!({"as_of": between}), "Ana's birthday is on May 3"),
        (
            json!({"as_of": between, "as_of_axis": "believed"}),
            "Ana's birthday is on May 3",
        ),
        (
            json!({"as_of": between, "as_of_axis": "true"}),
            "Ana's birthday is on May 5",
        ),
    ] {
        let (status, found) = search(extra.clone()).await;
        assert_eq!(status, StatusCode::OK, "{found}");
        assert_eq!(contents(&found), vec![expected.to_owned()], "{extra}");
    }
    // The corrected fact was never true: its validity closed where it opened.
    let (_, found) = search(json!({"as_of": between, "include_superseded": true})).await;
    let old = &found["hits"][0]["memory"];
    assert_eq!(old["valid_to"], old["valid_from"], "{found}");
    // Before anything was told, nothing was believed.
    let (_, found) = search(json!({"as_of": "2020-01-01T00:00:00Z"})).await;
    assert_eq!(contents(&found), Vec::<String>::new());

    let (status, context) = call(
        Method::POST,
        "/v1/context",
        json!({"query": "When is my birthday?", "as_of": between}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    let text = context["text"].as_str().unwrap();
    assert!(text.contains("May 3") && !text.contains("May 5"), "{text}");

    let (status, refused) = search(json!({"as_of_axis": "true"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.to_string().contains("as_of_axis"), "{refused}");
    let (status, refused) = search(json!({"as_of": between, "as_of_axis": "then"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
}
