//! Who may do what over HTTP: API keys made, listed and revoked by admin keys (and an old
//! `keys.json` imported once), and chats that a user reads only as a member.

use reqwest::{Method, StatusCode};
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

/// A key of the form `mnemo keys` made before keys moved into the store, and its record as
/// `keys.json` held it.
fn old_key_file_entry(id: &str, user: &str, revoked: bool) -> (String, Value) {
    use sha2::Digest as _;
    let key = format!("mnemo_{id}_{}", "5e".repeat(32));
    let hash: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let record = json!({
        "id": id, "hash": hash, "user_id": user, "admin": false, "chats": [],
        "label": null, "created_at": "2026-11-01T00:00:00Z",
        "revoked_at": if revoked { json!("2026-11-02T00:00:00Z") } else { Value::Null },
    });
    (key, record)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directorys_key_file_is_imported_once_then_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (live, live_record) = old_key_file_entry("k00000000aaaa", "ana", false);
    let (revoked, revoked_record) = old_key_file_entry("k00000000bbbb", "bob", true);
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    std::fs::write(
        dir.path().join("data/keys.json"),
        json!({"version": 1, "keys": [live_record, revoked_record]}).to_string(),
    )
    .unwrap();
    // `Served::start` makes its admin key with `mnemo keys create`, which imports the file.
    let served = Served::start(dir.path(), CONFIG, &[]);
    let (status, body) = call(&served, Some(&live), Method::GET, "/v1/stats", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["user_id"], "ana");
    let (status, _) = call(&served, Some(&revoked), Method::GET, "/v1/stats", None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a key revoked in the file stays revoked"
    );

    // Revoked in the store, the key stays revoked across restarts: the file is not read again.
    let admin = Some(served.admin_key.clone());
    let (status, body) = call(
        &served,
        admin.as_deref(),
        Method::DELETE,
        "/v1/keys/k00000000aaaa",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["revoked_at"].is_string(), "{body}");
    assert!(served.stop());
    let listed = common::mnemo_in(dir.path())
        .args(["keys", "list", "--json"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(
        stderr.contains("this key file is ignored"),
        "the warning says the file is ignored: {stderr}"
    );
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|key| key["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"k00000000aaaa") && ids.contains(&"k00000000bbbb"),
        "{listed}"
    );
    let served = Served::start(dir.path(), CONFIG, &[]);
    let (status, _) = call(&served, Some(&live), Method::GET, "/v1/stats", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_made_listed_and_revoked_over_http_by_admin_keys_only() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let admin = Some(served.admin_key.clone());
    let (status, made) = call(
        &served,
        admin.as_deref(),
        Method::POST,
        "/v1/keys",
        Some(json!({"user_id": "ana", "chats": ["team"], "label": "ana's phone"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let key = made["key"].as_str().unwrap().to_owned();
    assert_eq!(made["chats"], json!(["team"]));
    assert!(made.get("hash").is_none(), "{made}");
    let (status, _) = call(
        &served,
        Some(&key),
        Method::POST,
        "/v1/search",
        Some(json!({"query": "x", "chat_id": "team"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // A user key may not make, list or revoke keys; bad requests change nothing.
    let id = made["id"].as_str().unwrap().to_owned();
    for (method, path, body) in [
        (
            Method::POST,
            "/v1/keys".to_owned(),
            Some(json!({"admin": true})),
        ),
        (Method::GET, "/v1/keys".to_owned(), None),
        (Method::DELETE, format!("/v1/keys/{id}"), None),
    ] {
        let (status, body) = call(&served, Some(&key), method, &path, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
    }
    for (body, named) in [
        (json!({}), "--user"),
        (json!({"user_id": "ana", "admin": true}), "not both"),
        (json!({"admin": true, "chats": ["team"]}), "chats"),
        (json!({"user_id": "a\u{0}b"}), "user"),
        (json!({"user_id": "ana", "role": "x"}), "role"),
    ] {
        let (status, error) = call(
            &served,
            admin.as_deref(),
            Method::POST,
            "/v1/keys",
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(named),
            "{error}"
        );
    }
    let (status, error) = call(
        &served,
        admin.as_deref(),
        Method::DELETE,
        "/v1/keys/k0",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    let (_, listed) = call(&served, admin.as_deref(), Method::GET, "/v1/keys", None).await;
    let keys = listed["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "the admin key and ana's: {listed}");
    assert!(keys
        .iter()
        .all(|key| key["revoked_at"].is_null() && key.get("hash").is_none()));

    let (status, revoked) = call(
        &served,
        admin.as_deref(),
        Method::DELETE,
        &format!("/v1/keys/{id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    let (status, _) = call(&served, Some(&key), Method::GET, "/v1/stats", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Revoking again keeps the first time.
    let (_, again) = call(
        &served,
        admin.as_deref(),
        Method::DELETE,
        &format!("/v1/keys/{id}"),
        None,
    )
    .await;
    assert_eq!(again["revoked_at"], revoked["revoked_at"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_reads_a_chat_only_as_a_member_made_by_a_trusted_writer_or_an_admin() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let admin = served.admin_key.clone();
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let ben = create_key(dir.path(), &["--user", "ben"]);
    let search = |key: String| {
        let served = &served;
        async move {
            served
                .call(
                    Some(&key),
                    None,
                    Method::POST,
                    "/v1/search",
                    Some(json!({"query": "climbing wall", "chat_id": "club", "mode": "fts"})),
                )
                .await
        }
    };
    // Ana's own key cannot make her a member by writing there.
    let mut turn_in_club = turn("c1", "s1", "The climbing wall opens at nine");
    turn_in_club["chat_id"] = json!("club");
    let (status, error) = call(
        &served,
        Some(&ana),
        Method::POST,
        "/v1/events",
        Some(turn_in_club.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not a member of chat `club`"));
    assert_eq!(search(ana.clone()).await.0, StatusCode::FORBIDDEN);
    // Nor over MCP, which names the chat in a header.
    let mcp = reqwest::Client::new()
        .post(format!("{}/mcp", served.url))
        .bearer_auth(&ana)
        .header("x-mnemo-chat", "club")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), StatusCode::FORBIDDEN);

    // The host (here an admin key acting for her) records her turn there: she is a member.
    let (status, body) = served
        .call(
            Some(&admin),
            Some("ana"),
            Method::POST,
            "/v1/events",
            Some(turn_in_club),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let own_turn = body["results"][0]["memory_id"].as_str().unwrap().to_owned();
    let (status, found) = search(ana.clone()).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert!(found.to_string().contains("climbing wall opens"), "{found}");

    // Ben shares in the club only once an admin adds him; then Ana reads what he shared.
    let shared = json!({"content": "The climbing wall has a new overhang", "chat_id": "club", "shared": true});
    let (status, _) = call(
        &served,
        Some(&ben),
        Method::POST,
        "/v1/memories",
        Some(shared.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = call(
        &served,
        Some(&admin),
        Method::PUT,
        "/v1/chats/club/members/ben",
        None,
    )
    .await;
    assert_eq!(
        (status, &body["changed"]),
        (StatusCode::OK, &json!(true)),
        "{body}"
    );
    let (status, body) = call(
        &served,
        Some(&ben),
        Method::POST,
        "/v1/memories",
        Some(shared),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (_, found) = search(ana.clone()).await;
    assert!(found.to_string().contains("new overhang"), "{found}");

    // Removed, Ana no longer reads the club, her own turns there included, nor changes them.
    let (status, _) = call(
        &served,
        Some(&admin),
        Method::DELETE,
        "/v1/chats/club/members/ana",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, found) = search(ana.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{found}");
    assert!(!found.to_string().contains("overhang"));
    let (status, body) = call(
        &served,
        Some(&ana),
        Method::DELETE,
        &format!("/v1/memories/{own_turn}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}
