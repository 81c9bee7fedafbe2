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

use crate::common::probes::Random;

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

/// When every test's virtual clock starts.
fn start_time() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap()
}

/// A kernel of the built-in extensions on `config`, in a fresh data directory, at [`start_time`].
async fn started(config: &str) -> (Kernel, tempfile::TempDir) {
    let config = Config::parse(config, "test.toml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(mnemo_host::builtin_extensions(), config)
        .virtual_clock(start_time())
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    (kernel, dir)
}

#[tokio::test]
async fn no_read_path_returns_another_scope() {
    for seed in [7_u64, 1_234, 98_765] {
        check_seed(seed, None).await;
    }
}

/// The same property with the memory store in PostgreSQL.
#[tokio::test]
#[cfg(feature = "postgres")]
async fn no_read_path_returns_another_scope_on_postgres() {
    for seed in [7_u64, 1_234, 98_765] {
        check_seed(seed, Some(mnemo_pg_fixture::fresh_database())).await;
    }
}

async fn check_seed(seed: u64, database_url: Option<String>) {
    let database = database_url
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    let (kernel, _dir) = started(&format!(
        "[extensions.ner]\n[extensions.memory]\n{database}tools = \"all\"\ncontext_limit = 50\ncontext_messages = 0\ncontext_token_budget = 100000\n\
         [extensions.markdown_memory]\n"
    ))
    .await;
    let start = start_time();
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
            caller: mnemo_kernel::ToolCaller::Client,
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
                caller: mnemo_kernel::ToolCaller::Client,
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
                        as_of: None,
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
                    caller: mnemo_kernel::ToolCaller::Client,
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
            caller: mnemo_kernel::ToolCaller::Client,
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

/// One owner's search finds the same memories in the same order whether or not the store also
/// holds other owners' memories, in every mode: other users' words, vectors, entities and
/// statistics change nothing in it (issue 43).
#[tokio::test]
async fn one_owners_results_do_not_depend_on_other_owners() {
    same_results_alone_and_among_others(None, None).await;
}

/// The same on PostgreSQL.
#[tokio::test]
#[cfg(feature = "postgres")]
async fn one_owners_results_do_not_depend_on_other_owners_on_postgres() {
    same_results_alone_and_among_others(
        Some(mnemo_pg_fixture::fresh_database()),
        Some(mnemo_pg_fixture::fresh_database()),
    )
    .await;
}

const TOPICS: [&str; 10] = [
    "garden", "budget", "piano", "Lisbon", "hiking", "recipe", "dentist", "marathon", "violin",
    "kitchen",
];
const VERBS: [&str; 5] = ["planned", "discussed", "postponed", "loved", "booked"];

/// The turns `user` says (`count` of them, each with its own token), in words drawn by `seed`;
/// `skewed` turns lean on a few topics, so that their words are common in the whole store and
/// rare in the owner's memories.
fn generated_turns(user: &str, seed: u64, count: usize, skewed: bool) -> Vec<(String, String)> {
    let mut random = Random(seed | 1);
    (0..count)
        .map(|index| {
            let topic = |random: &mut Random| match skewed && random.below(3) > 0 {
                true => TOPICS[random.below(2)],
                false => TOPICS[random.below(TOPICS.len())],
            };
            let (first, second) = (topic(&mut random), topic(&mut random));
            let text = format!(
                "I {} the {first} with {} and we talked about the {second} {user}tok{index}",
                VERBS[random.below(VERBS.len())],
                NAMES[random.below(NAMES.len())],
            );
            (user.to_owned(), text)
        })
        .collect()
}

/// Stores `turns` (minute, user, text) in a fresh store, each at its minute, and waits for
/// their vectors.
async fn store_of(
    turns: &[(i64, String, String)],
    database_url: Option<String>,
) -> (Kernel, tempfile::TempDir) {
    let database = database_url
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    let (kernel, dir) = started(&format!(
        "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n{database}"
    ))
    .await;
    let start = start_time();
    for (minute, user, text) in turns {
        let at = start + chrono::Duration::minutes(*minute);
        let line = json!({"type": "user_message", "at": at.to_rfc3339(),
            "session_id": format!("{user}-{}", minute / 10), "user_id": user, "text": text});
        kernel
            .publish(ConversationEvent::from_value(line).unwrap().into_event())
            .await
            .unwrap();
    }
    kernel.settle().await;
    (kernel, dir)
}

async fn same_results_alone_and_among_others(
    alone_url: Option<String>,
    shared_url: Option<String>,
) {
    // Ana's turns at the same minutes in both stores; in the shared one, other users' turns
    // before, between and after them, with words of their own frequencies.
    let mut own = generated_turns("ana", 11, 30, false).into_iter();
    let mut others: Vec<_> = ["ben", "cleo", "dov", "eli"]
        .iter()
        .enumerate()
        .map(|(index, user)| generated_turns(user, 100 + index as u64, 45, true).into_iter())
        .collect();
    let mut shared = Vec::new();
    let mut alone = Vec::new();
    let mut next_other = 0;
    for minute in 0..210_i64 {
        let turn = if minute % 7 == 3 {
            own.next()
        } else {
            next_other += 1;
            others[next_other % 4].next()
        }
        .map(|(user, text)| (minute, user, text));
        let Some(turn) = turn else { continue };
        if turn.1 == "ana" {
            alone.push(turn.clone());
        }
        shared.push(turn);
    }
    assert_eq!(alone.len(), 30);
    assert_eq!(shared.len(), 210);
    let (alone_kernel, _alone_dir) = store_of(&alone, alone_url).await;
    let (shared_kernel, _shared_dir) = store_of(&shared, shared_url).await;
    let queries = [
        "the garden budget",
        "what did I say about the piano?",
        "Lisbon with Dana",
        "Marco",
        "which marathon did I book",
        "violin and kitchen recipe",
        "hiking",
    ];
    let modes = [
        mnemo_memory_api::SearchMode::Fts,
        mnemo_memory_api::SearchMode::Vector,
        mnemo_memory_api::SearchMode::Entity,
        mnemo_memory_api::SearchMode::Hybrid,
    ];
    let mut compared = 0;
    for query in queries {
        for mode in modes {
            let request = mnemo_memory_api::SearchRequest {
                query: query.to_owned(),
                user_id: Some("ana".to_owned()),
                limit: 8,
                mode,
                ..mnemo_memory_api::SearchRequest::default()
            };
            let mut found = Vec::new();
            for kernel in [&alone_kernel, &shared_kernel] {
                let api = kernel
                    .context()
                    .services()
                    .get::<dyn mnemo_memory_api::MemoryApi>()
                    .unwrap();
                let hits = api.search(request.clone()).await.unwrap();
                found.push(
                    hits.iter()
                        .map(|hit| hit.memory.content.clone())
                        .collect::<Vec<_>>(),
                );
            }
            assert!(
                found[1].iter().all(|content| content.contains("anatok")),
                "{query} ({mode:?}) found another owner's memory: {:?}",
                found[1]
            );
            assert_eq!(found[0], found[1], "{query} ({mode:?}): alone, then shared");
            compared += usize::from(!found[0].is_empty());
        }
    }
    // Every mode found something for most queries: the comparison is not of empty lists.
    assert!(
        compared >= queries.len() * 3,
        "{compared} non-empty comparisons"
    );
    alone_kernel.shutdown().await;
    shared_kernel.shutdown().await;
}
