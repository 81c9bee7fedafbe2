//! The memory commands of the `mnemo` binary: `chat`, `remember`, `search`, `forget`, `stats`.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use anyhow::{bail, Context as _};
use mnemo_devtools::progress::Progress;
use mnemo_kernel::host::{Config, Kernel, TurnInput};
use mnemo_kernel::{ChatMessage, ToolScope};
use mnemo_memory::MemoryService;
use mnemo_server::SamplingLlm;
use serde_json::{json, Value};

/// Starts a kernel on the system clock with the built-in extensions.
pub(crate) async fn start(config: Config) -> anyhow::Result<Kernel> {
    Ok(Kernel::builder(mnemo_host::builtin_extensions(), config)
        .start()
        .await?)
}

/// Starts a kernel for an MCP server (`mnemo mcp`, `mnemo serve`): when no `[llm]` is
/// configured, its model is the connected MCP clients' own, through sampling; the returned
/// [`SamplingLlm`] is where the server registers them.
pub(crate) async fn start_serving(
    config: Config,
) -> anyhow::Result<(Kernel, Option<Arc<SamplingLlm>>)> {
    let sampling =
        (config.llm.provider == mnemo_kernel::host::LlmProvider::None).then(SamplingLlm::new);
    let mut builder = Kernel::builder(mnemo_host::builtin_extensions(), config);
    if let Some(sampling) = &sampling {
        builder = builder.llm(sampling.clone());
    }
    Ok((builder.start().await?, sampling))
}

/// Starts a kernel for `remember` and `search`, which run memory's own tools: every one of
/// them, whichever profile the model is offered (`[extensions.memory] tools`).
async fn start_with_every_memory_tool(mut config: Config) -> anyhow::Result<Kernel> {
    if config.extension("memory").is_some() {
        config.set_extension_key("memory", "tools", toml::Value::String("all".to_owned()));
    }
    start(config).await
}

/// Starts a kernel for a command that only reads or deletes what is stored (`stats`, `check`,
/// `export`, `forget`, `forget-user`, `jobs list`, `jobs retry`): the extensions as configured,
/// so that those with their own copies still follow a deletion, but without loading the
/// embedding model, and without the scheduler, so that no job starts while it runs.
pub(crate) async fn start_for_store(config: Config) -> anyhow::Result<Kernel> {
    Ok(Kernel::builder(mnemo_host::store_only_extensions(), config)
        .without_scheduler()
        .start()
        .await?)
}

fn scope(kernel: &Kernel, user: &str, chat: Option<&str>, session: Option<String>) -> ToolScope {
    ToolScope {
        user_id: user.to_owned(),
        session_id: session,
        chat_id: chat.map(str::to_owned),
        at: kernel.context().now(),
    }
}

pub(crate) fn memory_service(kernel: &Kernel) -> anyhow::Result<Arc<MemoryService>> {
    kernel
        .context()
        .services()
        .get::<MemoryService>()
        .context("the memory extension is not enabled in the configuration")
}

/// A session id that differs from every earlier one: the start time in microseconds.
fn new_session_id() -> String {
    format!("chat-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%6f"))
}

