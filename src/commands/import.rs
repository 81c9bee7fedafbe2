//! `mnemo import` and `mnemo ingest`: conversation events (and an export's rows) read line by
//! line into the store, each stored once however often it is sent.

use std::io::Write;

use anyhow::{bail, Context as _};
use mnemo_devtools::progress::Progress;
use mnemo_kernel::host::Config;
use serde_json::{json, Value};

use super::{memory_service, start};

/// `mnemo import`: conversation events (as in replay) or an export, idempotent: events by their
/// id, export rows by their key, so an import killed half-way and run again stores everything
/// exactly once.
///
/// Each event is stored directly (as `ingest` does), so that an event the store refuses is a
/// problem named by its line; only an event stored now is then published to the other
/// extensions. One stored before, or stored and then forgotten, counts as already present and is
/// not published again, so the markdown mirror gets neither a second copy nor a forgotten text
/// back. An event without an `id` gets one derived from its content ([`content_event_id`]).
pub(crate) async fn import(config: Config, path: &std::path::Path) -> anyhow::Result<bool> {
    let file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let kernel = start(config).await?;
    let service = memory_service(&kernel)?;
    let limit = service.config().max_event_bytes;
    let mut reader = tokio::io::BufReader::new(file);
    let mut counts = ImportCounts::default();
    let mut number = 0_u64;
    let progress = Progress::new(None, "{spinner} mnemo import: {pos} lines read ({elapsed})");
    loop {
        let line = match crate::input::next_line(&mut reader, limit).await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                kernel.shutdown().await;
                bail!("{}:{}: cannot read: {error}", path.display(), number + 1);
            }
        };
        number += 1;
        let problem = |text: &dyn std::fmt::Display| {
            progress.eprintln(&format!("mnemo: {}:{number}: {text}", path.display()));
        };
        let line = match line.into_text(limit) {
            Ok(line) => line,
            Err(error) => {
                problem(&error);
                counts.problems += 1;
                continue;
            }
        };
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let value: Value = match serde_json::from_str(trimmed) {
            Ok(value) => value,
            Err(error) => {
                problem(&format_args!("not JSON: {error}"));
                counts.problems += 1;
                continue;
            }
        };
        match value["type"].as_str() {
            Some("user_message") | Some("agent_response") => {
                let event = match mnemo_kernel::ConversationEvent::from_value(value) {
                    Ok(event) => event,
                    Err(error) => {
                        problem(&error);
                        counts.problems += 1;
                        continue;
                    }
                };
                let event = match event.id.as_deref() {
                    Some(id) if id.trim().is_empty() => {
                        problem(&"the event's `id` is empty; give it an id or leave `id` out");
                        counts.problems += 1;
                        continue;
                    }
                    Some(_) => event.into_event(),
                    None => {
                        let id = mnemo_memory::content_event_id(&event);
                        let mut event = event.into_event();
                        event.id = id;
                        event
                    }
                };
                // Stored without announcing the sessions it closes: their consolidation is
                // left to the scheduled job, not done inline while the file is read.
                match service.import(&event).await {
                    Ok(Some(_)) => {
                        counts.events += 1;
                        // The others (the markdown mirror) take their copy; memory has it.
                        if let Err(error) = kernel.publish_except(event, mnemo_memory::NAME).await {
                            tracing::warn!(%error, "a stored event was not passed on to the other extensions");
                        }
                    }
                    Ok(None) => counts.events_present += 1,
                    Err(error) => {
                        problem(&error);
                        counts.problems += 1;
                    }
                }
            }
            Some(table) => match service.import_row(table, &value["row"]).await {
                Ok(true) => counts.rows += 1,
                Ok(false) => counts.rows_present += 1,
                Err(error) => {
                    problem(&error);
                    counts.problems += 1;
                }
            },
            None => {
                problem(&"no `type`");
                counts.problems += 1;
            }
        }
        let read = counts.lines();
        if progress.shown() {
            progress.set(read);
        } else if read % 1_000 == 0 && read > 0 {
            eprintln!("mnemo: import: {read} lines read");
        }
    }
    drop(progress);
    kernel.settle().await;
    kernel.shutdown().await;
    println!("{counts}");
    Ok(counts.problems == 0)
}

