//! Errors of the memory extension.

/// What went wrong in the memory store or its API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The database failed.
    #[error("database: {0}")]
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
    /// The store is not open yet (the extension has not started).
    #[error("the memory store is not open")]
    NotOpen,
}

/// Results of the memory crate.
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;
