//! An example third-party extension, written against `mnemo-kernel`'s public API alone.
//!
//! It keeps short per-user notes in memory and shows every role an extension can take:
//! an [`EventHandler`] (a user message starting with `note:` is saved), a [`ToolProvider`]
//! (`add_note`, `search_notes`), a [`ContextProvider`] (notes sharing a word with the prompt) and a
//! [`SchedulerProvider`] (a `notes_digest` job that publishes a `notes.digest` event). Enable it
//! with `[extensions.notes]` in `config.toml`; a host registers it with [`factory`].

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, ContextProvider, ContextRequest, Event, EventHandler, Extension, ExtensionFactory,
    ExtensionSection, JobSpec, KernelContext, SchedulerProvider, ToolError, ToolProvider,
    ToolScope, ToolSpec, TypedEvent, TOPIC_USER_MESSAGE,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// `[extensions.notes]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotesConfig {
    /// When the digest job runs (cron, UTC).
    pub digest_cron: String,
    /// Most notes kept per user; the oldest go first.
    pub max_notes_per_user: usize,
}

impl Default for NotesConfig {
    fn default() -> Self {
        Self {
            digest_cron: "0 3 * * *".to_owned(),
            max_notes_per_user: 1_000,
        }
    }
}

/// Published by the digest job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotesDigested {
    /// Notes held, all users together.
    pub notes: usize,
}

impl TypedEvent for NotesDigested {
    const TOPIC: &'static str = "notes.digest";
}

#[derive(Debug, Clone)]
struct Note {
    id: u64,
    user_id: String,
    text: String,
}

/// The extension.
#[derive(Debug)]
pub struct NotesExtension {
    config: NotesConfig,
    notes: Mutex<Vec<Note>>,
    next_id: Mutex<u64>,
}

/// The factory a host adds to its registry.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: "notes",
        description: "example third-party extension: per-user notes",
        build: |section: &ExtensionSection| {
            let config: NotesConfig = section.parse()?;
            Ok(Arc::new(NotesExtension::new(config)) as Arc<dyn Extension>)
        },
    }
}

impl NotesExtension {
    /// A notes extension with `config`.
    pub fn new(config: NotesConfig) -> Self {
        Self {
            config,
            notes: Mutex::new(Vec::new()),
            next_id: Mutex::new(1),
        }
    }

    fn add(&self, user_id: &str, text: &str) -> u64 {
        let mut next_id = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
        let id = *next_id;
        *next_id += 1;
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        notes.push(Note {
            id,
            user_id: user_id.to_owned(),
            text: text.trim().to_owned(),
        });
        let held = notes.iter().filter(|note| note.user_id == user_id).count();
        if held > self.config.max_notes_per_user {
            if let Some(oldest) = notes.iter().position(|note| note.user_id == user_id) {
                notes.remove(oldest);
            }
        }
        id
    }

    /// The user's notes sharing a word with `query`, best first: (id, text, words matched).
    fn search(&self, user_id: &str, query: &str, limit: usize) -> Vec<(u64, String, usize)> {
        let words = words(query);
        let notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        let mut hits: Vec<(u64, String, usize)> = notes
            .iter()
            .filter(|note| note.user_id == user_id)
            .filter_map(|note| {
                let note_words = crate::words(&note.text);
                let score = words
                    .iter()
                    .filter(|word| note_words.contains(word))
                    .count();
                (score > 0).then(|| (note.id, note.text.clone(), score))
            })
            .collect();
        hits.sort_by(|a, b| b.2.cmp(&a.2).then(b.0.cmp(&a.0)));
        hits.truncate(limit);
        hits
    }
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

#[async_trait]
impl Extension for NotesExtension {
    fn name(&self) -> &str {
        "notes"
    }

    fn context_provider(&self) -> Option<&dyn ContextProvider> {
        Some(self)
    }

    fn tool_provider(&self) -> Option<&dyn ToolProvider> {
        Some(self)
    }

    fn scheduler_provider(&self) -> Option<&dyn SchedulerProvider> {
        Some(self)
    }

    fn event_handler(&self) -> Option<&dyn EventHandler> {
        Some(self)
    }
}

#[async_trait]
impl EventHandler for NotesExtension {
    fn topics(&self) -> Vec<String> {
        vec![TOPIC_USER_MESSAGE.to_owned()]
    }

    async fn handle(&self, _ctx: &KernelContext, event: &Event) -> Result<(), BoxError> {
        let (Some(text), Some(user_id)) = (event.payload.text(), event.user_id.as_deref()) else {
            return Ok(());
        };
        let Some(prefix) = text.get(..5) else {
            return Ok(());
        };
        if prefix.eq_ignore_ascii_case("note:") && !text[5..].trim().is_empty() {
            self.add(user_id, &text[5..]);
        }
        Ok(())
    }
}

#[async_trait]
impl ToolProvider for NotesExtension {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "add_note".to_owned(),
                description: "Save a short note for the current user.".to_owned(),
                parameters: json!({
                    "type": "object",
                    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 2000}},
                    "required": ["text"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: "search_notes".to_owned(),
                description: "Find the current user's notes sharing words with the query."
                    .to_owned(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            },
        ]
    }

    async fn call_tool(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        name: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        match name {
            "add_note" => {
                let text = arguments["text"].as_str().unwrap_or_default();
                if text.trim().is_empty() {
                    return Err(ToolError::invalid(name, "argument `text` is blank"));
                }
                Ok(json!({"id": self.add(&scope.user_id, text)}))
            }
            "search_notes" => {
                let query = arguments["query"].as_str().unwrap_or_default();
                let limit = arguments["limit"].as_u64().unwrap_or(10) as usize;
                let hits = self.search(&scope.user_id, query, limit);
                Ok(Value::Array(
                    hits.into_iter()
                        .map(|(id, content, score)| json!({"id": id, "content": content, "score": score}))
                        .collect(),
                ))
            }
            other => Err(ToolError::UnknownTool(other.to_owned())),
        }
    }
}

#[async_trait]
impl ContextProvider for NotesExtension {
    async fn context(
        &self,
        _ctx: &KernelContext,
        request: &ContextRequest,
    ) -> Result<Option<String>, BoxError> {
        let hits = self.search(&request.user_id, &request.prompt, 5);
        if hits.is_empty() {
            return Ok(None);
        }
        let mut block = String::from("## Notes\n");
        for (_, text, _) in hits {
            block.push_str("- ");
            block.push_str(&text);
            block.push('\n');
        }
        Ok(Some(block))
    }
}

#[async_trait]
impl SchedulerProvider for NotesExtension {
    fn jobs(&self) -> Vec<JobSpec> {
        vec![JobSpec {
            name: "notes_digest".to_owned(),
            cron: self.config.digest_cron.clone(),
            description: "count the notes and publish a notes.digest event".to_owned(),
        }]
    }

    async fn run_job(&self, ctx: &KernelContext, name: &str) -> Result<String, BoxError> {
        if name != "notes_digest" {
            return Err(format!("unknown job `{name}`").into());
        }
        let notes = self.notes.lock().unwrap_or_else(|p| p.into_inner()).len();
        ctx.publish(Event::new(ctx.now(), NotesDigested { notes }.to_payload()?))
            .await?;
        Ok(format!("{notes} notes"))
    }
}
