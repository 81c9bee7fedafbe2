//! Deletion across extensions: a forgotten memory and an erased user are gone from the memory
//! store and from the markdown mirror, by every route a caller or a person could look.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::{ConversationEvent, ToolScope};
use mnemo_memory::MemoryService;

use crate::common::probes::every_route;
use serde_json::json;

/// Told in the first session, then consolidated into the history (the model is down, so the
/// history entry keeps the messages word for word) and written by the agent to its daily log.
const LOCKER: &str = "My locker combination is 31-17-42, keep it between us";
/// Told last in the second session: still in the session buffer and its recap.
const KEY: &str = "The spare key is under the blue flowerpot by the back door";
/// Bob's, erased with him.
const PASSPORT: &str = "Bob's passport number is XK-558-1209 and it expires in June";

const CONFIG: &str =
    "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n\
    context_messages = 5\n\
    [extensions.markdown_memory]\nmemory_window = 4\nkeep_messages = 2\n";

fn start_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 4, 9, 0, 0).unwrap()
}

async fn say(kernel: &Kernel, user: &str, session: &str, minute: i64, user_turn: bool, text: &str) {
    let line = json!({
        "type": if user_turn { "user_message" } else { "agent_response" },
        "at": (start_time() + Duration::minutes(minute)).to_rfc3339(),
        "session_id": session,
        "user_id": user,
        "text": text,
    });
    kernel
        .publish(ConversationEvent::from_value(line).unwrap().into_event())
        .await
        .unwrap();
}

fn scope(user: &str) -> ToolScope {
    ToolScope {
        user_id: user.to_owned(),
        session_id: Some(format!("{user}-probe")),
        chat_id: None,
        at: start_time() + Duration::hours(2),
        caller: mnemo_kernel::ToolCaller::Client,
    }
}

/// Every file under `dir` whose bytes contain `needle`. A file can vanish between the listing
/// and the read (SQLite removes its log and shared-memory files when the last connection of a
/// closing pool goes); the walk is then made again, until one sees every file it lists.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    for _ in 0..20 {
        if let Some(found) = walk_for(dir, needle) {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!(
        "files under {} kept vanishing while they were read",
        dir.display()
    );
}

/// One walk of [`files_containing`]; `None` when a file or folder vanished during it.
fn walk_for(dir: &Path, needle: &str) -> Option<Vec<String>> {
    let gone = |error: &std::io::Error| error.kind() == std::io::ErrorKind::NotFound;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Err(error) if gone(&error) => return None,
            entries => entries.unwrap(),
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = match std::fs::read(&path) {
                Err(error) if gone(&error) => {
                    eprintln!("{} vanished while the walk read it", path.display());
                    return None;
                }
                bytes => bytes.unwrap(),
            };
            if bytes
                .windows(needle.len())
                .any(|window| window == needle.as_bytes())
            {
                found.push(path.display().to_string());
            }
        }
    }
    Some(found)
}

async fn memory_id(kernel: &Kernel, user: &str, text: &str) -> String {
    let hits = kernel
        .call_tool(
            &scope(user),
            "search_memory",
            json!({"query": text, "mode": "fts", "limit": 50}),
        )
        .await
        .unwrap();
    let hits = hits.as_array().cloned().unwrap_or_default();
    hits.iter()
        .find(|hit| hit["content"] == text)
        .and_then(|hit| hit["id"].as_str())
        .unwrap_or_else(|| panic!("`{text}` is not stored: {hits:?}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_and_erase_reach_the_markdown_mirror() {
    forget_and_erase(None).await;
}

/// The same with the memory store in PostgreSQL: there the text must be in no row of the
/// database (a dump of it), nor in any file of the data directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg(feature = "postgres")]
async fn forget_and_erase_reach_the_markdown_mirror_on_postgres() {
    forget_and_erase(Some(mnemo_pg_fixture::fresh_database())).await;
}

/// Where a secret could still be: the files under `root`, and the PostgreSQL database.
struct Places<'a> {
    root: &'a Path,
    database_url: Option<&'a str>,
}

impl Places<'_> {
    /// The files (and the database) holding `needle`.
    fn holding(&self, needle: &str) -> Vec<String> {
        let mut found = files_containing(self.root, needle);
        if let Some(url) = self.database_url {
            if mnemo_pg_fixture::dump(url).contains(needle) {
                found.push(format!("the PostgreSQL database {url}"));
            }
        }
        found
    }
}

