//! Forgetting follows lineage, as a property (issue #47): in a random lifecycle (turns over
//! several sessions, consolidation and a weekly reflection by a model, the markdown mirror on),
//! after a random turn is forgotten through the agent's tool, no search in any mode, no
//! context, no markdown tool, no export, no file under the data directory (the SQLite database
//! included) and no reflection holds its unique token, on both backends. The model's words are
//! scripted by a local HTTP server: its facts cite the turns they come from, one turn or two,
//! and its reflection repeats every token it read, so that each kind of derived memory exists.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer, ReceivedRequest};
use mnemo_kernel::{ConversationEvent, ToolScope};
use mnemo_memory::MemoryService;
use serde_json::{json, Value};

use crate::common::probes::{every_route, Random};

const PLACES: [&str; 3] = ["garage", "attic", "cellar"];
const USER: &str = "ana";

fn start_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 9, 0, 0).unwrap()
}

/// A token no other turn has: `tk` and six letters.
fn token(random: &mut Random) -> String {
    let letters: String = (0..6)
        .map(|_| char::from(b'a' + random.below(26) as u8))
        .collect();
    format!("tk{letters}")
}

/// The tokens in `text`.
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| word.len() == 8 && word.starts_with("tk"))
        .map(str::to_owned)
        .collect()
}

