//! The tools (seed 004's four, plus `search_history`), each name prefixed by `tool_prefix`;
//! each is a typed [`Tool`] over the shared [`Files`].

use std::sync::Arc;

use chrono::{Duration, SecondsFormat};
use mnemo_kernel::prelude::*;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::bm25::{tokenize, Bm25Index};
use crate::config::{MAX_RECALL_DAYS, MAX_SEARCH_LIMIT};
use crate::error::MarkdownError;
use crate::names::MAX_NAME_CHARS;
use crate::workspace::{Entry, MEMORY_FILE};
use crate::Files;

/// Longest search query, in characters.
const MAX_QUERY_CHARS: usize = 500;
/// Longest entry text returned by `search_history`, in characters.
const MAX_RESULT_CHARS: usize = 2_000;

/// The tool names, with the configured prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolNames {
    pub(crate) recall: String,
    pub(crate) remember: String,
    pub(crate) reflect: String,
    pub(crate) learn_fact: String,
    pub(crate) search_history: String,
}

impl ToolNames {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            recall: format!("{prefix}recall"),
            remember: format!("{prefix}remember"),
            reflect: format!("{prefix}reflect"),
            learn_fact: format!("{prefix}learn_fact"),
            search_history: format!("{prefix}search_history"),
        }
    }
}

/// The five tools under `names`, over `files`.
///
/// # Errors
/// A tool's config limits do not fit its arguments (a bug, reported at start-up).
pub(crate) fn tool_set(files: &Arc<Files>, names: &ToolNames) -> Result<ToolSet, ToolError> {
    let tool = |name: &String| FileTool {
        name: name.clone(),
        files: files.clone(),
    };
    ToolSet::new()
        .with(Recall(tool(&names.recall)))?
        .with(Remember(tool(&names.remember)))?
        .with(Reflect(tool(&names.reflect)))?
        .with(LearnFact(tool(&names.learn_fact)))?
        .with(SearchHistory(tool(&names.search_history)))
}

/// What every tool holds: its (prefixed) name and the files.
struct FileTool {
    name: String,
    files: Arc<Files>,
}

impl FileTool {
    /// The limit of every `content` argument, from config.
    fn content_limit(&self) -> Limits {
        Limits::default().max_chars("content", self.files.config.max_content_chars)
    }
}

/// A file error as the model should see it: a bad name or content is the caller's to fix.
fn tool_error(tool: &str, error: MarkdownError) -> ToolError {
    match error {
        MarkdownError::InvalidName { .. } | MarkdownError::InvalidContent(_) => {
            ToolError::invalid(tool, error)
        }
        other => ToolError::failed(tool, other),
    }
}

/// A required text argument, trimmed; blank is refused with `why`, a NUL character always.
fn checked_text<'a>(tool: &str, key: &str, text: &'a str, why: &str) -> Result<&'a str, ToolError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ToolError::invalid(
            tool,
            format!("argument `{key}` is blank; {why}"),
        ));
    }
    if text.contains('\0') {
        return Err(ToolError::invalid(
            tool,
            format!("argument `{key}` contains a NUL character"),
        ));
    }
    Ok(text)
}

/// One `recall` section: a heading naming the file, then its text.
fn section(title: &str, text: &str) -> String {
    format!("# {title}\n\n{}", text.trim())
}

/// `recall`: the memory files as markdown sections.
struct Recall(FileTool);

/// Arguments of `recall`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    /// Days of daily log to include, today counted; 0 for none.
    #[schemars(range(min = 0, max = MAX_RECALL_DAYS))]
    days: Option<u32>,
}

#[async_trait]
impl Tool for Recall {
    type Args = RecallArgs;

    fn name(&self) -> &str {
        &self.0.name
    }

    fn description(&self) -> String {
        let config = &self.0.files.config;
        let world = if config.per_user {
            "the world files (the shared ones and this user's own topics)"
        } else {
            "the shared world files"
        };
        format!(
            "Load your memory: {world}, the long-term memory, your own MEMORY.md and the last \
             `days` days of your daily log (default {}), as markdown sections separated by \
             `---`. Use it at the start of a conversation or when earlier context would help.",
            config.recall_days
        )
    }