/// `mnemo chat`: an interactive agent on the configured LLM, memory context and tools included.
/// `/new` starts a new session; an empty line or end of input quits.
pub(crate) async fn chat(
    config: Config,
    user: &str,
    chat_id: Option<&str>,
) -> anyhow::Result<bool> {
    if config.llm.provider == mnemo_kernel::host::LlmProvider::None {
        bail!(
            "no LLM is configured: set [llm] provider = \"openai\" with base_url and model in config.toml, \
             or MNEMO_LLM_BASE_URL and MNEMO_LLM_MODEL (and MNEMO_LLM_API_KEY if the server needs one)"
        );
    }
    let kernel = start(config).await?;
    let mut session = new_session_id();
    let mut history: Vec<ChatMessage> = Vec::new();
    let stdin = std::io::stdin();
    // A prompt and a sign of activity only for a person at a terminal; piped input and output
    // stay clean for scripts.
    let prompt = stdin.is_terminal();
    let thinking = std::io::stderr().is_terminal();
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "mnemo chat as {user} (session {session}); /new starts a new session, an empty line quits."
    )?;
    let mut ok = true;
    let mut lines = stdin.lock().lines();
    loop {
        if prompt {
            write!(stdout, "> ")?;
            stdout.flush()?;
        }
        let Some(line) = lines.next() else {
            break;
        };
        let line = line.context("reading standard input")?;
        let text = line.trim();
        if text.is_empty() {
            break;
        }
        if text == "/new" {
            // Published like any message, so extensions that act on /new (markdown memory) do.
            let event = mnemo_kernel::Event::new(
                kernel.context().now(),
                mnemo_kernel::EventPayload::UserMessage {
                    text: "/new".to_owned(),
                },
            )
            .with_scope(
                Some(session.clone()),
                Some(user.to_owned()),
                chat_id.map(str::to_owned),
            );
            kernel.publish(event).await?;
            kernel.context().router().settle().await;
            session = new_session_id();
            history.clear();
            writeln!(stdout, "(new session {session})")?;
            continue;
        }
        let input = TurnInput {
            user_id: user.to_owned(),
            session_id: session.clone(),
            chat_id: chat_id.map(str::to_owned),
            text: text.to_owned(),
        };
        if thinking {
            eprint!("thinking…");
        }
        let result = kernel.run_turn(&input, &history).await;
        if thinking {
            // Erases the sign: back to the line's start, clear to its end.
            eprint!("\r\x1b[K");
        }
        match result {
            Ok(outcome) => {
                show_tool_calls(&mut stdout, &outcome.tool_calls)?;
                writeln!(stdout, "{}", outcome.reply)?;
                history.push(ChatMessage::user(text));
                history.push(ChatMessage::assistant(outcome.reply));
            }
            Err(error) => {
                // What the tools did before the failure stands (facts saved, say): show it.
                if let mnemo_kernel::KernelError::TurnFailedAfterTools { tool_calls, .. } = &error {
                    show_tool_calls(&mut stdout, tool_calls)?;
                }
                stdout.flush()?;
                eprintln!("mnemo: {error}");
                ok = false;
            }
        }
        stdout.flush()?;
        kernel.context().router().settle().await;
    }
    kernel.shutdown().await;
    Ok(ok)
}

/// One line per tool call of a chat turn: its name, arguments and whether it worked.
fn show_tool_calls(
    out: &mut impl Write,
    tool_calls: &[(
        mnemo_kernel::LlmToolCall,
        Result<Value, mnemo_kernel::ToolError>,
    )],
) -> std::io::Result<()> {
    for (call, result) in tool_calls {
        let shown = match result {
            Ok(_) => "ok".to_owned(),
            Err(error) => format!("error: {error}"),
        };
        writeln!(out, "  [{} {}: {shown}]", call.name, call.arguments)?;
    }
    Ok(())
}

/// `mnemo remember`: stores one fact for a user through the `remember` tool. Said in a chat,
/// it belongs to that chat (the user's own there, or everyone's there with `shared`).
pub(crate) async fn remember(
    config: Config,
    text: &str,
    user: &str,
    subjects: &[String],
    chat: Option<&str>,
    shared: bool,
    json_output: bool,
) -> anyhow::Result<bool> {
    let kernel = start_with_every_memory_tool(config).await?;
    let result = kernel
        .call_tool(
            &scope(&kernel, user, chat, None),
            "remember",
            json!({"content": text, "subjects": subjects, "shared": shared}),
        )
        .await;
    kernel.settle().await;
    kernel.shutdown().await;
    let value = result?;
    let saved = &value["saved"][0];
    if json_output {
        println!("{saved}");
    } else {
        println!("remembered {}", saved["id"].as_str().unwrap_or_default());
    }
    Ok(true)
}