async fn forget_and_erase(database_url: Option<String>) {
    let config_text = match &database_url {
        Some(url) => CONFIG.replacen(
            "[extensions.memory]\n",
            &format!("[extensions.memory]\ndatabase_url = \"{url}\"\n"),
            1,
        ),
        None => CONFIG.to_owned(),
    };
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(
        mnemo_host::builtin_extensions(),
        Config::parse(&config_text, "test.toml").unwrap(),
    )
    .virtual_clock(start_time())
    .data_dir(dir.path())
    .start()
    .await
    .unwrap();
    let service: Arc<MemoryService> = kernel.context().services().get::<MemoryService>().unwrap();

    // Ana, first session: five messages, so the window consolidates the first three.
    say(
        &kernel,
        "ana",
        "ana-1",
        0,
        true,
        "Good morning, let us plan the week",
    )
    .await;
    say(&kernel, "ana", "ana-1", 1, false, "Sure, what comes first?").await;
    say(&kernel, "ana", "ana-1", 2, true, LOCKER).await;
    say(
        &kernel,
        "ana",
        "ana-1",
        3,
        false,
        "Noted, I will keep that private",
    )
    .await;
    say(
        &kernel,
        "ana",
        "ana-1",
        4,
        true,
        "Also book the dentist for Tuesday",
    )
    .await;
    kernel
        .call_tool(&scope("ana"), "md_remember", json!({"content": LOCKER}))
        .await
        .unwrap();
    // Ana, second session: the key is the latest message, still buffered.
    say(
        &kernel,
        "ana",
        "ana-2",
        60,
        true,
        "Back again about the house",
    )
    .await;
    say(&kernel, "ana", "ana-2", 61, true, KEY).await;
    // Bob.
    say(&kernel, "bob", "bob-1", 5, true, PASSPORT).await;
    say(
        &kernel,
        "bob",
        "bob-1",
        6,
        true,
        "Remind me to renew the dentist card",
    )
    .await;
    kernel.settle().await;
    service.index_pending().await;

    // Before: every secret is somewhere, in the store and in the files.
    let root = dir.path();
    let places = Places {
        root,
        database_url: database_url.as_deref(),
    };
    let store_place = if database_url.is_some() {
        "PostgreSQL"
    } else {
        "memory.db"
    };
    let locker_files = places.holding("31-17-42");
    for expected in ["HISTORY.md", "daily", store_place] {
        assert!(
            locker_files.iter().any(|path| path.contains(expected)),
            "the locker code should be in {expected}: {locker_files:?}"
        );
    }
    assert!(places
        .holding("flowerpot")
        .iter()
        .any(|path| path.contains(".sessions")));
    assert!(every_route(&kernel, &scope("ana"), "locker combination")
        .await
        .contains("31-17-42"));
    assert!(every_route(&kernel, &scope("ana"), "spare key flowerpot")
        .await
        .contains("flowerpot"));
    assert!(every_route(&kernel, &scope("bob"), "passport number")
        .await
        .contains("XK-558-1209"));

    // Ana forgets two memories with the agent's tool.
    for text in [LOCKER, KEY] {
        let id = memory_id(&kernel, "ana", text).await;
        let reply = kernel
            .call_tool(&scope("ana"), "forget_memory", json!({"memory_id": id}))
            .await
            .unwrap();
        assert_eq!(reply["forgotten"], true);
    }
    kernel.settle().await;
    for (query, secret) in [
        ("locker combination", "31-17-42"),
        ("spare key flowerpot", "flowerpot"),
    ] {
        let seen = every_route(&kernel, &scope("ana"), query).await;
        assert!(
            !seen.contains(secret),
            "`{secret}` is still reachable: {seen}"
        );
    }
    // The text itself is in no file: not the database, not its log, not the markdown mirror.
    let private_id = memory_id(&kernel, "ana", "Noted, I will keep that private").await;
    kernel.shutdown().await;
    for secret in ["31-17-42", "flowerpot"] {
        assert_eq!(places.holding(secret), Vec::<String>::new(), "{secret}");
    }
    // What was not forgotten is still there.
    assert!(!places.holding("dentist for Tuesday").is_empty());

    // `mnemo forget` from the command line reaches the markdown mirror too.
    assert!(!places.holding("keep that private").is_empty());
    let config = root.join("config.toml");
    std::fs::write(&config, &config_text).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(root)
        .args(["forget", &private_id])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(places.holding("keep that private"), Vec::<String>::new());

    // Bob is erased: his memories and his markdown workspace are gone; Ana keeps hers.
    let kernel = Kernel::builder(
        mnemo_host::builtin_extensions(),
        Config::parse(&config_text, "test.toml").unwrap(),
    )
    .virtual_clock(start_time() + Duration::hours(3))
    .data_dir(dir.path())
    .start()
    .await
    .unwrap();
    let service: Arc<MemoryService> = kernel.context().services().get::<MemoryService>().unwrap();
    let receipt = service.erase_user("bob").await.unwrap();
    let memories = receipt
        .removed
        .iter()
        .filter(|entry| entry.kind != "entity")
        .count();
    assert_eq!(memories, 2, "{receipt:?}");
    kernel.settle().await;
    let seen = every_route(&kernel, &scope("bob"), "passport number dentist card").await;
    assert!(
        !seen.contains("XK-558-1209") && !seen.contains("dentist card"),
        "{seen}"
    );
    let users: Vec<String> = std::fs::read_dir(root.join("markdown/users"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!users.iter().any(|name| name.contains("bob")), "{users:?}");
    assert!(every_route(&kernel, &scope("ana"), "dentist")
        .await
        .contains("dentist for Tuesday"));
    kernel.shutdown().await;
    assert_eq!(places.holding("XK-558-1209"), Vec::<String>::new());
}
