//! Why telemetry could not start.

/// What went wrong setting telemetry up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The OTLP exporter could not be built (a bad endpoint, or no HTTP client).
    #[error("cannot export traces to {endpoint}: {reason}")]
    Exporter {
        /// The traces URL.
        endpoint: String,
        /// Why, in the exporter's words.
        reason: String,
    },
    /// Traces need the async runtime the process runs on, and there is none.
    #[error("traces need a running tokio runtime to send them on")]
    NoRuntime,
    /// Another subscriber was installed first.
    #[error("the tracing subscriber is already set: {0}")]
    AlreadySet(String),
}