    async fn call(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        args: RecallArgs,
    ) -> Result<Value, ToolError> {
        let tool = self.name();
        let config = &self.0.files.config;
        let days = args
            .days
            .map_or(config.recall_days, |days| days.min(MAX_RECALL_DAYS));
        let today = ctx.now().date_naive();
        let from = today - Duration::days(i64::from(days.max(1)) - 1);
        let agent_id = config.agent_id.clone();
        let workspace = self
            .0
            .files
            .open_workspace(Some(&scope.user_id))
            .map_err(|err| tool_error(tool, err))?;
        let (sections, files) = crate::blocking(&workspace, move |workspace| {
            let mut sections = Vec::new();
            let mut files = Vec::new();
            for (topic, path, text) in workspace.world_files()? {
                if !text.trim().is_empty() {
                    sections.push(section(&format!("World: {topic} ({path})"), &text));
                    files.push(path);
                }
            }
            for (topic, path, text) in workspace.own_world_files()? {
                if !text.trim().is_empty() {
                    sections.push(section(
                        &format!("World: {topic} ({path}, this user's own)"),
                        &text,
                    ));
                    files.push(path);
                }
            }
            let memory = workspace.read_memory()?;
            if !memory.trim().is_empty() {
                sections.push(section(
                    &format!("Long-term memory ({MEMORY_FILE})"),
                    &memory,
                ));
                files.push(MEMORY_FILE.to_owned());
            }
            let agent_memory = workspace.read_agent_memory(&agent_id)?;
            if !agent_memory.trim().is_empty() {
                let path = workspace.agent_memory_file(&agent_id)?;
                sections.push(section(&format!("Agent memory ({path})"), &agent_memory));
                files.push(path);
            }
            if days > 0 {
                for (date, path, text) in workspace.daily_logs(&agent_id, from, today)? {
                    if !text.trim().is_empty() {
                        sections.push(section(&format!("Daily log {date} ({path})"), &text));
                        files.push(path);
                    }
                }
            }
            Ok((sections, files))
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        let content = if sections.is_empty() {
            "No memory yet.".to_owned()
        } else {
            sections.join("\n\n---\n\n")
        };
        Ok(json!({"content": content, "files": files, "days": days}))
    }
}

/// `remember`: appends to today's daily log.
struct Remember(FileTool);

/// Arguments of `remember`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    /// What to remember, in a few sentences.
    #[schemars(length(min = 1))]
    content: String,
}

#[async_trait]
impl Tool for Remember {
    type Args = RememberArgs;

    fn name(&self) -> &str {
        &self.0.name
    }

    fn description(&self) -> String {
        "Append an experience or something learned to today's daily log, timestamped. Earlier \
         entries are never changed."
            .to_owned()
    }

    fn limits(&self) -> Limits {
        self.0.content_limit()
    }

    async fn call(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        args: RememberArgs,
    ) -> Result<Value, ToolError> {
        let tool = self.name();
        let content =
            checked_text(tool, "content", &args.content, "say what to remember")?.to_owned();
        let at = ctx.now();
        let agent_id = self.0.files.config.agent_id.clone();
        let workspace = self
            .0
            .files
            .open_workspace(Some(&scope.user_id))
            .map_err(|err| tool_error(tool, err))?;
        let path = crate::blocking(&workspace, move |workspace| {
            workspace.append_daily(&agent_id, at, &content)
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        tracing::debug!(%path, "remembered");
        Ok(json!({"saved": path, "at": at.to_rfc3339_opts(SecondsFormat::Millis, true)}))
    }
}

/// `reflect`: rewrites the agent's MEMORY.md.
struct Reflect(FileTool);

/// Arguments of `reflect`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReflectArgs {
    /// The complete new memory, as markdown.
    #[schemars(length(min = 1))]
    content: String,
}

#[async_trait]
impl Tool for Reflect {
    type Args = ReflectArgs;

    fn name(&self) -> &str {
        &self.0.name
    }

    fn description(&self) -> String {
        "Rewrite your long-term memory (your MEMORY.md) with curated learnings. Replaces the \
         whole file: pass the complete new memory (the previous version is kept in \
         MEMORY.history/)."
            .to_owned()
    }

    fn limits(&self) -> Limits {
        self.0.content_limit()
    }

    async fn call(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        args: ReflectArgs,
    ) -> Result<Value, ToolError> {
        let tool = self.name();
        let content = checked_text(
            tool,
            "content",
            &args.content,
            "reflect replaces the whole memory file, so pass the complete new memory",
        )?
        .to_owned();
        let bytes = content.len();
        let at = ctx.now();
        let agent_id = self.0.files.config.agent_id.clone();
        let workspace = self
            .0
            .files
            .open_workspace(Some(&scope.user_id))
            .map_err(|err| tool_error(tool, err))?;
        let path = crate::blocking(&workspace, move |workspace| {
            workspace.write_agent_memory(&agent_id, at, &content)
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        tracing::info!(%path, bytes, "agent memory rewritten");
        Ok(json!({"saved": path, "bytes": bytes}))
    }
}

/// `learn_fact`: writes a world topic: the shared `world/` when the config allows it
/// ([`crate::MarkdownMemoryConfig::writes_shared_world`]), else the user's own.
struct LearnFact(FileTool);

/// Arguments of `learn_fact`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LearnFactArgs {
    /// A plain topic name; it becomes lowercase letters, digits and dashes.
    #[schemars(length(min = 1, max = MAX_NAME_CHARS))]
    topic: String,
    /// Everything known about the topic, as markdown.
    #[schemars(length(min = 1))]
    content: String,
}

#[async_trait]
impl Tool for LearnFact {
    type Args = LearnFactArgs;

