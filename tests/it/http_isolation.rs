//! Isolation over HTTP: several users, each with their own API key (and keys bound to one chat),
//! write personal, chat and shared memories; then every read path of the API is asked, with
//! every key, in every chat, and for every memory id: nothing comes back that the key's user may
//! not see, and nothing another user owns can be changed. A key bound to a chat sees what the
//! user's agent sees there (their personal memory included), and changes only what is kept there. The property of `tests/it/isolation.rs`,
//! held at the HTTP boundary, where the user comes from the key alone.

use std::collections::HashMap;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ncontext_limit = 50\ncontext_messages = 0\ncontext_token_budget = 100000\n";
const USERS: [&str; 3] = ["ana", "ben", "cleo"];
const CHATS: [Option<&str>; 3] = [None, Some("family"), Some("work")];

/// Who may see a memory.
#[derive(Debug, Clone)]
struct Owner {
    user: &'static str,
    chat: Option<&'static str>,
    shared: bool,
}

/// What search and the context may show `user` in `chat`: their personal memories, their own
/// of that chat, and that chat's shared ones.
fn visible(owner: &Owner, user: &str, chat: Option<&str>) -> bool {
    (owner.user == user && (owner.chat.is_none() || owner.chat == chat))
        || (owner.shared && owner.chat.is_some() && owner.chat == chat)
}

struct Random(u64);
impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The memory tokens (`tok12`) in a JSON value's text.
fn tokens(value: &Value) -> Vec<String> {
    value
        .to_string()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| {
            word.len() > 3
                && word.starts_with("tok")
                && word[3..].chars().all(|c| c.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect()
}

/// The server, asked with one key at a time.
struct Api<'a>(&'a Served);

impl Api<'_> {
    async fn call(
        &self,
        key: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.0.call(Some(key), None, method, path, body).await
    }
}

