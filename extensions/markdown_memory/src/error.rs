//! Errors of the markdown memory.

/// What went wrong with a memory file or a name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MarkdownError {
    /// A name (topic, agent id) that cannot become a file name; nothing was written.
    #[error("invalid {what} {name}: {reason}")]
    InvalidName {
        /// What the name is for: `topic`, `agent_id`.
        what: &'static str,
        /// The name as given, quoted and shortened for the message.
        name: String,
        /// Why it is refused, and what to give instead.
        reason: String,
    },
    /// Content was refused (blank, say); the message says why. Nothing was written.
    #[error("{0}")]
    InvalidContent(String),
    /// A file or directory could not be read or written.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done: `read`, `write`, `append to`, ...
        action: &'static str,
        /// The file, relative to the workspace where possible.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A background file task panicked or was cancelled.
    #[error("file task failed: {0}")]
    Task(String),
    /// The extension was used before [`mnemo_kernel::Extension::start`] opened its workspace.
    #[error("the markdown memory workspace is not open yet")]
    NotStarted,
}

/// Results of the markdown memory crate.
pub type Result<T, E = MarkdownError> = std::result::Result<T, E>;
