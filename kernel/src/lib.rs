//! The mnemo agent kernel: the only crate an extension author depends on.
//!
//! The kernel knows nothing about memory. It hosts [`Extension`]s, which are switched on in
//! `config.toml` and take any set of roles: [`ContextProvider`] (a block of the system prompt
//! before each agent turn), [`ToolProvider`] (tools the agent may call), [`SchedulerProvider`]
//! (named cron jobs) and [`EventHandler`] (subscriptions on the bus). Extensions reach each
//! other only through events and through small typed APIs published in [`Services`].
//!
//! An extension author writes `use mnemo_kernel::prelude::*;` and sees the crate root: the
//! roles, [`Event`]s, [`KernelContext`], the errors, and typed tools. A tool is a [`Tool`] whose
//! argument struct derives `Deserialize` and `JsonSchema`: the struct gives the schema the model
//! sees and the parsing, limits included, and a [`ToolSet`] of them is the extension's
//! [`ToolProvider`]. An extension's config type implements [`ValidateConfig`] and its factory
//! reads it with [`ExtensionSection::parse_checked`], which lists every problem at once.
//!
//! Time comes from a [`Clock`], so that decay, expiry and cron jobs are deterministic in replay.
//! Language models are reached through the [`LlmClient`] trait.
//!
//! Hosts (the `mnemo` binary, the replay harness, tests) use [`host`] as well: the running
//! [`host::Kernel`], its [`host::KernelBuilder`], the [`host::ExtensionRegistry`] of factories,
//! [`host::Config`], the router, the clocks and the model clients. Lifecycle: the host builds a
//! `KernelBuilder` from an `ExtensionRegistry` and a `Config`; `KernelBuilder::start` builds
//! every enabled extension from its config section, calls [`Extension::register`] on each
//! (publish services), then [`Extension::start`] (all services visible), then starts event
//! delivery and the scheduler. `Kernel::shutdown` drains the queues and calls
//! [`Extension::stop`] in reverse order.
#![warn(missing_docs)]

mod clock;
mod config;
mod error;
mod event;
mod extension;
mod kernel;
mod llm;
pub mod prelude;
mod retry;
mod router;
mod schedule;
mod schema;
mod services;
pub mod spans;
#[cfg(feature = "testing")]
pub mod testing;
mod tool;
mod turn;

pub use clock::Clock;
pub use config::{ConfigError, ExtensionSection, ValidateConfig};
pub use error::{BoxError, ExtensionError, KernelError};
pub use event::{
    check_id, ConversationEvent, ConversationKind, Event, EventError, EventPayload, TypedEvent,
    MAX_ID_BYTES, TOPIC_AGENT_RESPONSE, TOPIC_USER_MESSAGE,
};
pub use extension::{
    ContextProvider, ContextRequest, EventHandler, Extension, ExtensionFactory, JobClaims,
    JobHistory, JobReport, JobSpec, Registrar, SchedulerProvider, ToolCaller, ToolError,
    ToolProvider, ToolScope, ToolSpec,
};
pub use kernel::KernelContext;
pub use llm::{
    json::extract_json,
    model_text::{decode_entities, imitates_tool_call},
    ChatMessage, ChatRequest, ChatResponse, ChatRole, LlmClient, LlmError, LlmToolCall, ToolChoice,
};
pub use retry::{retry_after, RetryPolicy};
pub use router::PublishError;
pub use schedule::{CronError, CronSchedule};
pub use services::Services;
pub use tool::{parse_arguments, schema_for, Limits, Tool, ToolSet};
pub use turn::{EMPTY_ANSWER, NEW_SESSION_COMMAND, NO_ANSWER, SESSION_CLEARED};

/// What only a host uses: the running kernel and its builder, the factory table, the config
/// file, the router, the clocks and the model clients. Extensions do not need any of it.
pub mod host {
    pub use crate::clock::{SystemClock, VirtualClock};
    pub use crate::config::{
        Config, KernelConfig, LlmConfig, LlmProvider, MetricsAccess, TelemetryConfig,
    };
    pub use crate::extension::ExtensionRegistry;
    pub use crate::kernel::{JobRun, JobTotals, Kernel, KernelBuilder, KEPT_JOB_RUNS};
    pub use crate::llm::{
        openai::OpenAiClient,
        scripted::{ScriptedLlm, ScriptedReply},
    };
    pub use crate::router::Router;
    pub use crate::turn::{PreparedTurn, TurnInput, TurnOutcome};
}

/// Version of the extension API. Bumped when a trait in this crate changes incompatibly.
pub const API_VERSION: u32 = 1;
