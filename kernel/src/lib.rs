//! The mnemo agent kernel: the only crate an extension author depends on.
//!
//! The kernel knows nothing about memory. It hosts [`Extension`]s, which are switched on in
//! `config.toml` and take any set of roles: [`ContextProvider`] (a block of the system prompt
//! before each agent turn), [`ToolProvider`] (tools the agent may call), [`SchedulerProvider`]
//! (named cron jobs) and [`EventHandler`] (subscriptions on the [`Router`]). Extensions reach each
//! other only through events and through small typed APIs published in [`Services`].
//!
//! Time comes from a [`Clock`]: the system clock in production, a [`VirtualClock`] in replay, so
//! that decay, expiry and cron jobs are deterministic in tests. Language models are reached through
//! the [`LlmClient`] trait, with an OpenAI-compatible client and a scripted one for replay.
//!
//! Lifecycle: the host builds a [`KernelBuilder`] from an [`ExtensionRegistry`] and a [`Config`];
//! [`KernelBuilder::start`] builds every enabled extension from its config section, calls
//! [`Extension::register`] on each (publish services), then [`Extension::start`] (all services
//! visible), then starts event delivery and the scheduler. [`Kernel::shutdown`] drains the queues
//! and calls [`Extension::stop`] in reverse order.
#![warn(missing_docs)]

mod clock;
mod config;
mod error;
mod event;
mod extension;
mod kernel;
mod llm;
mod retry;
mod router;
mod schedule;
mod schema;
mod services;
#[cfg(feature = "testing")]
pub mod testing;
mod turn;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use config::{Config, ConfigError, ExtensionSection, KernelConfig, LlmConfig, LlmProvider};
pub use error::{BoxError, ExtensionError, KernelError};
pub use event::{
    check_id, ConversationEvent, ConversationKind, Event, EventError, EventPayload, TypedEvent,
    MAX_ID_BYTES, TOPIC_AGENT_RESPONSE, TOPIC_USER_MESSAGE,
};
pub use extension::{
    ContextProvider, ContextRequest, EventHandler, Extension, ExtensionFactory, ExtensionRegistry,
    JobSpec, Registrar, SchedulerProvider, ToolError, ToolProvider, ToolScope, ToolSpec,
};
pub use kernel::{JobRun, JobTotals, Kernel, KernelBuilder, KernelContext, KEPT_JOB_RUNS};
pub use llm::{
    json::extract_json,
    openai::OpenAiClient,
    scripted::{ScriptedLlm, ScriptedReply},
    ChatMessage, ChatRequest, ChatResponse, ChatRole, LlmClient, LlmError, LlmToolCall, ToolChoice,
};
pub use retry::{retry_after, RetryPolicy};
pub use router::{PublishError, Router};
pub use schedule::{CronError, CronSchedule};
pub use services::Services;
pub use turn::{PreparedTurn, TurnInput, TurnOutcome};

/// Version of the extension API. Bumped when a trait in this crate changes incompatibly.
pub const API_VERSION: u32 = 1;
