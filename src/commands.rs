//! The memory commands of the `mnemo` binary: `chat`, `remember`, `search`, `forget`, `stats`.
//!
//! Here: how a command starts its kernel, the commands on single memories, and the store's
//! counts, checks and reindexing; `chat`, `export`, and `import` with `ingest` are modules of
//! their own.

use std::io::Write;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use mnemo_devtools::progress::Progress;
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::ToolScope;
use mnemo_memory::{ForgetMode, MemoryKind, MemoryService, SearchHit, SearchRequest};
use mnemo_server::SamplingLlm;
use serde_json::{json, Value};

mod chat;
mod export;
mod import;

pub(crate) use chat::chat;
pub(crate) use export::export;
pub(crate) use import::{import, ingest};

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
        caller: mnemo_kernel::ToolCaller::Client,
    }
}

pub(crate) fn memory_service(kernel: &Kernel) -> anyhow::Result<Arc<MemoryService>> {
    kernel
        .context()
        .services()
        .get::<MemoryService>()
        .context("the memory extension is not enabled in the configuration")
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

/// `mnemo search`: hybrid search as the user would get it, the request the tools and
/// `/v1/search` build ([`SearchRequest::for_caller`]).
pub(crate) async fn search(
    config: Config,
    query: &str,
    user: &str,
    chat: Option<&str>,
    kind: Option<MemoryKind>,
    limit: Option<usize>,
    json_output: bool,
) -> anyhow::Result<bool> {
    let kernel = start(config).await?;
    let result = search_in(&kernel, query, user, chat, kind, limit).await;
    kernel.shutdown().await;
    let hits = result?;
    let mut stdout = std::io::stdout().lock();
    let written = if json_output {
        let hits = Value::Array(hits.iter().map(SearchHit::summary).collect());
        writeln!(stdout, "{hits}")
    } else {
        let mut lines = Vec::with_capacity(hits.len().max(1));
        if hits.is_empty() {
            lines.push("no results".to_owned());
        }
        for hit in &hits {
            let mut held = match &hit.memory.quarantine {
                Some(quarantine) => format!("[quarantined: {}] ", quarantine.reason),
                None => String::new(),
            };
            // A model's words say so, as in the agent's context.
            if let Some(mark) = hit.memory.origin.context_mark() {
                held.push_str(&format!("[{mark}] "));
            }
            lines.push(format!(
                "{:.4}  {:<22} {:<10} {held}{}",
                hit.score,
                visible(&hit.memory.id),
                hit.memory.kind.as_str(),
                visible(&hit.memory.content)
            ));
        }
        lines.iter().try_for_each(|line| writeln!(stdout, "{line}"))
    };
    unless_reader_left(written.and_then(|()| stdout.flush()))?;
    Ok(true)
}

/// The search of `mnemo search` on a started kernel; `limit` is checked against the store's
/// `max_search_limit`.
async fn search_in(
    kernel: &Kernel,
    query: &str,
    user: &str,
    chat: Option<&str>,
    kind: Option<MemoryKind>,
    limit: Option<usize>,
) -> anyhow::Result<Vec<SearchHit>> {
    let service = memory_service(kernel)?;
    let config = service.config();
    let limit = limit.unwrap_or(config.search_limit);
    if !(1..=config.max_search_limit).contains(&limit) {
        bail!(
            "`--limit` must be 1 to {} (`max_search_limit`), not {limit}",
            config.max_search_limit
        );
    }
    let request = SearchRequest {
        kinds: kind.into_iter().collect(),
        ..SearchRequest::for_caller(query, user, chat, limit)
    };
    Ok(service.search(&request).await?)
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

/// `mnemo forget`: forgets a memory by id, with what was derived from it, and prints the
/// receipt.
pub(crate) async fn forget(
    config: Config,
    id: &str,
    purge: bool,
    json_output: bool,
) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let softly = !purge && service.config().forget == ForgetMode::Soft;
    let result = service
        .forget_with_lineage(None, &[id.to_owned()], softly)
        .await;
    // Extensions with their own copies (the markdown mirror) act on the announcement. Only the
    // bus is waited for: `Kernel::settle` would also run the indexer over its whole queue.
    kernel.context().router().settle().await;
    kernel.shutdown().await;
    let receipt = result?;
    if receipt.removed.is_empty() {
        if softly {
            bail!("no active memory `{id}` (a soft-deleted one is removed with --purge)");
        }
        bail!("no memory `{id}`");
    }
    if json_output {
        println!("{}", serde_json::to_string_pretty(&receipt)?);
    } else if softly {
        println!(
            "forgot {id}: soft-deleted (forget = \"soft\"); `mnemo restore {id}` brings it back, `mnemo forget {id} --purge` removes it for good"
        );
        print_receipt(&receipt);
    } else {
        println!("forgot {id}: removed for good, with what was derived from it");
        print_receipt(&receipt);
    }
    Ok(true)
}

/// A receipt as lines for a person: what was removed and changed, by kind and id, and the
/// artefacts that went with them.
fn print_receipt(receipt: &mnemo_memory::ForgetReceipt) {
    println!("receipt {} ({}):", receipt.id, receipt.action);
    for entry in &receipt.removed {
        println!("  removed {} {} ({})", entry.kind, entry.id, entry.why);
    }
    for entry in &receipt.changed {
        if entry.lost_sources.is_empty() {
            println!("  changed {} {} ({})", entry.kind, entry.id, entry.why);
        } else {
            let lost = entry.lost_sources.join(", ");
            println!(
                "  changed {} {} ({}: {lost})",
                entry.kind, entry.id, entry.why
            );
        }
    }
    let artefacts: Vec<String> = receipt
        .artefacts
        .iter()
        .map(|(name, count)| format!("{name} {count}"))
        .collect();
    println!("  with: {}", artefacts.join(", "));
}

/// `mnemo restore`: brings back a soft-deleted memory.
pub(crate) async fn restore(config: Config, id: &str) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let result = service.restore(id).await;
    kernel.shutdown().await;
    let restoration = result?;
    if restoration.restored.is_empty() {
        bail!("no soft-deleted memory `{id}`")
    }
    println!("restored {id}: active again; the indexer gives it its vector");
    for other in restoration.restored.iter().filter(|other| *other != id) {
        println!("  restored {other} (its forget took it with {id})");
    }
    for fact in &restoration.sources_back {
        println!("  sources back: {fact} (what its forget took from its provenance)");
    }
    Ok(true)
}

