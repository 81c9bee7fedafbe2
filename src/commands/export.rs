//! `mnemo export`: the memory tables as lossless JSONL, or as readable markdown.

use std::io::Write;

use anyhow::bail;
use mnemo_kernel::host::Config;
use serde_json::Value;

use super::{memory_service, start_for_store, unless_reader_left, visible};

/// `mnemo export`: every memory table row as JSONL (lossless), or a readable markdown rendering
/// grouped by user, person and kind.
pub(crate) async fn export(
    config: Config,
    format: &str,
    user: Option<&str>,
) -> anyhow::Result<bool> {
    if format != "jsonl" && format != "markdown" {
        bail!("--format must be jsonl or markdown, not `{format}`");
    }
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let records = service.export_rows(user).await;
    kernel.shutdown().await;
    let records = records?;
    let mut stdout = std::io::stdout().lock();
    let written = if format == "jsonl" {
        records
            .iter()
            .try_for_each(|record| writeln!(stdout, "{record}"))
    } else {
        write!(stdout, "{}", markdown(&records))
    };
    unless_reader_left(written.and_then(|()| stdout.flush()))?;
    Ok(true)
}

/// The export as markdown: per user, the people with what is known about them, then facts,
/// reflections and conversations by session.
fn markdown(records: &[Value]) -> String {
    let rows = |table: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|record| record["type"] == table)
            .map(|record| &record["row"])
            // What retrieval shows: neither soft-deleted nor superseded.
            .filter(|row| row.get("valid_until").is_none_or(Value::is_null))
            .filter(|row| row.get("superseded_at").is_none_or(Value::is_null))
            .collect()
    };
    let memories = rows("memories");
    let entities = rows("entities");
    let links = rows("memory_entities");
    let session_rows = rows("sessions_consolidations");
    let mut users: Vec<String> = memories
        .iter()
        .map(|memory| memory["user_id"].as_str().unwrap_or("(nobody)").to_owned())
        .collect();
    users.sort();
    users.dedup();
    // One line each, and no control character reaches the terminal.
    let text = |value: &Value| {
        visible(&value.as_str().unwrap_or_default().replace('\n', " ")).into_owned()
    };
    let mut out = String::from("# mnemo memory export\n");
    for user in users {
        out.push_str(&format!("\n## {}\n", visible(&user)));
        let mine: Vec<&&Value> = memories
            .iter()
            .filter(|memory| memory["user_id"].as_str().unwrap_or("(nobody)") == user)
            .collect();
        let people: Vec<&&Value> = entities
            .iter()
            .filter(|entity| entity["owner_id"] == user.as_str() && entity["type"] == "person")
            .collect();
        if !people.is_empty() {
            out.push_str("\n### People\n");
            for person in people {
                let relation = person["relation"]
                    .as_str()
                    .map(|r| format!(" ({})", visible(r)))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "\n#### {}{relation}\n",
                    text(&person["canonical_name"])
                ));
                for link in links
                    .iter()
                    .filter(|link| link["entity_id"] == person["id"])
                {
                    if let Some(memory) = mine.iter().find(|memory| {
                        memory["id"] == link["memory_id"] && memory["kind"] == "fact"
                    }) {
                        out.push_str(&format!("- {}\n", text(&memory["content"])));
                    }
                }
            }
        }
        for (kind, title) in [("fact", "Facts"), ("reflection", "Reflections")] {
            let of_kind: Vec<&&&Value> = mine
                .iter()
                .filter(|memory| memory["kind"] == kind)
                .collect();
            if !of_kind.is_empty() {
                out.push_str(&format!("\n### {title}\n"));
                for memory in of_kind {
                    out.push_str(&format!("- {}\n", text(&memory["content"])));
                }
            }
        }
        let mut sessions: Vec<String> = mine
            .iter()
            .filter(|memory| memory["kind"] == "episode")
            .filter_map(|memory| memory["session_id"].as_str().map(str::to_owned))
            .collect();
        sessions.sort();
        sessions.dedup();
        if !sessions.is_empty() {
            out.push_str("\n### Conversations\n");
            for session in sessions {
                // The messaging providers the session came through (one per chat it is in).
                let mut providers: Vec<String> = session_rows
                    .iter()
                    .filter(|row| {
                        row["user_id"] == user.as_str() && row["session_id"] == session.as_str()
                    })
                    .filter_map(|row| {
                        row["provider"]
                            .as_str()
                            .map(|provider| visible(provider).into_owned())
                    })
                    .collect();
                providers.sort();
                providers.dedup();
                let via = if providers.is_empty() {
                    String::new()
                } else {
                    format!(" (via {})", providers.join(", "))
                };
                out.push_str(&format!("\n#### Session {}{via}\n", visible(&session)));
                // In the order they were said: by time, and between turns of the same second
                // in the order they were stored, which is the export's own (a stable sort; ids
                // are random, and ordering by them swapped a question and its answer).
                let mut turns: Vec<&&&Value> = mine
                    .iter()
                    .filter(|memory| {
                        memory["kind"] == "episode" && memory["session_id"] == session.as_str()
                    })
                    .collect();
                turns.sort_by_key(|memory| memory["event_time"].as_i64());
                for memory in turns {
                    out.push_str(&format!(
                        "- {}: {}\n",
                        visible(memory["source_role"].as_str().unwrap_or("user")),
                        text(&memory["content"])
                    ));
                }
            }
        }
    }
    out
}
