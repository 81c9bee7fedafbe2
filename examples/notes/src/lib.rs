//! An example third-party extension, written against `mnemo-kernel`'s public API alone.
//!
//! It keeps short per-user notes in memory and shows every role an extension can take:
//! an [`EventHandler`] (a user message starting with `note:` is saved), typed [`Tool`]s in a
//! [`ToolSet`] (`add_note`, `search_notes`), a [`ContextProvider`] (notes sharing a word with the prompt) and a
//! [`SchedulerProvider`] (a `notes_digest` job that publishes a `notes.digest` event). Enable it
//! with `[extensions.notes]` in `config.toml`; a host registers it with [`factory`].

use std::sync::{Arc, Mutex};

use mnemo_kernel::prelude::*;
use mnemo_kernel::TOPIC_USER_MESSAGE;
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

impl ValidateConfig for NotesConfig {
    fn problems(&self) -> Vec<String> {
        if self.max_notes_per_user == 0 {
            return vec!["key `max_notes_per_user`: must be at least 1".to_owned()];
        }
        Vec::new()
    }
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
    notebook: Arc<Notebook>,
    tools: ToolSet,
}

/// Every user's notes, shared by the extension and its tools.
#[derive(Debug)]
struct Notebook {
    max_notes_per_user: usize,
    notes: Mutex<Vec<Note>>,
    next_id: Mutex<u64>,
}

/// The factory a host adds to its registry.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: "notes",
        description: "example third-party extension: per-user notes",
        build: |section: &ExtensionSection| {
            let config: NotesConfig = section.parse_checked()?;
            let extension = NotesExtension::new(config)
                .map_err(|error| ConfigError::new(section.file.clone(), error.to_string()))?;
            Ok(Arc::new(extension) as Arc<dyn Extension>)
        },
    }
}

impl NotesExtension {
    /// A notes extension with `config`.
    ///
    /// # Errors
    /// A tool whose limits do not fit its arguments (a bug, reported at start-up).
    pub fn new(config: NotesConfig) -> Result<Self, ToolError> {
        let notebook = Arc::new(Notebook {
            max_notes_per_user: config.max_notes_per_user,
            notes: Mutex::new(Vec::new()),
            next_id: Mutex::new(1),
        });
        let tools = ToolSet::new()
            .with(AddNote(notebook.clone()))?
            .with(SearchNotes(notebook.clone()))?;
        Ok(Self {
            config,
            notebook,
            tools,
        })
    }
}

impl Notebook {
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
        if held > self.max_notes_per_user {
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

/// `add_note`: saves a note for the caller.
struct AddNote(Arc<Notebook>);

/// Arguments of `add_note`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddNoteArgs {
    /// The note.
    #[schemars(length(min = 1, max = 2000))]
    text: String,
}

#[async_trait]
impl Tool for AddNote {
    type Args = AddNoteArgs;

    fn name(&self) -> &str {
        "add_note"
    }

    fn description(&self) -> String {
        "Save a short note for the current user.".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: AddNoteArgs,
    ) -> Result<Value, ToolError> {
        if args.text.trim().is_empty() {
            return Err(ToolError::invalid(self.name(), "argument `text` is blank"));
        }
        Ok(json!({"id": self.0.add(&scope.user_id, &args.text)}))
    }
}

/// `search_notes`: the caller's notes sharing words with a query.
struct SearchNotes(Arc<Notebook>);

/// Arguments of `search_notes`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchNotesArgs {
    /// Words to look for.
    #[schemars(length(min = 1))]
    query: String,
    /// Most notes returned (10 when left out).
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

#[async_trait]
impl Tool for SearchNotes {
    type Args = SearchNotesArgs;

    fn name(&self) -> &str {
        "search_notes"
    }

    fn description(&self) -> String {
        "Find the current user's notes sharing words with the query.".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: SearchNotesArgs,
    ) -> Result<Value, ToolError> {
        let hits = self
            .0
            .search(&scope.user_id, &args.query, args.limit.unwrap_or(10));
        Ok(Value::Array(
            hits.into_iter()
                .map(|(id, content, score)| json!({"id": id, "content": content, "score": score}))
                .collect(),
        ))
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
        Some(&self.tools)
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
            self.notebook.add(user_id, &text[5..]);
        }
        Ok(())
    }
}

#[async_trait]
impl ContextProvider for NotesExtension {
    async fn context(
        &self,
        _ctx: &KernelContext,
        request: &ContextRequest,
    ) -> Result<Option<String>, BoxError> {
        let hits = self.notebook.search(&request.user_id, &request.prompt, 5);
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

    async fn run_job(&self, ctx: &KernelContext, name: &str) -> Result<JobReport, BoxError> {
        if name != "notes_digest" {
            return Err(format!("unknown job `{name}`").into());
        }
        let notes = self
            .notebook
            .notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        ctx.publish(Event::new(ctx.now(), NotesDigested { notes }.to_payload()?))
            .await?;
        Ok(JobReport::new(format!("{notes} notes")))
    }
}