/// `mnemo release`: lifts a quarantined memory's hold, as an admin.
pub(crate) async fn release(config: Config, id: &str) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let result = service.release(None, id).await;
    kernel.shutdown().await;
    let released = result?;
    println!(
        "released {id} ({} memory of {}): it may be put into a context again",
        released.kind.as_str(),
        released.user_id.as_deref().unwrap_or("no user")
    );
    Ok(true)
}

/// `mnemo forget-user`: removes everything stored about one user.
pub(crate) async fn forget_user(config: Config, user: &str) -> anyhow::Result<bool> {
    let kernel = start_for_store(config).await?;
    let service = memory_service(&kernel)?;
    let result = service.erase_user(user).await;
    kernel.context().router().settle().await;
    kernel.shutdown().await;
    let receipt = result?;
    let memories = receipt
        .removed
        .iter()
        .filter(|entry| entry.kind != "entity")
        .count();
    println!("erased user {user}: {memories} memories, with their entities, people, sessions and recorded events; their earlier receipts went too");
    println!(
        "receipt {}: {} memories and entities removed",
        receipt.id,
        receipt.removed.len()
    );
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
        "faded_facts": stats.faded_facts,
        "entities": stats.entities,
        "pending_index": stats.pending_index,
        "latest": stats.latest.map(|time| time.to_rfc3339()),
    });
    if json_output {
        println!("{value}");
    } else {
        println!(
            "episodes {}, facts {}, faded facts {}, reflections {}, entities {}, waiting for a vector {}, newest {}",
            stats.episodes,
            stats.facts,
            stats.faded_facts,
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