/// `mnemo search`: hybrid search as the user would get it.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn search(
    config: Config,
    query: &str,
    user: &str,
    chat: Option<&str>,
    kind: Option<&str>,
    limit: Option<usize>,
    json_output: bool,
) -> anyhow::Result<bool> {
    let kernel = start_with_every_memory_tool(config).await?;
    let mut arguments = json!({"query": query});
    if let Some(kind) = kind {
        arguments["kind"] = json!(kind);
    }
    if let Some(limit) = limit {
        arguments["limit"] = json!(limit);
    }
    let result = kernel
        .call_tool(
            &scope(&kernel, user, chat, None),
            "search_memory",
            arguments,
        )
        .await;
    kernel.shutdown().await;
    let hits = result?;
    let mut stdout = std::io::stdout().lock();
    let written = if json_output {
        writeln!(stdout, "{hits}")
    } else {
        let hits = hits.as_array().cloned().unwrap_or_default();
        let mut lines = Vec::with_capacity(hits.len().max(1));
        if hits.is_empty() {
            lines.push("no results".to_owned());
        }
        for hit in hits {
            lines.push(format!(
                "{:.4}  {:<22} {:<10} {}",
                hit["score"].as_f64().unwrap_or_default(),
                visible(hit["id"].as_str().unwrap_or_default()),
                visible(hit["kind"].as_str().unwrap_or_default()),
                visible(hit["content"].as_str().unwrap_or_default())
            ));
        }
        lines.iter().try_for_each(|line| writeln!(stdout, "{line}"))
    };
    unless_reader_left(written.and_then(|()| stdout.flush()))?;
    Ok(true)
}

/// A write to standard output, where a reader that stopped reading (`mnemo export | head`)
/// is no error: it has what it wanted, so the command ends quietly and successfully.
fn unless_reader_left(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// `text` made safe for a terminal: every control character but tab is shown as an escape
/// (`\n`, `\r`, `\e` for ESC, `\u{..}` for the others), so that stored text cannot move the
/// cursor, recolour or retitle the terminal, or break a one-line listing.
pub(crate) fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => shown.push(c),
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\u{1b}' => shown.push_str("\\e"),
            c if c.is_control() => shown.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => shown.push(c),
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// `mnemo forget`: removes a memory by id from the store, its indexes and caches.
pub(crate) async fn forget(config: Config, id: &str) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let result = service.purge(&[id.to_owned()]).await;
    // Extensions with their own copies (the markdown mirror) act on the announcement. Only the
    // bus is waited for: `Kernel::settle` would also run the indexer over its whole queue.
    kernel.context().router().settle().await;
    kernel.shutdown().await;
    if result? == 1 {
        println!(
            "forgot {id}: removed with its full-text entry, vector, entity links and cached vector"
        );
        Ok(true)
    } else {
        bail!("no memory `{id}`")
    }
}

/// `mnemo forget-user`: removes everything stored about one user.
pub(crate) async fn forget_user(config: Config, user: &str) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let result = service.erase_user(user).await;
    kernel.context().router().settle().await;
    kernel.shutdown().await;
    let removed = result?;
    println!("erased user {user}: {removed} memories, with their entities, people, sessions and recorded events");
    Ok(true)
}

/// `mnemo check`: the store's integrity report (database file, full-text index, vector index
/// and queue, recorded events); fails when anything is inconsistent.
pub(crate) async fn check(config: Config, json_output: bool) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let report = service.check_integrity().await;
    kernel.shutdown().await;
    let report = report?;
    let problems = report.problems();
    if json_output {
        let mut value = serde_json::to_value(&report)?;
        value["problems"] = json!(problems);
        println!("{value}");
    } else {
        println!(
            "{} memories ({} active), {} vectors, {} queued for the indexer",
            report.memories,
            report.active,
            report
                .vectors
                .map_or_else(|| "no".to_owned(), |count| count.to_string()),
            report.queued
        );
        for problem in &problems {
            println!("problem: {problem}");
        }
        if problems.is_empty() {
            println!("ok");
        }
    }
    Ok(problems.is_empty())
}

