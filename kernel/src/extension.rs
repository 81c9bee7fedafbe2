//! The extension trait, its roles, and the factory table hosts register extensions with.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::ExtensionSection;
use crate::error::BoxError;
use crate::event::Event;
use crate::kernel::{JobRun, KernelContext};
use crate::services::Services;

/// A unit of functionality hosted by the kernel, switched on by `[extensions.<name>]` in config.
///
/// Lifecycle, in this order:
/// 1. The host's [`ExtensionFactory`] builds the extension from its config section (no I/O).
/// 2. [`Extension::register`]: publish typed APIs for other extensions into the [`Registrar`].
/// 3. [`Extension::start`]: every service is visible; open files, spawn tasks.
/// 4. The kernel delivers events and runs jobs, tools and context through the role accessors.
/// 5. [`Extension::stop`], in reverse start order, after the event queues are drained.
///
/// An extension takes a role by returning `Some(self)` from the matching accessor.
#[async_trait]
pub trait Extension: Send + Sync + 'static {
    /// The extension's name: the same snake_case string as its config key and folder.
    fn name(&self) -> &str;

    /// Publishes the extension's typed APIs for others to find in [`KernelContext::services`].
    ///
    /// # Errors
    /// A registration problem, reported at start-up.
    fn register(&self, registrar: &mut Registrar<'_>) -> Result<(), BoxError> {
        let _ = registrar;
        Ok(())
    }

    /// Starts the extension; every other extension's services are registered by now.
    ///
    /// # Errors
    /// Start-up fails, naming this extension.
    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        let _ = ctx;
        Ok(())
    }

    /// Stops the extension gracefully; called once, after event queues are drained.
    ///
    /// # Errors
    /// Logged by the kernel; shutdown goes on.
    async fn stop(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        let _ = ctx;
        Ok(())
    }

    /// Waits until the background work queued so far is done (an indexer catching up, say).
    ///
    /// [`crate::host::Kernel::settle`] calls it, so that replays and tests see a quiet system between
    /// steps. Production paths never wait on it.
    async fn idle(&self, ctx: &KernelContext) {
        let _ = ctx;
    }

    /// The context role, if the extension contributes to the system prompt.
    fn context_provider(&self) -> Option<&dyn ContextProvider> {
        None
    }

    /// The tool role, if the extension offers tools to the agent.
    fn tool_provider(&self) -> Option<&dyn ToolProvider> {
        None
    }

    /// The scheduler role, if the extension has cron jobs.
    fn scheduler_provider(&self) -> Option<&dyn SchedulerProvider> {
        None
    }

    /// The subscriber role, if the extension listens to events on the bus.
    fn event_handler(&self) -> Option<&dyn EventHandler> {
        None
    }
}

/// What the kernel asks a [`ContextProvider`] for, before an agent turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRequest {
    /// The user's message the agent is about to answer.
    pub prompt: String,
    /// The user.
    pub user_id: String,
    /// The current session.
    pub session_id: String,
    /// The chat, if any.
    pub chat_id: Option<String>,
    /// The kernel clock's time.
    pub at: DateTime<Utc>,
    /// How many of this session's latest messages the host sends to the model itself (its
    /// chat history, before `prompt`): a provider need not repeat them.
    pub history_messages: usize,
    /// Asked about a past time (an HTTP client's `as_of`): what the user believed then. `None`
    /// for now, as every agent turn asks.
    pub as_of: Option<DateTime<Utc>>,
}

/// Contributes a block to the system prompt before each agent turn.
#[async_trait]
pub trait ContextProvider: Send + Sync {
    /// A markdown block for the system prompt, or `None` when there is nothing to add.
    ///
    /// # Errors
    /// Logged by the kernel; the turn goes on without this block.
    async fn context(
        &self,
        ctx: &KernelContext,
        request: &ContextRequest,
    ) -> Result<Option<String>, BoxError>;
}

/// A tool as the model sees it: name, description and JSON-schema parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Unique tool name across all enabled extensions.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object. The kernel checks `required`, property types and,
    /// with `"additionalProperties": false`, unknown keys before the call reaches the provider.
    pub parameters: Value,
}

/// Who calls a tool, which tells a tool whose words it is given: a memory the chat's own model
/// writes during a conversation is its claim, checked against what the user said; one a client
/// or a service writes is what it was told.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCaller {
    /// An MCP client, the CLI or a test acting for the user.
    #[default]
    Client,
    /// The chat's model, during a conversation turn the kernel runs.
    Model {
        /// What the user said in the turn the model is answering: stored by the memory
        /// extension while the model runs, so a tool may not find it stored yet.
        said: String,
    },
    /// A service writing through the HTTP API.
    Service,
}

