//! Errors at the kernel boundary.

use std::fmt;

/// Any error an extension returns across the kernel boundary.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error raised by an extension, tagged with the extension's name.
#[derive(Debug)]
pub struct ExtensionError {
    /// Name of the extension that failed.
    pub extension: String,
    /// What went wrong.
    pub source: BoxError,
}

impl ExtensionError {
    /// Wraps `source` as an error of `extension`.
    pub fn new(extension: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self {
            extension: extension.into(),
            source: source.into(),
        }
    }
}

impl fmt::Display for ExtensionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "extension `{}`: {}", self.extension, self.source)
    }
}

impl std::error::Error for ExtensionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// Errors of the kernel itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The configuration is invalid; the message names the file, key and reason.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// An extension failed to build, register, start or stop.
    #[error(transparent)]
    Extension(#[from] ExtensionError),
    /// Two extensions registered the same tool, job or service.
    #[error("duplicate {what} `{name}`: registered by `{first}` and `{second}`")]
    Duplicate {
        /// "tool", "job" or "extension".
        what: &'static str,
        /// The duplicated name.
        name: String,
        /// The extension that registered it first.
        first: String,
        /// The extension that registered it again.
        second: String,
    },
    /// A job's cron expression is invalid.
    #[error("job `{job}` of extension `{extension}`: {source}")]
    Cron {
        /// The job's name.
        job: String,
        /// The extension owning the job.
        extension: String,
        /// Why the expression is invalid.
        #[source]
        source: crate::schedule::CronError,
    },
    /// No job of that name is registered by an enabled extension.
    #[error("unknown job `{0}`")]
    UnknownJob(String),
    /// The operation needs the virtual clock, but the kernel runs on the system clock.
    #[error("the kernel runs on the system clock; only a virtual clock can be moved")]
    NotVirtualClock,
    /// The virtual clock cannot move backwards.
    #[error("cannot move the clock back from {now} to {target}")]
    ClockBackwards {
        /// The current time.
        now: chrono::DateTime<chrono::Utc>,
        /// The requested time.
        target: chrono::DateTime<chrono::Utc>,
    },
    /// An agent turn needs an LLM and none is configured.
    #[error(
        "no LLM is configured: set [llm] in config.toml or MNEMO_LLM_BASE_URL / MNEMO_LLM_MODEL"
    )]
    NoLlm,
    /// The LLM failed during an agent turn.
    #[error("llm: {0}")]
    Llm(#[from] crate::llm::LlmError),
    /// An agent turn failed after the model's tool calls had run: what they did (saved facts,
    /// say) stands, so the caller can report it beside the error.
    #[error("{source} (after {} tool calls had run)", .tool_calls.len())]
    TurnFailedAfterTools {
        /// Each tool call that ran and its result, in order.
        tool_calls: Vec<(
            crate::llm::LlmToolCall,
            Result<serde_json::Value, crate::extension::ToolError>,
        )>,
        /// Why the turn failed.
        #[source]
        source: Box<KernelError>,
    },
    /// The event could not be published.
    #[error(transparent)]
    Publish(#[from] crate::router::PublishError),
    /// A bad event was rejected.
    #[error(transparent)]
    Event(#[from] crate::event::EventError),
    /// The real-time scheduler failed.
    #[error("scheduler: {0}")]
    Scheduler(String),
    /// An I/O error, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What the kernel was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