/// What `mnemo import` did, line by line.
#[derive(Debug, Default)]
struct ImportCounts {
    /// Conversation events stored now.
    events: u64,
    /// Conversation events stored before (or stored and forgotten since).
    events_present: u64,
    /// Export rows stored now.
    rows: u64,
    /// Export rows already in the store.
    rows_present: u64,
    /// Lines refused.
    problems: u64,
}

impl ImportCounts {
    fn lines(&self) -> u64 {
        self.events + self.events_present + self.rows + self.rows_present + self.problems
    }
}

impl std::fmt::Display for ImportCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "imported {} conversation events ({} already present), {} rows ({} already present), {} problems",
            self.events, self.events_present, self.rows, self.rows_present, self.problems
        )
    }
}

/// `mnemo ingest`: stores the conversation events read from standard input (JSONL in the wire
/// format, one event per line, each with an `id`) and prints `{"ack": ID, "memory_id": ..}` on
/// standard output once an event is committed to disk; `memory_id` is null when the event was
/// already stored (events are deduplicated by id, so a producer that resends what it has no
/// acknowledgement for stores each event exactly once). Each stored event is then published
/// to the other extensions, as `import` does. A bad line gets `{"error": ..., "line": N}`, is
/// not stored, and the command goes on; it ends with a failure status if any line was bad.
pub(crate) async fn ingest(config: Config) -> anyhow::Result<bool> {
    let kernel = start(config).await?;
    let service = memory_service(&kernel)?;
    let limit = service.config().max_event_bytes;
    let mut reader = tokio::io::BufReader::new(tokio::io::stdin());
    let mut stdout = std::io::stdout();
    let (mut number, mut problems) = (0_u64, 0_u64);
    let outcome = loop {
        let line = match crate::input::next_line(&mut reader, limit).await {
            Ok(Some(line)) => line.into_text(limit),
            Ok(None) => break Ok(()),
            Err(error) => break Err(anyhow::anyhow!("stdin:{}: {error}", number + 1)),
        };
        number += 1;
        if let Ok(text) = &line {
            let trimmed = text.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
        }
        let event = line
            .and_then(|text| {
                serde_json::from_str::<Value>(text.trim())
                    .map_err(|error| format!("not JSON: {error}"))
            })
            .and_then(|value| {
                mnemo_kernel::ConversationEvent::from_value(value)
                    .map_err(|error| error.to_string())
            })
            .and_then(|event| match event.id.as_deref() {
                Some(id) if !id.trim().is_empty() => Ok(event),
                _ => Err(
                    "the event has no `id`; ingest needs one to acknowledge it and store it once"
                        .to_owned(),
                ),
            });
        let reply = match event {
            Ok(event) => {
                let event = event.into_event();
                match service.ingest(&event).await {
                    Ok(memory_id) => {
                        let reply = json!({"ack": event.id, "memory_id": memory_id});
                        if memory_id.is_some() {
                            if let Err(error) =
                                kernel.publish_except(event, mnemo_memory::NAME).await
                            {
                                tracing::warn!(%error, "a stored event was not passed on to the other extensions");
                            }
                        }
                        reply
                    }
                    Err(error) => json!({"error": error.to_string(), "line": number}),
                }
            }
            Err(error) => json!({"error": error, "line": number}),
        };
        if reply.get("error").is_some() {
            problems += 1;
            eprintln!(
                "mnemo: stdin:{number}: {}",
                reply["error"].as_str().unwrap_or_default()
            );
        }
        if let Err(error) = writeln!(stdout, "{reply}").and_then(|()| stdout.flush()) {
            break Err(anyhow::anyhow!("cannot write the acknowledgement: {error}"));
        }
    };
    kernel.settle().await;
    kernel.shutdown().await;
    outcome?;
    Ok(problems == 0)
}
