//! Sessions, for both backends: their consolidation records, and the turns of one session. A
//! session's writes take its user's turn; giving every failed session a fresh start takes the
//! store's.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{Bind, Dialect, Driver, Run, SqlStore, WriteScope};
use crate::error::Result;
use crate::store::backend::SessionRecords;
use crate::store::rows::{from_ts, ts, MEMORY_COLUMNS};
use crate::types::{EpisodePage, Memory, PendingSession, SessionKey};

/// The stored form of a session's chat: '' for a personal conversation, so that the session
/// table's key holds no NULL (chat ids are never empty).
fn chat_key(chat_id: Option<&str>) -> &str {
    chat_id.unwrap_or("")
}

/// Closes the user's other open sessions in the same chat (or personal conversation) as
/// `session`; returns the ids of those not consolidated yet, sorted.
pub(super) async fn close_other_sessions<D: Dialect>(
    connection: &mut D::Connection,
    session: &SessionKey,
    at: DateTime<Utc>,
) -> Result<Vec<String>> {
    let mut query = QueryBuilder::<D>::new("UPDATE sessions_consolidations SET closed_at = ");
    query
        .int(ts(at))
        .push(" WHERE user_id = ")
        .text(&session.user_id)
        .push(" AND chat_id = ")
        .text(chat_key(session.chat_id.as_deref()))
        .push(" AND closed_at IS NULL AND session_id <> ")
        .text(&session.session_id)
        .push(" RETURNING session_id, consolidated_at");
    let mut pending = Vec::new();
    for row in D::rows(connection, query).await? {
        if D::opt_int(&row, "consolidated_at")?.is_none() {
            pending.push(D::text(&row, "session_id")?);
        }
    }
    pending.sort();
    Ok(pending)
}

/// Selects the episodes of `session` (alias `m`), active, and with `tail` appended.
fn session_episodes<D: Dialect>(session: &SessionKey, tail: &str) -> QueryBuilder<D> {
    let mut query = QueryBuilder::<D>::new(format!(
        "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.session_id = "
    ));
    query
        .text(&session.session_id)
        .push(" AND m.user_id = ")
        .text(&session.user_id)
        .push(" AND m.chat_id IS NOT DISTINCT FROM ")
        .opt_text(session.chat_id.as_deref())
        .push(" AND m.kind = 'episode' AND m.valid_until IS NULL")
        .push(tail);
    query
}

/// Appends ` WHERE` with the key of `session`'s consolidation record.
pub(super) fn push_session_key<D: Driver>(query: &mut QueryBuilder<D>, session: &SessionKey) {
    query
        .push(" WHERE user_id = ")
        .text(&session.user_id)
        .push(" AND chat_id = ")
        .text(chat_key(session.chat_id.as_deref()))
        .push(" AND session_id = ")
        .text(&session.session_id);
}

/// Appends the values of `session`'s consolidation key: user, chat and session, in that order.
pub(super) fn push_session_values<D: Driver>(query: &mut QueryBuilder<D>, session: &SessionKey) {
    query
        .text(&session.user_id)
        .push(", ")
        .text(chat_key(session.chat_id.as_deref()))
        .push(", ")
        .text(&session.session_id);
}

#[async_trait]
impl<S: SqlStore> SessionRecords for S {
    async fn pending_consolidations(&self, user_id: Option<&str>) -> Result<Vec<PendingSession>> {
        let mut query = QueryBuilder::<S::Db>::new(
            "SELECT user_id, chat_id, session_id, first_seen_at, attempts \
             FROM sessions_consolidations WHERE consolidated_at IS NULL",
        );
        if let Some(user_id) = user_id {
            query.push(" AND user_id = ").text(user_id);
        }
        query.push(format!(
            " ORDER BY first_seen_at, {}, {}, {}",
            S::Db::byte_order("user_id"),
            S::Db::byte_order("chat_id"),
            S::Db::byte_order("session_id")
        ));
        self.read(query)
            .await?
            .iter()
            .map(|row| {
                let chat_id = S::Db::text(row, "chat_id")?;
                Ok(PendingSession {
                    session: SessionKey {
                        user_id: S::Db::text(row, "user_id")?,
                        chat_id: (!chat_id.is_empty()).then_some(chat_id),
                        session_id: S::Db::text(row, "session_id")?,
                    },
                    first_seen_at: from_ts(S::Db::int(row, "first_seen_at")?),
                    attempts: S::Db::int(row, "attempts")?,
                })
            })
            .collect()
    }

    async fn is_session_consolidated(&self, session: &SessionKey) -> Result<bool> {
        let mut query =
            QueryBuilder::<S::Db>::new("SELECT consolidated_at FROM sessions_consolidations");
        push_session_key(&mut query, session);
        Ok(match self.read(query).await?.first() {
            Some(row) => S::Db::opt_int(row, "consolidated_at")?.is_some(),
            None => false,
        })
    }