/// `mnemo stats`: counts over every user.
pub(crate) async fn stats(config: Config, json_output: bool) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let stats = service.stats(None).await;
    kernel.shutdown().await;
    let stats = stats?;
    let value: Value = json!({
        "counts": {"episode": stats.episodes, "fact": stats.facts, "reflection": stats.reflections},
        "entities": stats.entities,
        "pending_index": stats.pending_index,
        "latest": stats.latest.map(|time| time.to_rfc3339()),
    });
    if json_output {
        println!("{value}");
    } else {
        println!(
            "episodes {}, facts {}, reflections {}, entities {}, waiting for a vector {}, newest {}",
            stats.episodes,
            stats.facts,
            stats.reflections,
            stats.entities,
            stats.pending_index,
            stats
                .latest
                .map_or_else(|| "-".to_owned(), |time| time.to_rfc3339())
        );
    }
    Ok(true)
}

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
                out.push_str(&format!("\n#### Session {}\n", visible(&session)));
                // In the order they were said (ids are hashes); the id decides between turns
                // of the same second, so that the order is the same on every export.
                let mut turns: Vec<&&&Value> = mine
                    .iter()
                    .filter(|memory| {
                        memory["kind"] == "episode" && memory["session_id"] == session.as_str()
                    })
                    .collect();
                turns.sort_by(|a, b| {
                    (a["event_time"].as_i64(), a["id"].as_str())
                        .cmp(&(b["event_time"].as_i64(), b["id"].as_str()))
                });
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

/// `mnemo reindex`: re-embeds memories after a model change, batch by batch, with progress.
/// Stopped half-way, it resumes where it was when run again.
///
/// The background indexer (this process's, or another mnemo process's on the same store) takes
/// batches off the same queue meanwhile; the report counts what left the queue, and says how
/// much of it this command embedded itself.
pub(crate) async fn reindex(config: Config, all: bool) -> anyhow::Result<bool> {
    let kernel = start(config).await?;
    let service = memory_service(&kernel)?;
    let total = match service.prepare_reindex(all).await {
        Ok(total) => total,
        Err(error) => {
            kernel.shutdown().await;
            return Err(error.into());
        }
    };
    let started = std::time::Instant::now();
    let mut done: i64 = 0;
    let mut stderr = std::io::stderr();
    let progress = Progress::new(
        Some(u64::try_from(total).unwrap_or_default()),
        "mnemo reindex: {wide_bar} {pos}/{len} memories ({elapsed}, {eta} left)",
    );
    let outcome = loop {
        match service.index_one_batch().await {
            Ok(0) => break Ok(()),
            Ok(taken) => {
                done += taken as i64;
                if progress.shown() {
                    progress.set(u64::try_from(done).unwrap_or_default());
                } else {
                    let _ = write!(
                        stderr,
                        "\rmnemo reindex: {done}/{total} memories ({:.0}/s)",
                        done as f64 / started.elapsed().as_secs_f64().max(1e-3)
                    );
                }
            }
            Err(error) => break Err(error),
        }
    };
    if !progress.shown() {
        let _ = writeln!(stderr);
    }
    drop(progress);
    let left = service.pending_index().await;
    kernel.shutdown().await;
    outcome?;
    let left = left?;
    // What others added to the queue meanwhile can make `left` larger than `total - embedded`;
    // what this command took is part of what left the queue in any case.
    let embedded = (total - left).max(done);
    println!(
        "reindexed {embedded} memories in {:.1} s ({done} by this command, {} by the background indexer meanwhile)",
        started.elapsed().as_secs_f64(),
        embedded - done
    );
    Ok(true)
}
