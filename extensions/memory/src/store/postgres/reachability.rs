//! Whether the database answers, known before a request asks: a probe on a connection of its
//! own (outside the pool) runs `SELECT 1` every [`PROBE_EVERY`], and when that fails it
//! connects again, at most [`CONNECT_TIMEOUT`] a time, keeping the failure's own words
//! ("connection refused", "no answer within 1 s"). A server answers 503 at once while the
//! database is unreachable, and `/readyz` says so within about a second of it going away.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection as _, Executor as _};

/// How often the probe asks.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(250);
/// The longest a connection may take to open before the database counts as unreachable; also
/// the pool's wait for a connection.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What the probe last found: `None` while the database answers, else why not.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reachability(Arc<RwLock<Option<String>>>);

impl Reachability {
    /// Why the database does not answer, if it does not.
    pub(crate) fn unreachable(&self) -> Option<String> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set(&self, state: Option<String>) {
        let mut current = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *current != state {
            match &state {
                Some(reason) => tracing::warn!(%reason, "the database does not answer"),
                None => tracing::info!("the database answers again"),
            }
            *current = state;
        }
    }

    /// Starts probing `options`' database until the returned task is aborted.
    pub(crate) fn watch(&self, options: PgConnectOptions) -> tokio::task::JoinHandle<()> {
        let state = self.clone();
        tokio::spawn(async move {
            let mut connection: Option<PgConnection> = None;
            loop {
                let answered = match connection.as_mut() {
                    Some(open) => matches!(
                        tokio::time::timeout(CONNECT_TIMEOUT, open.execute("SELECT 1")).await,
                        Ok(Ok(_))
                    ),
                    None => false,
                };
                if answered {
                    state.set(None);
                } else {
                    if let Some(broken) = connection.take() {
                        drop(broken);
                    }
                    match tokio::time::timeout(
                        CONNECT_TIMEOUT,
                        PgConnection::connect_with(&options),
                    )
                    .await
                    {
                        Ok(Ok(open)) => {
                            connection = Some(open);
                            state.set(None);
                        }
                        Ok(Err(error)) => state.set(Some(describe(&error))),
                        Err(_) => state.set(Some(format!(
                            "no answer from the database within {} s",
                            CONNECT_TIMEOUT.as_secs_f64()
                        ))),
                    }
                }
                tokio::time::sleep(PROBE_EVERY).await;
            }
        })
    }
}

/// A connection failure in an operator's words, then sqlx's.
fn describe(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("connection refused: nothing listens at the database's address ({io})")
        }
        other => other.to_string(),
    }
}