    async fn session_provider(&self, session: &SessionKey) -> Result<Option<String>> {
        let mut query = QueryBuilder::<S::Db>::new("SELECT provider FROM sessions_consolidations");
        push_session_key(&mut query, session);
        match self.read(query).await?.first() {
            Some(row) => S::Db::opt_text(row, "provider"),
            None => Ok(None),
        }
    }

    async fn mark_session_consolidated(
        &self,
        session: &SessionKey,
        episode_ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<()> {
        let mut tx = self.write(WriteScope::Owner(&session.user_id)).await?;
        for chunk in episode_ids.chunks(500) {
            let mut update = QueryBuilder::<S::Db>::new("UPDATE memories SET consolidated_at = ");
            update.int(ts(at)).push(" WHERE id IN ").text_list(chunk);
            S::Db::execute(&mut tx, update).await?;
        }
        let mut unread = QueryBuilder::<S::Db>::new(
            "SELECT EXISTS (SELECT 1 FROM memories m WHERE m.session_id = ",
        );
        unread
            .text(&session.session_id)
            .push(" AND m.user_id = ")
            .text(&session.user_id)
            .push(" AND m.chat_id IS NOT DISTINCT FROM ")
            .opt_text(session.chat_id.as_deref())
            .push(
                " AND m.kind = 'episode' AND m.valid_until IS NULL \
                 AND m.consolidated_at IS NULL AND m.source_role = 'user') AS unread",
            );
        let unread = match S::Db::rows(&mut tx, unread).await?.first() {
            Some(row) => S::Db::flag(row, "unread")?,
            None => false,
        };
        let mut record = QueryBuilder::<S::Db>::new(
            "INSERT INTO sessions_consolidations \
             (user_id, chat_id, session_id, first_seen_at, consolidated_at) VALUES (",
        );
        push_session_values(&mut record, session);
        record
            .push(", ")
            .int(ts(at))
            .push(", ")
            .opt_int((!unread).then(|| ts(at)))
            .push(
                ") ON CONFLICT (user_id, chat_id, session_id) DO UPDATE \
                 SET consolidated_at = EXCLUDED.consolidated_at, \
                 attempts = CASE WHEN EXCLUDED.consolidated_at IS NULL \
                 THEN sessions_consolidations.attempts ELSE 0 END",
            );
        S::Db::execute(&mut tx, record).await?;
        tx.commit().await
    }

    async fn reset_failed_attempts(&self) -> Result<(u64, u64)> {
        let mut tx = self.write(WriteScope::Store).await?;
        let sessions = S::Db::execute(
            &mut tx,
            QueryBuilder::new(
                "UPDATE sessions_consolidations SET attempts = 0 \
                 WHERE consolidated_at IS NULL AND attempts > 0",
            ),
        )
        .await?;
        let memories =
            S::Db::execute(&mut tx, QueryBuilder::new(S::Db::CLEAR_ENRICHMENT_ATTEMPTS)).await?;
        tx.commit().await?;
        Ok((sessions, memories))
    }

    async fn record_consolidation_failure(&self, session: &SessionKey, error: &str) -> Result<i64> {
        let mut tx = self.write(WriteScope::Owner(&session.user_id)).await?;
        let mut query = QueryBuilder::<S::Db>::new(
            "UPDATE sessions_consolidations SET attempts = attempts + 1, last_error = ",
        );
        query.text(error);
        push_session_key(&mut query, session);
        query.push(" RETURNING attempts");
        let attempts = match S::Db::rows(&mut tx, query).await?.first() {
            Some(row) => S::Db::int(row, "attempts")?,
            None => 0,
        };
        tx.commit().await?;
        Ok(attempts)
    }

    async fn episodes_for_session(
        &self,
        session: &SessionKey,
        offset: usize,
        limit: usize,
    ) -> Result<EpisodePage> {
        let mut query = session_episodes::<S::Db>(
            session,
            &format!(
                " AND m.consolidated_at IS NULL ORDER BY m.event_time, m.{} LIMIT ",
                S::Db::STORED_ORDER
            ),
        );
        query
            .count(limit.saturating_add(1))
            .push(" OFFSET ")
            .count(offset);
        let mut episodes = self
            .read(query)
            .await?
            .iter()
            .map(S::Db::memory)
            .collect::<Result<Vec<_>>>()?;
        let next_offset = (episodes.len() > limit).then_some(offset + limit);
        episodes.truncate(limit);
        Ok(EpisodePage {
            episodes,
            next_offset,
        })
    }

    async fn recent_turns(&self, session: &SessionKey, limit: usize) -> Result<Vec<Memory>> {
        let mut query = session_episodes::<S::Db>(
            session,
            &format!(
                " ORDER BY m.event_time DESC, m.{} DESC LIMIT ",
                S::Db::STORED_ORDER
            ),
        );
        query.count(limit);
        let mut turns = self
            .read(query)
            .await?
            .iter()
            .map(S::Db::memory)
            .collect::<Result<Vec<_>>>()?;
        turns.reverse();
        Ok(turns)
    }
}
