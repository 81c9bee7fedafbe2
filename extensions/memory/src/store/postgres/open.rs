//! Connecting to PostgreSQL: the pool, migrations, and write transactions with their advisory
//! locks.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use super::reachability::{Reachability, CONNECT_TIMEOUT};
use super::PostgresStore;
use crate::error::{MemoryError, Result};
use crate::store::sql::WriteScope;
use crate::store::{PostgresOptions, VectorStatus};

/// The advisory-lock class of mnemo's write locks ("mn" "em" as bytes); the second key is 0 for
/// the whole store, or the owner's hash under [`OWNER_LOCKS`].
const STORE_LOCK: i32 = 0x6d6e_656d;
/// The advisory-lock class of per-owner write locks.
const OWNER_LOCKS: i32 = 0x6d6e_656e;

/// How long a writer waits for the advisory locks of its scope (and then for row locks) before
/// it fails: far longer than `lock_timeout` of plain statements, since a whole-store writer
/// (decay or an erasure over a large store) holds the store for seconds, and the writers behind
/// it are meant to wait their turn, as SQLite's do.
const WRITER_WAIT: &str = "60s";

/// The URL with its password hidden, for messages and logs.
pub(crate) fn redacted(url: &str) -> String {
    match PgConnectOptions::from_str(url) {
        Ok(options) => format!(
            "postgres://{}@{}:{}/{}",
            options.get_username(),
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or_default()
        ),
        Err(_) => "a PostgreSQL URL that cannot be read".to_owned(),
    }
}

impl PostgresStore {
    /// Connects to the database and migrates it (sqlx holds PostgreSQL's migration lock, so
    /// instances starting at once migrate one after another).
    ///
    /// # Errors
    /// The URL is not a PostgreSQL URL, the server cannot be reached, or the schema cannot be
    /// migrated (pgvector missing, for one).
    pub(crate) async fn open(options: &PostgresOptions) -> Result<Self> {
        let connect = PgConnectOptions::from_str(&options.url)
            .map_err(|error| {
                MemoryError::Invalid(format!("database_url is not a PostgreSQL URL: {error}"))
            })?
            .application_name("mnemo");
        let settings = format!(
            "SET lock_timeout = {}; SET synchronous_commit = {}",
            options.lock_timeout.as_millis().max(1),
            if options.synchronous_commit {
                "on"
            } else {
                "off"
            }
        );
        // A request waits at most a second for a connection: when the database is gone it is
        // answered 503 within that, not after the lock timeout (a busy pool says so the same way).
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(CONNECT_TIMEOUT)
            .after_connect(move |connection, _| {
                let settings = settings.clone();
                Box::pin(async move {
                    // Two statements: raw SQL goes by the simple protocol, which takes them.
                    sqlx::raw_sql(sqlx::AssertSqlSafe(settings))
                        .execute(&mut *connection)
                        .await?;
                    Ok(())
                })
            })
            .connect_with(connect.clone())
            .await?;
        if let Err(error) = sqlx::migrate!("./migrations-postgres").run(&pool).await {
            pool.close().await;
            return Err(error.into());
        }
        let reachability = Reachability::default();
        let probe = reachability.watch(connect);
        Ok(Self {
            pool,
            vector: std::sync::RwLock::new(VectorStatus::Disabled {
                reason: "no embedding provider".to_owned(),
            }),
            ef_search: options.ef_search,
            index_cursor: Default::default(),
            reachability,
            probe,
        })
    }

    /// Starts a write transaction holding the advisory locks of `scope` until it ends: every
    /// writer first takes the store lock (shared for one owner, exclusive for the whole store),
    /// then an owner's writer takes that owner's lock. The order is always the same, so two
    /// writers never wait for each other in a circle.
    pub(super) async fn begin_write(
        &self,
        scope: WriteScope<'_>,
    ) -> Result<Transaction<'static, Postgres>> {
        let mut tx = self.pool.begin().await?;
        // Rows whose primary key settles a race take no lock and keep the plain lock timeout.
        if matches!(scope, WriteScope::Keyed) {
            return Ok(tx);
        }
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SET LOCAL lock_timeout = '{WRITER_WAIT}'"
        )))
        .execute(&mut *tx)
        .await?;
        match scope {
            WriteScope::Beside => {
                sqlx::query("SELECT pg_advisory_xact_lock_shared($1, 0)")
                    .bind(STORE_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            WriteScope::Owner(owner) => {
                sqlx::query("SELECT pg_advisory_xact_lock_shared($1, 0)")
                    .bind(STORE_LOCK)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
                    .bind(OWNER_LOCKS)
                    .bind(owner)
                    .execute(&mut *tx)
                    .await?;
            }
            WriteScope::Owners(owners) => {
                sqlx::query("SELECT pg_advisory_xact_lock_shared($1, 0)")
                    .bind(STORE_LOCK)
                    .execute(&mut *tx)
                    .await?;
                // In ascending order of their keys, as every writer of several owners takes
                // them, so that two such writers never wait for each other in a circle (and a
                // writer of one owner holds one owner lock only).
                let keys: Vec<i32> = sqlx::query_scalar(
                    "SELECT DISTINCT hashtext(owner) AS key FROM unnest($1::text[]) AS owner \
                     ORDER BY key",
                )
                .bind(owners)
                .fetch_all(&mut *tx)
                .await?;
                for key in keys {
                    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
                        .bind(OWNER_LOCKS)
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            WriteScope::Store => {
                sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
                    .bind(STORE_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            WriteScope::Keyed => {} // returned above
        }
        Ok(tx)
    }

    /// The pool, for tests that check the database directly.
    #[cfg(test)]
    pub(crate) fn pool(&self) -> &sqlx::PgPool {
        &self.pool
    }
}
