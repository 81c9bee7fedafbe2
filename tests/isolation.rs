//! Isolation: with several users and chats, no read path ever returns what the caller may not
//! see: search in every tool, recall, typed search, entity lookup, the context block, stored
//! context values, statistics, the markdown tools, and the export of one user. A caller sees their
//! personal memories, their own memories of the chat they are in, and that chat's shared
//! memories; their markdown files are theirs alone; an export holds exactly what they own.

use std::collections::{HashMap, HashSet};

use chrono::{TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::{ContextRequest, ConversationEvent, ToolScope};
use serde_json::json;

const USERS: [&str; 3] = ["ana", "ben", "cleo"];
const CHATS: [Option<&str>; 3] = [None, Some("family"), Some("work")];
const NAMES: [&str; 3] = ["Dana", "Marco", "Priya"];

/// Who may see a memory.
#[derive(Debug, Clone)]
struct Owner {
    user: &'static str,
    chat: Option<&'static str>,
    shared: bool,
}

/// A memory only its owner may see, in any chat.
fn personal(user: &'static str) -> Owner {
    Owner {
        user,
        chat: None,
        shared: false,
    }
}

fn visible(owner: &Owner, user: &str, chat: Option<&str>) -> bool {
    (owner.user == user && (owner.chat.is_none() || owner.chat == chat))
        || (owner.shared && owner.chat.is_some() && owner.chat == chat)
}

struct Random(u64);
impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The memory tokens (`tok123`) in a text.
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| {
            word.starts_with("tok")
                && word[3..].chars().all(|c| c.is_ascii_digit())
                && word.len() > 3
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn no_read_path_returns_another_scope() {
    for seed in [7_u64, 1_234, 98_765] {
        check_seed(seed, None).await;
    }
}

/// The same property with the memory store in PostgreSQL.
#[tokio::test]
async fn no_read_path_returns_another_scope_on_postgres() {
    for seed in [7_u64, 1_234, 98_765] {
        check_seed(seed, Some(mnemo_pg_fixture::fresh_database())).await;
    }
}

async fn check_seed(seed: u64, database_url: Option<String>) {
    let database = database_url
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    let config = Config::parse(
        &format!(
            "[extensions.ner]\n[extensions.memory]\n{database}tools = \"all\"\ncontext_limit = 50\ncontext_messages = 0\ncontext_token_budget = 100000\n\
             [extensions.markdown_memory]\n"
        ),
        "test.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap();
    let kernel = Kernel::builder(mnemo_host::builtin_extensions(), config)
        .virtual_clock(start)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let mut random = Random(seed | 1);
    let mut owners: HashMap<String, Owner> = HashMap::new();
    let mut markdown: HashSet<String> = HashSet::new();
    let mut contexts: Vec<usize> = Vec::new();
    for index in 0..60 {
        let token = format!("tok{index}");
        let user = USERS[random.below(3)];
        let chat = CHATS[random.below(3)];
        let name = NAMES[random.below(3)];
        let scope = ToolScope {
            user_id: user.to_owned(),
            session_id: Some(format!("{user}-{}", chat.unwrap_or("dm"))),
            chat_id: chat.map(str::to_owned),
            at: start,
        };
        let text = format!("project alpha note {token} about {name} and the budget");
        if random.below(3) == 0 {
            // A note in the user's own markdown files, under a token of its own.
            let note = format!("tok{}", index + 1_000);
            kernel
                .call_tool(
                    &scope,
                    "md_remember",
                    json!({"content": format!("project alpha diary {note} about {name}")}),
                )
                .await
                .unwrap();
            markdown.insert(note.clone());
            owners.insert(note, personal(user));
        }
        match random.below(5) {
            0 => {
                // A conversation turn: personal to its speaker, in its chat.
                let line = json!({"type": "user_message", "at": start.to_rfc3339(),
                    "session_id": scope.session_id, "user_id": user, "chat_id": chat, "text": text});
                kernel
                    .publish(ConversationEvent::from_value(line).unwrap().into_event())
                    .await
                    .unwrap();
                owners.insert(
                    token,
                    Owner {
                        user,
                        chat,
                        shared: false,
                    },
                );
            }
            1 => {
                let shared = chat.is_some() && random.below(2) == 0;
                kernel
                    .call_tool(
                        &scope,
                        "remember",
                        json!({"content": text, "subjects": [name], "shared": shared}),
                    )
                    .await
                    .unwrap();
                // Told in a chat, a fact belongs to that chat, shared or not.
                owners.insert(token, Owner { user, chat, shared });
            }
            2 => {
                kernel
                    .call_tool(&scope, "remember_fact", json!({"content": text}))
                    .await
                    .unwrap();
                owners.insert(
                    token,
                    Owner {
                        user,
                        chat,
                        shared: false,
                    },
                );
            }
            3 => {
                kernel
                    .call_tool(
                        &scope,
                        "set_context",
                        json!({"key": format!("key{index}"), "value": text}),
                    )
                    .await
                    .unwrap();
                contexts.push(index);
                owners.insert(
                    token,
                    Owner {
                        user,
                        chat,
                        shared: false,
                    },
                );
            }
            _ => {
                kernel
                    .call_tool(
                        &scope,
                        "store_memory",
                        json!({"content": text, "memory_type": "fact"}),
                    )
                    .await
                    .unwrap();
                owners.insert(
                    token,
                    Owner {
                        user,
                        chat,
                        shared: false,
                    },
                );
            }
        }
    }
    kernel.settle().await;
    let mut checked = 0;
    for user in USERS {
        for chat in CHATS {
            let scope = ToolScope {
                user_id: user.to_owned(),
                session_id: Some(format!("{user}-probe")),
                chat_id: chat.map(str::to_owned),
                at: start,
            };
            let mut seen: Vec<String> = Vec::new();
            let mut queries: Vec<String> = vec!["project alpha budget".into(), "note".into()];
            queries.extend(NAMES.iter().map(|name| name.to_string()));
            queries.extend((0..60).map(|index| format!("tok{index}")));
            for query in &queries {
                for (tool, args) in [
                    ("search_memory", json!({"query": query, "limit": 50})),
                    ("recall", json!({"query": query})),
                    ("recall", json!({"query": query, "about": "Dana"})),
                    ("search_memories", json!({"query": query, "limit": 50})),
                ] {
                    let result = kernel.call_tool(&scope, tool, args).await.unwrap();
                    seen.extend(tokens(&result.to_string()));
                }
            }
            for (tool, args) in [
                ("md_recall", json!({"days": 30})),
                (
                    "md_search_history",
                    json!({"query": "project alpha diary", "limit": 50}),
                ),
                ("memory_stats", json!({})),
            ] {
                let result = kernel.call_tool(&scope, tool, args).await.unwrap();
                seen.extend(tokens(&result.to_string()));
            }
            for index in &contexts {
                let result = kernel
                    .call_tool(&scope, "get_context", json!({"key": format!("key{index}")}))
                    .await
                    .unwrap();
                seen.extend(tokens(&result.to_string()));
            }
            for name in NAMES {
                if let Ok(result) = kernel
                    .call_tool(&scope, "get_entity_info", json!({"name": name}))
                    .await
                {
                    seen.extend(tokens(&result.to_string()));
                }
            }
            for query in [
                "project alpha budget",
                "what about Dana",
                "tok3 tok17 tok42",
            ] {
                let blocks = kernel
                    .gather_context(&ContextRequest {
                        prompt: query.into(),
                        user_id: user.into(),
                        session_id: format!("{user}-probe"),
                        chat_id: chat.map(str::to_owned),
                        at: start,
                        history_messages: 0,
                    })
                    .await;
                for (_, block) in blocks {
                    seen.extend(tokens(&block));
                }
            }
            assert!(!seen.is_empty() || owners.values().all(|o| !visible(o, user, chat)));
            for token in &seen {
                let owner = &owners[token];
                assert!(
                    visible(owner, user, chat),
                    "seed {seed}: {user} in {chat:?} saw {token} of {owner:?}"
                );
                checked += 1;
            }
            // And what they may see is findable.
            for (token, owner) in &owners {
                if visible(owner, user, chat) && !markdown.contains(token) {
                    let result = kernel
                        .call_tool(&scope, "search_memory", json!({"query": token}))
                        .await
                        .unwrap();
                    assert!(
                        result.to_string().contains(token.as_str()),
                        "seed {seed}: {user} in {chat:?} cannot find their {token}"
                    );
                }
            }
        }
    }
    assert!(
        checked > 100,
        "the test must look at real results, saw {checked}"
    );
    // The export of one user (`mnemo export --user`) holds exactly the memories they own, and
    // their statistics count exactly those.
    let service = kernel
        .context()
        .services()
        .get::<mnemo_memory::MemoryService>()
        .unwrap();
    for user in USERS {
        let rows = service.export_rows(Some(user)).await.unwrap();
        let exported: HashSet<String> = rows
            .iter()
            .flat_map(|row| tokens(&row.to_string()))
            .collect();
        let owned: HashSet<String> = owners
            .iter()
            .filter(|(token, owner)| owner.user == user && !markdown.contains(*token))
            .map(|(token, _)| token.clone())
            .collect();
        assert_eq!(exported, owned, "seed {seed}: export of {user}");
        // The memory API's listing of one owner (the inspector's and the server's) likewise.
        let api = kernel
            .context()
            .services()
            .get::<dyn mnemo_memory_api::MemoryApi>()
            .unwrap();
        let listed: HashSet<String> = api
            .list_memories(mnemo_memory_api::ListRequest {
                include_inactive: true,
                ..mnemo_memory_api::ListRequest::active(user, 1_000)
            })
            .await
            .unwrap()
            .iter()
            .flat_map(|memory| tokens(&memory.content))
            .collect();
        assert_eq!(listed, owned, "seed {seed}: list_memories of {user}");
        let stats = kernel
            .call_tool(
                &ToolScope {
                    user_id: user.to_owned(),
                    session_id: None,
                    chat_id: None,
                    at: start,
                },
                "memory_stats",
                json!({}),
            )
            .await
            .unwrap();
        let counted: u64 = stats["counts"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(serde_json::Value::as_u64)
            .sum();
        assert_eq!(
            counted,
            owned.len() as u64,
            "seed {seed}: statistics of {user}: {stats}"
        );
    }
    // Markdown notes are findable by their owner, in any chat.
    for token in &markdown {
        let owner = &owners[token];
        let scope = ToolScope {
            user_id: owner.user.to_owned(),
            session_id: None,
            chat_id: None,
            at: start,
        };
        let result = kernel
            .call_tool(&scope, "md_search_history", json!({"query": token}))
            .await
            .unwrap();
        assert!(
            result.to_string().contains(token.as_str()),
            "seed {seed}: {} cannot find their note {token}",
            owner.user
        );
    }
    kernel.shutdown().await;
}