/// Who calls a tool, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolScope {
    /// The user on whose behalf the agent acts.
    pub user_id: String,
    /// The current session, if any.
    pub session_id: Option<String>,
    /// The current chat, if any.
    pub chat_id: Option<String>,
    /// The kernel clock's time.
    pub at: DateTime<Utc>,
    /// Who calls.
    #[serde(default)]
    pub caller: ToolCaller,
}

impl ToolScope {
    /// Checks the caller's ids by the kernel's one id rule ([`crate::check_id`]).
    ///
    /// # Errors
    /// The first id that breaks it, by name.
    pub fn validate(&self) -> Result<(), crate::EventError> {
        crate::check_id("user_id", &self.user_id)?;
        if let Some(session_id) = &self.session_id {
            crate::check_id("session_id", session_id)?;
        }
        if let Some(chat_id) = &self.chat_id {
            crate::check_id("chat_id", chat_id)?;
        }
        Ok(())
    }
}

/// Why a tool call failed. The message is shown to the model and to the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No enabled extension offers a tool of that name.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The arguments do not match the tool's parameters.
    #[error("invalid arguments for `{tool}`: {reason}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What is wrong, naming the argument.
        reason: String,
    },
    /// The tool ran and failed.
    #[error("`{tool}` failed: {reason}")]
    Failed {
        /// The tool.
        tool: String,
        /// What went wrong.
        reason: String,
    },
}

impl ToolError {
    /// A failure of `tool` with a reason.
    pub fn failed(tool: &str, reason: impl std::fmt::Display) -> Self {
        Self::Failed {
            tool: tool.to_owned(),
            reason: reason.to_string(),
        }
    }

    /// Invalid arguments for `tool`.
    pub fn invalid(tool: &str, reason: impl std::fmt::Display) -> Self {
        Self::InvalidArguments {
            tool: tool.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// Offers tools to the agent.
///
/// An extension usually returns a [`crate::ToolSet`] of typed [`crate::Tool`]s, which implements
/// this trait and generates every [`ToolSpec`] from the tool's argument struct; writing it by
/// hand is for tools whose schema is not known at compile time.
#[async_trait]
pub trait ToolProvider: Send + Sync {
    /// The tools this extension offers; asked once at start.
    fn tools(&self) -> Vec<ToolSpec>;

    /// Runs one tool. Arguments have already been checked against the tool's schema.
    ///
    /// # Errors
    /// A [`ToolError`] whose message names the problem.
    async fn call_tool(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        name: &str,
        arguments: Value,
    ) -> Result<Value, ToolError>;
}

/// A named job with a cron expression (5 fields, or 6 with seconds first), in UTC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Unique job name across all enabled extensions, such as `execute_decay`.
    pub name: String,
    /// When it runs, such as `0 4 * * *`.
    pub cron: String,
    /// What it does, for `mnemo jobs list`.
    pub description: String,
}

/// What one run of a job did: a one-line summary, and how many of its items failed. A job
/// whose every item failed still ran (its error is for a run that could not work at all), so
/// the count, not the wording of the summary, says whether it did its work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobReport {
    /// What the run did, in a line ("3 sessions consolidated (5 facts), 1 failed, 0 skipped").
    pub summary: String,
    /// Items the run tried and failed on (sessions, memories, users).
    pub failed: u64,
}

impl JobReport {
    /// A report of a run with no failed items.
    pub fn new(summary: impl Into<String>) -> Self {
        Self {
            summary: summary.into(),
            failed: 0,
        }
    }

    /// The report, with `failed` items that failed.
    #[must_use]
    pub fn with_failed(mut self, failed: u64) -> Self {
        self.failed = failed;
        self
    }
}

impl From<String> for JobReport {
    fn from(summary: String) -> Self {
        Self::new(summary)
    }
}

impl std::fmt::Display for JobReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary)
    }
}

/// Owns named cron jobs.
#[async_trait]
pub trait SchedulerProvider: Send + Sync {
    /// The jobs; asked once at start.
    fn jobs(&self) -> Vec<JobSpec>;

    /// Runs the job `name` once; returns what it did and how many of its items failed.
    ///
    /// # Errors
    /// Logged and recorded by the kernel; the schedule goes on.
    async fn run_job(&self, ctx: &KernelContext, name: &str) -> Result<JobReport, BoxError>;
}

