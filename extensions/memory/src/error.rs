//! Errors of the memory extension.

/// What went wrong in the memory store or its API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The database failed; the message says in plain words what a known SQLite failure means
    /// (a full disk, a read-only file), then SQLite's own words.
    #[error("database: {}", explain(.0))]
    Database(#[from] sqlx::Error),
    /// The schema could not be migrated.
    #[error("migration: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// Input was rejected; the message names the field and the problem. Nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// No active memory or entity matches.
    #[error("{0}")]
    NotFound(String),
    /// A stored JSON column could not be read.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The database file, or its directory, is not writable by this process.
    #[error("the database file or its directory is read-only, and mnemo needs to write to it; nothing was written")]
    ReadOnly,
    /// The store could not be opened at `path`.
    #[error("cannot open the memory store {path}: {source}")]
    Open {
        /// The database file.
        path: String,
        /// Why.
        source: Box<MemoryError>,
    },
    /// The file that serialises opening the store across processes could not be locked.
    #[error("cannot lock {path} to open the store: {source}")]
    OpeningLock {
        /// The lock file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The store is not open yet (the extension has not started).
    #[error("the memory store is not open")]
    NotOpen,
}

impl MemoryError {
    /// Whether the database could not be reached at all (no connection within the connect
    /// timeout, the connection failed, the pool is closed), rather than refusing what was
    /// asked: a server answers 503 and the client retries.
    pub fn is_unavailable(&self) -> bool {
        match self {
            // PostgreSQL's own words for it: a connection exception (class 08), or the server
            // shutting down or restarting (57P01 to 57P03).
            Self::Database(sqlx::Error::Database(error)) => error.code().is_some_and(|code| {
                code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03")
            }),
            Self::Database(error) => matches!(
                error,
                sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::WorkerCrashed
            ),
            Self::Open { source, .. } => source.is_unavailable(),
            _ => false,
        }
    }

    /// What kind of failure, as a span's `error.type`.
    pub(crate) fn error_type(&self) -> &'static str {
        match self {
            Self::Database(_) => "database",
            Self::Migration(_) => "migration",
            Self::Invalid(_) => "invalid",
            Self::NotFound(_) => "not_found",
            Self::Corrupt(_) => "corrupt",
            Self::ReadOnly => "read_only",
            Self::Open { .. } => "open",
            Self::OpeningLock { .. } => "opening_lock",
            Self::NotOpen => "not_open",
        }
    }
}

/// Records a failed `result` in `span` as its `error.type`.
pub(crate) fn record_failure<T>(span: &tracing::Span, result: &Result<T>) {
    if let Err(error) = result {
        span.record(mnemo_kernel::spans::ERROR_TYPE, error.error_type());
    }
}

/// SQLite's message, preceded by what it means for someone running mnemo, for the failures
/// that an operator can do something about.
fn explain(error: &sqlx::Error) -> String {
    let code = match error {
        sqlx::Error::Database(database) => {
            database.code().and_then(|code| code.parse::<i32>().ok())
        }
        _ => None,
    };
    // The primary result code is the low byte of an extended one (778 = SQLITE_IOERR_WRITE).
    let hint = match code.map(|code| code & 0xff) {
        Some(13) => {
            Some("the disk is full, or the database reached its size limit; nothing was written")
        }
        Some(10) => Some(
            "the database file could not be read or written (a full disk, a file size limit or a \
             failing disk)",
        ),
        Some(8) => Some("the database file or its directory is read-only; nothing was written"),
        Some(14) => Some(
            "the database file cannot be opened: its directory is missing or read-only, or the \
             file cannot be read",
        ),
        Some(5) => Some(
            "another connection or process held the database's write lock for longer than \
             `busy_timeout` allows; nothing was written",
        ),
        Some(11) | Some(26) => Some("the database file is damaged or is not a database"),
        _ => None,
    };
    match hint {
        Some(hint) => format!("{hint} ({error})"),
        None => error.to_string(),
    }
}

impl From<MemoryError> for mnemo_memory_api::MemoryApiError {
    /// Input and lookup failures keep their kind; everything the database says becomes the
    /// API's opaque storage error, with its explanation as the message.
    fn from(error: MemoryError) -> Self {
        match error {
            MemoryError::Invalid(message) => Self::Invalid(message),
            MemoryError::NotFound(message) => Self::NotFound(message),
            MemoryError::NotOpen => Self::NotOpen,
            other if other.is_unavailable() => Self::Unavailable(Box::new(other)),
            other => Self::Storage(Box::new(other)),
        }
    }
}

/// Results of the memory crate.
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;