    fn name(&self) -> &str {
        &self.0.name
    }

    fn description(&self) -> String {
        if self.0.files.config.writes_shared_world() {
            "Write shared knowledge about the world under a topic (such as `people` or \
             `home-network`), replacing what the topic held. The world files are shared: every \
             user and agent sees them."
                .to_owned()
        } else {
            "Write knowledge about the world under a topic (such as `people` or \
             `home-network`), replacing what the topic held. It is kept in this user's own \
             files: only this user's conversations see it, not other users (the shared world \
             files are written by an administrator)."
                .to_owned()
        }
    }

    fn limits(&self) -> Limits {
        self.0.content_limit()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: LearnFactArgs,
    ) -> Result<Value, ToolError> {
        let tool = self.name();
        let topic = args.topic;
        let content = checked_text(
            tool,
            "content",
            &args.content,
            "learn_fact replaces the whole topic file, so pass everything known about the topic",
        )?
        .to_owned();
        let workspace = self
            .0
            .files
            .open_workspace(Some(&scope.user_id))
            .map_err(|err| tool_error(tool, err))?;
        let shared = self.0.files.config.writes_shared_world();
        let written = crate::blocking(&workspace, move |workspace| {
            if shared {
                workspace.write_world(&topic, &content)
            } else {
                workspace.write_own_world(&topic, &content)
            }
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        tracing::info!(
            path = %written.path,
            replaced = written.replaced,
            shared = written.shared,
            "world topic written"
        );
        Ok(json!({
            "saved": written.path,
            "topic": written.topic,
            "replaced": written.replaced,
            "shared": written.shared,
        }))
    }
}

/// `search_history`: BM25 over past conversations and daily logs.
struct SearchHistory(FileTool);

/// Arguments of `search_history`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchHistoryArgs {
    #[schemars(length(min = 1, max = MAX_QUERY_CHARS))]
    query: String,
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT))]
    limit: Option<usize>,
}

#[async_trait]
impl Tool for SearchHistory {
    type Args = SearchHistoryArgs;

    fn name(&self) -> &str {
        &self.0.name
    }

    fn description(&self) -> String {
        "Search the history of past conversations and your daily logs by keywords; best matches \
         first (BM25 ranking)."
            .to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: SearchHistoryArgs,
    ) -> Result<Value, ToolError> {
        let tool = self.name();
        let config = &self.0.files.config;
        let query =
            checked_text(tool, "query", &args.query, "give words to search for")?.to_owned();
        if tokenize(&query).is_empty() {
            return Err(ToolError::invalid(
                tool,
                "argument `query` has no searchable words (very common words and single letters are ignored)",
            ));
        }
        let limit = args.limit.map_or(config.search_limit, |limit| {
            limit.clamp(1, MAX_SEARCH_LIMIT)
        });
        let agent_id = config.agent_id.clone();
        let workspace = self
            .0
            .files
            .open_workspace(Some(&scope.user_id))
            .map_err(|err| tool_error(tool, err))?;
        let results = crate::blocking(&workspace, move |workspace| {
            let mut entries: Vec<Entry> = workspace.history_entries()?;
            entries.extend(workspace.daily_entries(&agent_id)?);
            // Newest first, so that equal scores favour recent entries.
            entries.sort_by_key(|entry| std::cmp::Reverse(entry.at));
            let index = Bm25Index::new(entries.iter().map(|entry| entry.text.as_str()));
            let results: Vec<Value> = index
                .search(&query, limit)
                .into_iter()
                .filter_map(|hit| {
                    let entry = entries.get(hit.doc)?;
                    Some(json!({
                        "content": cut_text(&entry.text),
                        "source": entry.source,
                        "at": entry.at.map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true)),
                        "score": (hit.score * 1000.0).round() / 1000.0,
                    }))
                })
                .collect();
            Ok(results)
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        Ok(Value::Array(results))
    }
}

/// An entry's text cut to [`MAX_RESULT_CHARS`] characters, line breaks kept.
fn cut_text(text: &str) -> String {
    match text.char_indices().nth(MAX_RESULT_CHARS) {
        Some((cut, _)) => format!("{}… (cut; the whole entry is in the file)", &text[..cut]),
        None => text.to_owned(),
    }
}