/// Shared record of scheduled runs, for instances of mnemo that share one store (several
/// `mnemo serve` on one PostgreSQL database, or several processes on one SQLite file): each
/// instance's scheduler asks it before a run it found due, so that a run due at one time happens
/// in one instance only. A store extension provides it as a service (`dyn JobClaims`); without
/// one every instance runs every job.
#[async_trait]
pub trait JobClaims: Send + Sync {
    /// Claims the run of `job` due at `due`: true for the first instance to ask, false for the
    /// others.
    ///
    /// # Errors
    /// The record cannot be reached; the scheduler then runs the job anyway (a job whose store
    /// is down fails on its own, and a run is never lost to a claim that could not be made).
    async fn claim_run(&self, job: &str, due: DateTime<Utc>) -> Result<bool, BoxError>;
}

/// A lasting record of job runs and their outcomes, kept by a store extension as a service
/// (`dyn JobHistory`): it outlives the process, and instances that share one store share it, so
/// "what did last night's jobs do" has an answer after a restart and whichever instance ran them.
/// Without one, the kernel's own record of its last runs is all there is.
#[async_trait]
pub trait JobHistory: Send + Sync {
    /// Records a finished run.
    ///
    /// # Errors
    /// The record cannot be written; the kernel logs it, and the run stands.
    async fn record_run(&self, run: &JobRun) -> Result<(), BoxError>;

    /// The last `limit` runs of every job, newest first.
    ///
    /// # Errors
    /// The record cannot be read.
    async fn recent_runs(&self, limit: usize) -> Result<Vec<JobRun>, BoxError>;
}

/// Subscribes to events on the bus.
///
/// Each subscriber has its own bounded queue and task: events arrive in publish order, one at a
/// time. An error or a panic in `handle` is logged and does not stop delivery.
#[async_trait]
pub trait EventHandler: Send + Sync {
    /// The topics to receive; `"*"` receives every event.
    fn topics(&self) -> Vec<String>;

    /// Handles one event.
    ///
    /// # Errors
    /// Logged by the kernel, with the extension's name and the event's id.
    async fn handle(&self, ctx: &KernelContext, event: &Event) -> Result<(), BoxError>;
}

/// Handed to [`Extension::register`]: the place to publish typed APIs.
pub struct Registrar<'a> {
    pub(crate) extension: &'a str,
    pub(crate) services: &'a mut Services,
    pub(crate) duplicates: Vec<(String, String)>,
}

impl Registrar<'_> {
    /// The registering extension's name.
    pub fn extension(&self) -> &str {
        self.extension
    }

    /// Publishes `api` so that other extensions find it with [`Services::get`].
    ///
    /// `T` is usually a trait object such as `dyn MemoryApi`, defined in the providing crate.
    pub fn provide<T: ?Sized + Send + Sync + 'static>(&mut self, api: Arc<T>) {
        if let Some(previous) = self.services.insert(self.extension, api) {
            self.duplicates
                .push((std::any::type_name::<T>().to_owned(), previous));
        }
    }
}

/// Builds an extension from its config section. Hosts collect factories in an [`ExtensionRegistry`].
#[derive(Clone, Copy)]
pub struct ExtensionFactory {
    /// The config key and extension name.
    pub name: &'static str,
    /// One line for `mnemo` listings.
    pub description: &'static str,
    /// Builds the extension from `[extensions.<name>]` (without the `enabled` key). No I/O here.
    pub build: fn(&ExtensionSection) -> Result<Arc<dyn Extension>, crate::config::ConfigError>,
}

impl std::fmt::Debug for ExtensionFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionFactory")
            .field("name", &self.name)
            .finish()
    }
}

/// The table of extensions a host knows, keyed by config name.
#[derive(Debug, Default, Clone)]
pub struct ExtensionRegistry {
    factories: Vec<ExtensionFactory>,
}

impl ExtensionRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a factory; a later factory of the same name replaces the earlier one.
    pub fn add(&mut self, factory: ExtensionFactory) -> &mut Self {
        self.factories.retain(|known| known.name != factory.name);
        self.factories.push(factory);
        self
    }

    /// Adds a factory, builder style.
    pub fn with(mut self, factory: ExtensionFactory) -> Self {
        self.add(factory);
        self
    }

    /// The factory named `name`.
    pub fn get(&self, name: &str) -> Option<&ExtensionFactory> {
        self.factories.iter().find(|factory| factory.name == name)
    }

    /// Every known name, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.factories.iter().map(|factory| factory.name).collect()
    }
}