/// The scripted model: a fact per user turn it is shown (its token and place), a fact for each
/// two turns in a row (both tokens), and one for two turns of the same place (no token); a
/// reflection naming every token of the memories it read; no contradictions; plain text else.
fn model(request: &ReceivedRequest) -> CannedAnswer {
    let text: String = request.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|message| message["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let content = if let Some(conversation) = text.split("Conversation:\n").nth(1) {
        let turns: Vec<(usize, String, String)> = conversation
            .lines()
            .filter_map(|line| {
                let (number, rest) = line.split_once(". [")?;
                let spoken = rest.split_once("] user: ")?.1;
                let token = tokens(spoken).into_iter().next()?;
                let place = PLACES.iter().find(|place| spoken.contains(**place))?;
                Some((number.parse().ok()?, token, (*place).to_owned()))
            })
            .collect();
        let mut facts = Vec::new();
        for (number, token, place) in &turns {
            facts.push(
                json!({"content": format!("The user keeps {token} in the {place}"),
                              "sources": [number]}),
            );
        }
        for pair in turns.windows(2) {
            let ((one, first, _), (two, second, _)) = (&pair[0], &pair[1]);
            facts.push(
                json!({"content": format!("The user keeps {first} and {second}"),
                              "sources": [one, two]}),
            );
        }
        for (index, (one, _, place)) in turns.iter().enumerate() {
            if let Some((two, _, _)) = turns[index + 1..].iter().find(|turn| turn.2 == *place) {
                facts.push(
                    json!({"content": format!("The user keeps things in the {place}"),
                                  "sources": [one, two]}),
                );
            }
        }
        json!({"facts": facts}).to_string()
    } else if text.contains("Memories of the past") {
        let mut named = tokens(&text);
        named.dedup();
        format!("This week the user kept {} safe.", named.join(", "))
    } else if text.contains("contradict") {
        json!({"contradictions": []}).to_string()
    } else {
        "Nothing to add.".to_owned()
    };
    CannedAnswer::json(
        &json!({"choices": [{"message": {"role": "assistant", "content": content},
                                             "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    )
}

async fn say(kernel: &Kernel, session: &str, minute: i64, user_turn: bool, text: &str) {
    let line = json!({
        "type": if user_turn { "user_message" } else { "agent_response" },
        "at": (start_time() + Duration::minutes(minute)).to_rfc3339(),
        "session_id": session,
        "user_id": USER,
        "text": text,
    });
    kernel
        .publish(ConversationEvent::from_value(line).unwrap().into_event())
        .await
        .unwrap();
}

fn scope(at: DateTime<Utc>) -> ToolScope {
    ToolScope {
        user_id: USER.to_owned(),
        session_id: Some("probe".to_owned()),
        chat_id: None,
        at,
        caller: mnemo_kernel::ToolCaller::Client,
    }
}

/// The stretches of `text` around each `needle`, to say where it still is.
fn around(text: &str, needle: &str) -> Vec<String> {
    text.match_indices(needle)
        .map(|(at, _)| {
            let start = text[..at]
                .char_indices()
                .rev()
                .nth(60)
                .map_or(0, |(i, _)| i);
            let end = text[at..]
                .char_indices()
                .nth(60)
                .map_or(text.len(), |(i, _)| at + i);
            text[start..end].to_owned()
        })
        .collect()
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes
                    .windows(needle.len())
                    .any(|window| window == needle.as_bytes())
                {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

async fn a_forgotten_turn_leaves_nothing_derived_behind(seed: u64, database_url: Option<String>) {
    let server = HttpTestServer::respond_with(model).await;
    let store = match &database_url {
        Some(url) => format!("database_url = \"{url}\"\n"),
        None => String::new(),
    };
    let config = format!(
        "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted\"\n\
         [extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n{store}tools = \"all\"\n\
         context_messages = 5\n[extensions.memory_maintenance]\n[extensions.memory_reflection]\n\
         [extensions.markdown_memory]\n",
        server.base_url
    );
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(
        mnemo_host::builtin_extensions(),
        Config::parse(&config, "test.toml").unwrap(),
    )
    .virtual_clock(start_time())
    .data_dir(dir.path())
    .start()
    .await
    .unwrap();
    let service: Arc<MemoryService> = kernel.context().services().get::<MemoryService>().unwrap();

    let mut random = Random(seed);
    // Each turn's token, and the turn's text.
    let mut told: BTreeMap<String, String> = BTreeMap::new();
    let sessions = 2 + random.below(2);
    let mut minute = 0;
    for session in 0..sessions {
        let id = format!("s{session}");
        for _ in 0..2 + random.below(3) {
            let token = token(&mut random);
            let place = PLACES[random.below(PLACES.len())];
            let text = format!("I keep {token} in the {place} now");
            say(&kernel, &id, minute, true, &text).await;
            say(
                &kernel,
                &id,
                minute + 1,
                false,
                "Noted, I will remember where it is",
            )
            .await;
            told.insert(token, text);
            minute += 2;
        }
        minute += 60;
    }
    // The last session is consolidated too, then a weekly reflection reads it all.
    say(&kernel, "closing", minute, true, "That is all for today").await;
    kernel.settle().await;
    for job in ["execute_consolidation", "execute_reflection"] {
        let run = kernel.run_job(job).await.unwrap();
        assert!(run.outcome.is_ok(), "{job}: {:?}", run.outcome);
    }
    kernel.settle().await;
    let at = start_time() + Duration::minutes(minute + 10);
    let facts = service
        .export_rows(Some(USER))
        .await
        .unwrap()
        .iter()
        .filter(|record| record["type"] == "memories" && record["row"]["kind"] != "episode")
        .count();
    assert!(
        facts > told.len(),
        "the model's facts and reflection were saved: {facts}"
    );

    let tokens: Vec<&String> = told.keys().collect();
    let forgotten = tokens[random.below(tokens.len())].clone();
    let before = every_route(&kernel, &scope(at), &forgotten).await;
    assert!(before.contains(&forgotten), "found before it is forgotten");
    let hits = kernel
        .call_tool(
            &scope(at),
            "search_memory",
            json!({"query": told[&forgotten], "mode": "fts", "limit": 50}),
        )
        .await
        .unwrap();
    let id = hits
        .as_array()
        .unwrap()
        .iter()
        .find(|hit| hit["content"] == told[&forgotten].as_str())
        .and_then(|hit| hit["id"].as_str())
        .unwrap()
        .to_owned();
    let result = kernel
        .call_tool(&scope(at), "forget_memory", json!({"memory_id": id}))
        .await
        .unwrap();
    let receipt = &result["receipt"];
    assert!(
        receipt["removed"].as_array().unwrap().len() > 1,
        "what was derived went too: {receipt}"
    );
    kernel.settle().await;

    let after = every_route(&kernel, &scope(at), &forgotten).await;
    assert!(
        !after.contains(&forgotten),
        "seed {seed}: {forgotten} is still found: {:?}\nreceipt: {receipt}",
        around(&after, &forgotten)
    );
    let export = Value::from(service.export_rows(None).await.unwrap()).to_string();
    let leaked: Vec<&str> = export
        .split("\"type\"")
        .filter(|record| record.contains(&forgotten) && !record.contains("forget_receipts"))
        .collect();
    assert!(
        leaked.is_empty(),
        "seed {seed}: the export holds it: {leaked:?}"
    );
    // What was not forgotten is still found.
    let kept = tokens.iter().find(|token| ***token != forgotten).unwrap();
    let found = every_route(&kernel, &scope(at), kept).await;
    assert!(
        found.contains(kept.as_str()),
        "seed {seed}: {kept} is still found"
    );
    kernel.shutdown().await;
    let files = files_holding(dir.path(), &forgotten);
    assert!(files.is_empty(), "seed {seed}: {files:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_turn_leaves_nothing_derived_behind_on_sqlite() {
    for seed in [7, 1_234_567, 987_654_321] {
        a_forgotten_turn_leaves_nothing_derived_behind(seed, None).await;
    }
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_turn_leaves_nothing_derived_behind_on_postgres() {
    for seed in [7, 1_234_567] {
        a_forgotten_turn_leaves_nothing_derived_behind(
            seed,
            Some(mnemo_pg_fixture::fresh_database()),
        )
        .await;
    }
}
