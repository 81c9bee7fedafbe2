//! The one error type of the memory API: opaque about the storage behind it.

/// A storage backend's own error, kept as the source of [`MemoryApiError::Storage`].
pub type StorageError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a memory API call failed. Callers branch on the kind; the storage backend's own error
/// (SQLite's, PostgreSQL's) stays behind [`MemoryApiError::Storage`] as text and source, so that
/// no caller depends on a database driver.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryApiError {
    /// Input was rejected; the message names the field and the problem. Nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// No active memory or entity matches.
    #[error("{0}")]
    NotFound(String),
    /// The store is not open yet (the extension has not started).
    #[error("the memory store is not open")]
    NotOpen,
    /// The store's database could not be reached (no connection, or it is restarting): a
    /// server answers 503 and the client retries. The backend's error is the source.
    #[error("{0}")]
    Unavailable(#[source] StorageError),
    /// The storage backend failed; its message says what happened.
    #[error("{0}")]
    Storage(#[source] StorageError),
}

/// Results of the memory API.
pub type Result<T, E = MemoryApiError> = std::result::Result<T, E>;