/// Whether `user` is a member of `chat` once the writes are done: cleo is removed from `work`,
/// and must then read nothing there, not even her own.
fn member(user: &str, chat: Option<&str>) -> bool {
    !(user == "cleo" && chat == Some("work"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_reads_or_changes_what_its_user_may_not_see() {
    no_key_reads_or_changes_what_its_user_may_not_see_in(CONFIG).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg(feature = "postgres")]
async fn no_key_reads_or_changes_what_its_user_may_not_see_on_postgres() {
    let url = mnemo_pg_fixture::fresh_database();
    no_key_reads_or_changes_what_its_user_may_not_see_in(&format!(
        "{CONFIG}database_url = \"{url}\"\n"
    ))
    .await;
}

async fn no_key_reads_or_changes_what_its_user_may_not_see_in(config: &str) {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), config, &[]);
    let api = Api(&served);
    let keys: HashMap<&str, String> = USERS
        .iter()
        .map(|user| (*user, create_key(dir.path(), &["--user", user])))
        .collect();
    // An admin makes everyone a member of both chats; a user's own key could not.
    for user in USERS {
        for chat in ["family", "work"] {
            let path = format!("/v1/chats/{chat}/members/{user}");
            let (status, _) = api.call(&keys[user], Method::PUT, &path, None).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{user} added themselves to {chat}"
            );
            let (status, body) = api.call(&served.admin_key, Method::PUT, &path, None).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    }
    // Keys bound to one chat each, for every user.
    let mut bound: Vec<(&str, &str, String)> = Vec::new();
    for user in USERS {
        for chat in ["family", "work"] {
            bound.push((
                user,
                chat,
                create_key(dir.path(), &["--user", user, "--chat", chat]),
            ));
        }
    }

    // Writes: turns and remembered facts, personal or in a chat, some shared.
    let mut random = Random(0x5eed_1234_abcd);
    let mut owners: HashMap<String, Owner> = HashMap::new();
    let mut ids: HashMap<String, String> = HashMap::new();
    for n in 0..60 {
        let user = USERS[random.below(3)];
        let chat = CHATS[random.below(3)];
        let token = format!("tok{n}");
        let text = format!("Note {token} about the garden and the quarterly report");
        let (status, body, shared) = if n % 2 == 0 {
            let mut event = json!({"id": format!("ev{n}"), "type": "user_message",
                "at": "2026-03-01T09:00:00Z", "session_id": format!("s{}", n % 4), "text": text});
            if let Some(chat) = chat {
                event["chat_id"] = json!(chat);
            }
            let (status, body) = api
                .call(&keys[user], Method::POST, "/v1/events", Some(event))
                .await;
            (status, body["results"][0]["memory_id"].clone(), false)
        } else {
            let shared = chat.is_some() && random.below(2) == 0;
            let mut fact = json!({"content": text, "shared": shared});
            if let Some(chat) = chat {
                fact["chat_id"] = json!(chat);
            }
            let (status, body) = api
                .call(&keys[user], Method::POST, "/v1/memories", Some(fact))
                .await;
            (status, body["id"].clone(), shared)
        };
        assert!(status.is_success(), "write {n}: {status} {body}");
        ids.insert(token.clone(), body.as_str().unwrap().to_owned());
        owners.insert(token, Owner { user, chat, shared });
    }

    // Cleo leaves `work`: from now on she names it in vain, her own memories there included.
    let (status, body) = api
        .call(
            &served.admin_key,
            Method::DELETE,
            "/v1/chats/work/members/cleo",
            None,
        )
        .await;
    assert_eq!(
        (status, &body["changed"]),
        (StatusCode::OK, &json!(true)),
        "{body}"
    );

    let check = |what: &str, found: &Value, allowed: &dyn Fn(&Owner) -> bool| {
        for token in tokens(found) {
            let owner = &owners[&token];
            assert!(allowed(owner), "{what} returned {token} of {owner:?}");
        }
    };
    let mut reads = 0;
    for user in USERS {
        let key = &keys[user];
        for chat in CHATS.into_iter().filter(|chat| !member(user, *chat)) {
            // A chat the user is not in: every read that names it is refused.
            let chat = chat.unwrap_or_default();
            let body = json!({"query": "garden quarterly report note", "chat_id": chat});
            for (method, path, body) in [
                (Method::POST, "/v1/search".to_owned(), Some(body.clone())),
                (Method::POST, "/v1/context".to_owned(), Some(body)),
                (Method::GET, format!("/v1/memories?chat_id={chat}"), None),
            ] {
                let (status, found) = api.call(key, method, &path, body).await;
                assert_eq!(
                    status,
                    StatusCode::FORBIDDEN,
                    "{user} {path} in {chat}: {found}"
                );
                assert!(tokens(&found).is_empty());
                reads += 1;
            }
        }
        for chat in CHATS.into_iter().filter(|chat| member(user, *chat)) {
            let mut search = json!({"query": "garden quarterly report note", "limit": 50});
            if let Some(chat) = chat {
                search["chat_id"] = json!(chat);
            }
            for mode in ["hybrid", "fts", "entity"] {
                search["mode"] = json!(mode);
                let (_, found) = api
                    .call(key, Method::POST, "/v1/search", Some(search.clone()))
                    .await;
                check(&format!("{user} search {mode} in {chat:?}"), &found, &|o| {
                    visible(o, user, chat)
                });
                reads += 1;
            }
            let mut context = json!({"query": "garden report"});
            if let Some(chat) = chat {
                context["chat_id"] = json!(chat);
            }
            let (_, found) = api
                .call(key, Method::POST, "/v1/context", Some(context))
                .await;
            check(&format!("{user} context in {chat:?}"), &found, &|o| {
                visible(o, user, chat)
            });
            let path = match chat {
                Some(chat) => {
                    format!("/v1/memories?limit=1000&include_inactive=true&chat_id={chat}")
                }
                None => "/v1/memories?limit=1000&include_inactive=true".to_owned(),
            };
            let (_, listed) = api.call(key, Method::GET, &path, None).await;
            check(&format!("{user} list in {chat:?}"), &listed, &|o| {
                o.user == user && (chat.is_none() || o.chat == chat)
            });
            reads += 2;
        }
        // Every id, asked for directly: only the user's own, or shared in the chat named.
        for (token, id) in &ids {
            let owner = &owners[token];
            for chat in CHATS {
                let path = match chat {
                    Some(chat) => format!("/v1/memories/{id}?chat_id={chat}"),
                    None => format!("/v1/memories/{id}"),
                };
                let (status, found) = api.call(key, Method::GET, &path, None).await;
                let may = member(user, chat)
                    && (owner.user == user
                        || (owner.shared && owner.chat.is_some() && owner.chat == chat));
                assert_eq!(
                    status.is_success(),
                    may,
                    "{user} GET {path} of {owner:?}: {found}"
                );
                reads += 1;
            }
        }
        let (_, exported) = api.call(key, Method::GET, "/v1/export", None).await;
        check(&format!("{user} export"), &exported, &|o| o.user == user);
        let (_, stats) = api.call(key, Method::GET, "/v1/stats", None).await;
        let own = owners.values().filter(|owner| owner.user == user).count() as i64;
        let counted = stats["episodes"].as_i64().unwrap() + stats["facts"].as_i64().unwrap();
        assert_eq!(counted, own, "{user} stats: {stats}");
        reads += 2;
    }
    // Keys bound to a chat see that chat's view only, and never the user's personal memory.
    for (user, chat, key) in &bound {
        let (_, found) = api
            .call(
                key,
                Method::POST,
                "/v1/search",
                Some(json!({"query": "garden report note", "limit": 50, "chat_id": chat})),
            )
            .await;
        check(&format!("{user} bound to {chat}"), &found, &|o| {
            visible(o, user, Some(chat))
        });
        for path in ["/v1/export", "/v1/stats"] {
            let (status, _) = api.call(key, Method::GET, path, None).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{user} bound to {chat}: {path} spans the whole user"
            );
        }
        for other in CHATS.iter().filter(|other| **other != Some(*chat)) {
            let mut search = json!({"query": "garden"});
            if let Some(other) = other {
                search["chat_id"] = json!(other);
            }
            let (status, _) = api
                .call(key, Method::POST, "/v1/search", Some(search))
                .await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{user} bound to {chat} searched {other:?}"
            );
        }
        for (token, id) in &ids {
            let owner = &owners[token];
            let (status, _) = api
                .call(
                    key,
                    Method::GET,
                    &format!("/v1/memories/{id}?chat_id={chat}"),
                    None,
                )
                .await;
            let may = visible(owner, user, Some(chat));
            assert_eq!(
                status.is_success(),
                may,
                "{user} bound to {chat}: GET {id} of {owner:?}"
            );
            // It changes only what is kept in its chat: not the user's personal memory.
            if owner.user == *user && owner.chat != Some(*chat) {
                let (status, _) = api
                    .call(
                        key,
                        Method::POST,
                        &format!("/v1/memories/{id}/confirm"),
                        None,
                    )
                    .await;
                assert_eq!(
                    status,
                    StatusCode::NOT_FOUND,
                    "{user} bound to {chat} confirmed {id} of {owner:?}"
                );
            }
            reads += 2;
        }
    }
    // Event ids are each user's own: Ben's `ev0` is stored although Ana's (or anyone's) is.
    let reused = json!({"id": "ev0", "type": "user_message", "at": "2026-03-02T09:00:00Z",
                        "session_id": "mine", "text": "a reused event id"});
    for user in USERS {
        let (_, first) = api
            .call(
                &keys[user],
                Method::POST,
                "/v1/events",
                Some(reused.clone()),
            )
            .await;
        let (_, again) = api
            .call(
                &keys[user],
                Method::POST,
                "/v1/events",
                Some(reused.clone()),
            )
            .await;
        let stored = (
            &first["results"][0]["stored"],
            &again["results"][0]["stored"],
        );
        // The writes above used `ev0` for one user: that user has it already.
        let had_it = owners["tok0"].user == user;
        assert_eq!(
            stored,
            (&json!(!had_it), &json!(false)),
            "{user}: {first} {again}"
        );
    }

    // Hostile writes: another user's memory cannot be confirmed, corrected or forgotten.
    for (token, id) in &ids {
        let owner = &owners[token];
        let intruder = USERS.iter().find(|user| **user != owner.user).unwrap();
        let key = &keys[intruder];
        let attempts = [
            (Method::POST, format!("/v1/memories/{id}/confirm"), None),
            (
                Method::POST,
                format!("/v1/memories/{id}/correct"),
                Some(json!({"content": "overwritten"})),
            ),
            (Method::DELETE, format!("/v1/memories/{id}"), None),
        ];
        for (method, path, body) in attempts {
            let (status, answer) = api.call(key, method.clone(), &path, body).await;
            assert_eq!(
                status,
                StatusCode::NOT_FOUND,
                "{intruder} {method} {path}: {answer}"
            );
        }
        let (status, still) = api
            .call(
                &keys[owner.user],
                Method::GET,
                &format!("/v1/memories/{id}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{token} survives: {still}");
        assert_eq!(still["active"], true);
        assert!(still["content"].as_str().unwrap().contains(token.as_str()));
    }
    assert!(reads > 1_000, "{reads} reads");
    eprintln!("{reads} reads over HTTP, none outside its key's scope");
}
