//! The tools (seed 004's four, plus `search_history`), each name prefixed by `tool_prefix`.

use async_trait::async_trait;
use chrono::{Duration, SecondsFormat};
use mnemo_kernel::{KernelContext, ToolError, ToolProvider, ToolScope, ToolSpec};
use serde_json::{json, Value};

use crate::bm25::{tokenize, Bm25Index};
use crate::config::{MAX_RECALL_DAYS, MAX_SEARCH_LIMIT};
use crate::error::MarkdownError;
use crate::names::MAX_NAME_CHARS;
use crate::workspace::{Entry, MEMORY_FILE};
use crate::MarkdownMemoryExtension;

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

/// A file error as the model should see it: a bad name or content is the caller's to fix.
fn tool_error(tool: &str, error: MarkdownError) -> ToolError {
    match error {
        MarkdownError::InvalidName { .. } | MarkdownError::InvalidContent(_) => {
            ToolError::invalid(tool, error)
        }
        other => ToolError::failed(tool, other),
    }
}

/// A required string argument, trimmed; blank is refused with `why`, a NUL character always.
fn text_argument<'a>(
    tool: &str,
    arguments: &'a Value,
    key: &str,
    why: &str,
) -> Result<&'a str, ToolError> {
    let text = arguments
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim();
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

impl MarkdownMemoryExtension {
    async fn recall(
        &self,
        ctx: &KernelContext,
        user: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<Value, ToolError> {
        let days = arguments
            .get("days")
            .and_then(Value::as_u64)
            .map_or(self.config.recall_days, |days| {
                days.min(u64::from(MAX_RECALL_DAYS)) as u32
            });
        let today = ctx.now().date_naive();
        let from = today - Duration::days(i64::from(days.max(1)) - 1);
        let agent_id = self.config.agent_id.clone();
        let workspace = self
            .open_workspace(Some(user))
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

    async fn remember(
        &self,
        ctx: &KernelContext,
        user: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<Value, ToolError> {
        let content = text_argument(tool, arguments, "content", "say what to remember")?.to_owned();
        let at = ctx.now();
        let agent_id = self.config.agent_id.clone();
        let workspace = self
            .open_workspace(Some(user))
            .map_err(|err| tool_error(tool, err))?;
        let path = crate::blocking(&workspace, move |workspace| {
            workspace.append_daily(&agent_id, at, &content)
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        tracing::debug!(%path, "remembered");
        Ok(json!({"saved": path, "at": at.to_rfc3339_opts(SecondsFormat::Millis, true)}))
    }

    async fn reflect(
        &self,
        ctx: &KernelContext,
        user: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<Value, ToolError> {
        let content = text_argument(
            tool,
            arguments,
            "content",
            "reflect replaces the whole memory file, so pass the complete new memory",
        )?
        .to_owned();
        let bytes = content.len();
        let at = ctx.now();
        let agent_id = self.config.agent_id.clone();
        let workspace = self
            .open_workspace(Some(user))
            .map_err(|err| tool_error(tool, err))?;
        let path = crate::blocking(&workspace, move |workspace| {
            workspace.write_agent_memory(&agent_id, at, &content)
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        tracing::info!(%path, bytes, "agent memory rewritten");
        Ok(json!({"saved": path, "bytes": bytes}))
    }

    async fn learn_fact(
        &self,
        user: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<Value, ToolError> {
        let topic = arguments
            .get("topic")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let content = text_argument(
            tool,
            arguments,
            "content",
            "learn_fact replaces the whole topic file, so pass everything known about the topic",
        )?
        .to_owned();
        let workspace = self
            .open_workspace(Some(user))
            .map_err(|err| tool_error(tool, err))?;
        let written = crate::blocking(&workspace, move |workspace| {
            workspace.write_world(&topic, &content)
        })
        .await
        .map_err(|err| tool_error(tool, err))?;
        tracing::info!(path = %written.path, replaced = written.replaced, "world topic written");
        Ok(json!({"saved": written.path, "topic": written.topic, "replaced": written.replaced}))
    }

    async fn search_history(
        &self,
        user: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<Value, ToolError> {
        let query = text_argument(tool, arguments, "query", "give words to search for")?.to_owned();
        if tokenize(&query).is_empty() {
            return Err(ToolError::invalid(
                tool,
                "argument `query` has no searchable words (very common words and single letters are ignored)",
            ));
        }
        let limit = arguments
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(self.config.search_limit, |limit| {
                (limit as usize).clamp(1, MAX_SEARCH_LIMIT)
            });
        let agent_id = self.config.agent_id.clone();
        let workspace = self
            .open_workspace(Some(user))
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

#[async_trait]
impl ToolProvider for MarkdownMemoryExtension {
    fn tools(&self) -> Vec<ToolSpec> {
        let names = &self.tools;
        let max_content = self.config.max_content_chars;
        vec![
            ToolSpec {
                name: names.recall.clone(),
                description: format!(
                    "Load your memory: the shared world files, the long-term memory, your own \
                     MEMORY.md and the last `days` days of your daily log (default {}), as markdown \
                     sections separated by `---`. Use it at the start of a conversation or when \
                     earlier context would help.",
                    self.config.recall_days
                ),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "days": {"type": "integer", "minimum": 0, "maximum": MAX_RECALL_DAYS,
                                 "description": "Days of daily log to include, today counted; 0 for none."}
                    },
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: names.remember.clone(),
                description: "Append an experience or something learned to today's daily log, \
                              timestamped. Earlier entries are never changed."
                    .to_owned(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "maxLength": max_content,
                                    "description": "What to remember, in a few sentences."}
                    },
                    "required": ["content"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: names.reflect.clone(),
                description: "Rewrite your long-term memory (your MEMORY.md) with curated \
                              learnings. Replaces the whole file: pass the complete new memory (the \
                              previous version is kept in MEMORY.history/)."
                    .to_owned(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "maxLength": max_content,
                                    "description": "The complete new memory, as markdown."}
                    },
                    "required": ["content"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: names.learn_fact.clone(),
                description: "Write shared knowledge about the world under a topic (such as \
                              `people` or `home-network`), replacing what the topic held. Every \
                              agent sees the world files."
                    .to_owned(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "topic": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS,
                                  "description": "A plain topic name; it becomes lowercase letters, digits and dashes."},
                        "content": {"type": "string", "minLength": 1, "maxLength": max_content,
                                    "description": "Everything known about the topic, as markdown."}
                    },
                    "required": ["topic", "content"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: names.search_history.clone(),
                description: "Search the history of past conversations and your daily logs by \
                              keywords; best matches first (BM25 ranking)."
                    .to_owned(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            },
        ]
    }

    async fn call_tool(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        name: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let names = &self.tools;
        let user = scope.user_id.as_str();
        if name == names.recall {
            self.recall(ctx, user, name, &arguments).await
        } else if name == names.remember {
            self.remember(ctx, user, name, &arguments).await
        } else if name == names.reflect {
            self.reflect(ctx, user, name, &arguments).await
        } else if name == names.learn_fact {
            self.learn_fact(user, name, &arguments).await
        } else if name == names.search_history {
            self.search_history(user, name, &arguments).await
        } else {
            Err(ToolError::UnknownTool(name.to_owned()))
        }
    }
}
