//! Which database a store opens: SQLite always; PostgreSQL when mnemo is built with the
//! `postgres` feature (`store/postgres/`). Without it a `postgres://` URL is refused with an
//! error that says how to build it in, and nothing is opened.

use std::sync::Arc;
use std::time::Duration;

use super::MemoryBackend;
use crate::error::Result;

/// How a PostgreSQL database is reached (read only when the `postgres` feature is on).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) struct PostgresOptions {
    /// `postgres://user[:password]@host[:port]/database[?options]`.
    pub(crate) url: String,
    /// Connections in the pool.
    pub(crate) max_connections: u32,
    /// How long a writer waits for another's lock before failing (a connection is waited for
    /// the store's connect timeout at most).
    pub(crate) lock_timeout: Duration,
    /// HNSW candidates per vector search (`hnsw.ef_search`); 0 searches exactly.
    pub(crate) ef_search: usize,
    /// Whether a commit waits for PostgreSQL's write-ahead log to reach the disk
    /// (`synchronous_commit`): what `synchronous = "full"` asks of SQLite. Off (`normal` or
    /// `off`), a crash of the server may lose the last transactions, never corrupt the rest.
    pub(crate) synchronous_commit: bool,
}

/// Connects to the PostgreSQL database and migrates it.
///
/// # Errors
/// The URL is not a PostgreSQL URL, the server cannot be reached, or the schema cannot be
/// migrated.
#[cfg(feature = "postgres")]
pub(crate) async fn open_postgres(options: &PostgresOptions) -> Result<Arc<dyn MemoryBackend>> {
    Ok(Arc::new(
        super::postgres::PostgresStore::open(options).await?,
    ))
}

/// This build has no PostgreSQL backend.
///
/// # Errors
/// Always [`without_postgres`].
#[cfg(not(feature = "postgres"))]
pub(crate) async fn open_postgres(_options: &PostgresOptions) -> Result<Arc<dyn MemoryBackend>> {
    Err(without_postgres())
}

/// What a build without the `postgres` feature answers a `postgres://` URL: how to build it in.
#[cfg_attr(feature = "postgres", allow(dead_code))]
fn without_postgres() -> crate::error::MemoryError {
    crate::error::MemoryError::Invalid(
        "this mnemo was built without PostgreSQL support: build it with \
         `cargo build --release --features postgres` to use a postgres:// database"
            .to_owned(),
    )
}

/// The URL with its password hidden, for messages and logs.
pub(crate) fn redacted(url: &str) -> String {
    #[cfg(feature = "postgres")]
    {
        super::postgres::redacted(url)
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = url;
        "a PostgreSQL URL".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal itself runs only in a build without the feature (`make test` builds with
    /// it); its words are checked in every build.
    #[test]
    fn the_refusal_names_the_feature_and_no_password_is_shown() {
        let refusal = without_postgres().to_string();
        assert!(refusal.contains("--features postgres"), "{refusal}");
        let url = "postgres://mnemo:secret@127.0.0.1:5432/mnemo";
        assert!(!redacted(url).contains("secret"), "{}", redacted(url));
    }
}
