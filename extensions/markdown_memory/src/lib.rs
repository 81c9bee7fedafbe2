//! The `markdown_memory` extension: long-term memory for an agent in plain markdown files that a
//! person can read, edit and version, written against `mnemo-kernel`'s public API alone.
//!
//! It joins two file-first designs. Seed 002's two layers: `MEMORY.md` (long-term facts, in every
//! system prompt when `inject = true`) and append-only `HISTORY.md` / `HISTORY-YYYY-MM.md`, bridged
//! by consolidation, one model call that turns a stretch of conversation into a history entry and
//! an updated memory, triggered by a `/new` command or by a session longer than `memory_window`
//! messages. Seed 004's world and agent memory: shared `world/{topic}.md` files and per-agent
//! `agents/{agent_id}/MEMORY.md` plus daily logs, reached through the tools `recall`, `remember`,
//! `reflect` and `learn_fact`, and `search_history`, a BM25-ranked search over the history files
//! and daily logs. With `per_user` (the default) each user has their own files, and `learn_fact`
//! in a user's conversation writes that user's own world topics; the shared `world/` is written by
//! hand, or by an agent listed in `shared_world_writers`, and read by everyone. Tool names carry `tool_prefix` (default `md_`), so the extension can run beside
//! the `memory` extension, whose `remember` and `recall` it would otherwise clash with; alone, with
//! `tool_prefix = ""` and `inject = false`, it is seed 004's tools-only memory with no database.
//!
//! Whole-file writes are atomic (temporary file, `fsync`, rename), appends never rewrite earlier
//! entries, and no name given by the model can leave the workspace. Enable it with
//! `[extensions.markdown_memory]` in `config.toml`; a host registers it with [`factory`].
#![warn(missing_docs)]

mod atomic;
mod bm25;
mod config;
mod consolidate;
mod context;
mod erasure;
mod error;
mod events;
mod guard;
mod names;
mod session;
mod tools;
mod workspace;
mod writers;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, ConfigError, ContextProvider, EventHandler, Extension, ExtensionFactory,
    ExtensionSection, KernelContext, ToolError, ToolProvider, ToolSet,
};

pub use atomic::{is_temp_file, write_atomic, StagedWrite};
pub use bm25::{tokenize, Bm25Hit, Bm25Index};
pub use config::MarkdownMemoryConfig;
pub use consolidate::{parse_reply, ConsolidationReply, ParseTier};
pub use erasure::{scrub_text, Needle};
pub use error::{MarkdownError, Result};
pub use names::{check_agent_id, sanitize_topic, MAX_NAME_CHARS};
pub use session::{BufferedMessage, Role, SessionKey};
pub use workspace::{
    format_entry, monthly_history_file, parse_entries, Entry, Workspace, WorldWrite,
    DEFAULT_MEMORY_VERSIONS, HISTORY_FILE, MEMORY_FILE, MEMORY_VERSIONS_DIR, MODEL_LINES_FILE,
};

use consolidate::Consolidator;
use tools::ToolNames;

/// The extension's name: its config key and folder.
pub const NAME: &str = "markdown_memory";

/// The factory a host adds to its registry.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description:
            "long-term memory in markdown files: MEMORY.md, history, world and agent memory",
        build: |section: &ExtensionSection| {
            let config: MarkdownMemoryConfig = section.parse_checked()?;
            let extension = MarkdownMemoryExtension::new(config)
                .map_err(|error| ConfigError::new(section.file.clone(), error.to_string()))?;
            Ok(Arc::new(extension) as Arc<dyn Extension>)
        },
    }
}

/// The extension: tools, context, and consolidation of the conversations it hears.
#[derive(Debug)]
pub struct MarkdownMemoryExtension {
    files: Arc<Files>,
    names: ToolNames,
    tools: ToolSet,
    consolidator: Consolidator,
}

/// The config and the workspace, shared by the extension and its tools.
#[derive(Debug)]
pub(crate) struct Files {
    pub(crate) config: MarkdownMemoryConfig,
    pub(crate) workspace: OnceLock<Workspace>,
}

impl Files {
    /// The workspace `user_id` works in: their own `users/{user}/` when `per_user` is on (which
    /// still reads the shared `world/`), else the one shared workspace.
    pub(crate) fn open_workspace(&self, user_id: Option<&str>) -> Result<Workspace> {
        let base = self.workspace.get().ok_or(MarkdownError::NotStarted)?;
        match user_id {
            Some(user) if self.config.per_user => Ok(base.for_user(user)),
            _ => Ok(base.clone()),
        }
    }
}

impl MarkdownMemoryExtension {
    /// An extension with `config`, whose values should pass
    /// [`mnemo_kernel::ValidateConfig::problems`] ([`factory`] checks). The workspace opens at
    /// [`Extension::start`].
    ///
    /// # Errors
    /// A tool's config limits do not fit its arguments (a bug, reported at start-up).
    pub fn new(config: MarkdownMemoryConfig) -> std::result::Result<Self, ToolError> {
        let names = ToolNames::new(&config.tool_prefix);
        let consolidator = Consolidator::new(
            Duration::from_secs(config.llm_timeout_secs),
            config.max_memory_size,
        );
        let files = Arc::new(Files {
            config,
            workspace: OnceLock::new(),
        });
        let tools = tools::tool_set(&files, &names)?;
        Ok(Self {
            files,
            names,
            tools,
            consolidator,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MarkdownMemoryConfig {
        &self.files.config
    }

    /// The workspace, once started.
    pub fn workspace(&self) -> Option<&Workspace> {
        self.files.workspace.get()
    }
}

/// Runs blocking file work on a blocking thread, with a clone of the workspace.
pub(crate) async fn blocking<T, F>(workspace: &Workspace, job: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&Workspace) -> Result<T> + Send + 'static,
{
    let workspace = workspace.clone();
    tokio::task::spawn_blocking(move || job(&workspace))
        .await
        .map_err(|err| MarkdownError::Task(err.to_string()))?
}

#[async_trait]
impl Extension for MarkdownMemoryExtension {
    fn name(&self) -> &str {
        NAME
    }

    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        let configured = Path::new(&self.files.config.workspace);
        let root = if configured.is_absolute() {
            configured.to_path_buf()
        } else {
            ctx.data_dir().join(configured)
        };
        let versions = self.files.config.memory_versions;
        let workspace = tokio::task::spawn_blocking(move || {
            Workspace::open(root).map(|workspace| workspace.with_versions(versions))
        })
        .await
        .map_err(|err| MarkdownError::Task(err.to_string()))??;
        tracing::info!(
            workspace = %workspace.root().display(),
            agent_id = %self.files.config.agent_id,
            inject = self.files.config.inject,
            learn_fact_writes = if self.files.config.writes_shared_world() {
                "the shared world/"
            } else {
                "each user's own users/{user}/world/"
            },
            "markdown memory open"
        );
        if self.files.workspace.set(workspace).is_err() {
            tracing::warn!("started twice; keeping the first workspace");
        }
        Ok(())
    }

    fn context_provider(&self) -> Option<&dyn ContextProvider> {
        Some(self)
    }

    fn tool_provider(&self) -> Option<&dyn ToolProvider> {
        Some(&self.tools)
    }

    fn event_handler(&self) -> Option<&dyn EventHandler> {
        Some(self)
    }
}
