//! Sessions: their consolidation records, and the turns of one session. A session's writes
//! hold its user's write lock; giving every failed session a fresh start holds the store's.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder, Row, Transaction};

use super::open::WriteScope;
use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::SessionRecords;
use crate::store::rows::{from_ts, memory_from_row, ts, MEMORY_COLUMNS};
use crate::types::{EpisodePage, Memory, PendingSession, SessionKey};

/// The stored form of a session's chat: '' for a personal conversation, so that the session
/// table's key holds no NULL (chat ids are never empty).
pub(super) fn chat_key(chat_id: Option<&str>) -> &str {
    chat_id.unwrap_or("")
}

/// Closes the user's other open sessions in the same chat (or personal conversation) as
/// `session`; returns the ids of those not consolidated yet, sorted.
pub(super) async fn close_other_sessions(
    tx: &mut Transaction<'_, Postgres>,
    session: &SessionKey,
    at: DateTime<Utc>,
) -> Result<Vec<String>> {
    let closed: Vec<(String, Option<i64>)> = sqlx::query_as(
        "UPDATE sessions_consolidations SET closed_at = $1 \
         WHERE user_id = $2 AND chat_id = $3 AND closed_at IS NULL AND session_id <> $4 \
         RETURNING session_id, consolidated_at",
    )
    .bind(ts(at))
    .bind(&session.user_id)
    .bind(chat_key(session.chat_id.as_deref()))
    .bind(&session.session_id)
    .fetch_all(&mut **tx)
    .await?;
    let mut pending: Vec<String> = closed
        .into_iter()
        .filter(|(_, consolidated_at)| consolidated_at.is_none())
        .map(|(id, _)| id)
        .collect();
    pending.sort();
    Ok(pending)
}

/// The order of a session's turns, oldest first, for alias `m`: a tie of event times is broken
/// by the order they were stored in (`seq`, as SQLite's rowid does).
const TURN_ORDER: &str = "m.event_time, m.seq";
/// [`TURN_ORDER`] reversed.
const TURN_ORDER_DESC: &str = "m.event_time DESC, m.seq DESC";

#[async_trait]
impl SessionRecords for PostgresStore {
    async fn pending_consolidations(&self, user_id: Option<&str>) -> Result<Vec<PendingSession>> {
        let mut builder = QueryBuilder::<Postgres>::new(
            "SELECT user_id, chat_id, session_id, first_seen_at, attempts \
             FROM sessions_consolidations WHERE consolidated_at IS NULL",
        );
        if let Some(user_id) = user_id {
            builder
                .push(" AND user_id = ")
                .push_bind(user_id.to_owned());
        }
        // Byte order, as SQLite sorts text.
        builder.push(
            " ORDER BY first_seen_at, user_id COLLATE \"C\", chat_id COLLATE \"C\", \
             session_id COLLATE \"C\"",
        );
        let rows = builder.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                let chat_id: String = row.try_get("chat_id")?;
                Ok(PendingSession {
                    session: SessionKey {
                        user_id: row.try_get("user_id")?,
                        chat_id: (!chat_id.is_empty()).then_some(chat_id),
                        session_id: row.try_get("session_id")?,
                    },
                    first_seen_at: from_ts(row.try_get("first_seen_at")?),
                    attempts: row.try_get("attempts")?,
                })
            })
            .collect()
    }

    async fn is_session_consolidated(&self, session: &SessionKey) -> Result<bool> {
        let at: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT consolidated_at FROM sessions_consolidations \
             WHERE user_id = $1 AND chat_id = $2 AND session_id = $3",
        )
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(matches!(at, Some(Some(_))))
    }

    async fn mark_session_consolidated(
        &self,
        session: &SessionKey,
        episode_ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<()> {
        let mut tx = self
            .begin_write(WriteScope::Owner(&session.user_id))
            .await?;
        if !episode_ids.is_empty() {
            sqlx::query("UPDATE memories SET consolidated_at = $1 WHERE id = ANY($2)")
                .bind(ts(at))
                .bind(episode_ids)
                .execute(&mut *tx)
                .await?;
        }
        let unread: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM memories m WHERE m.session_id = $1 AND m.user_id = $2 \
             AND m.chat_id IS NOT DISTINCT FROM $3 AND m.kind = 'episode' \
             AND m.valid_until IS NULL AND m.consolidated_at IS NULL AND m.source_role = 'user')",
        )
        .bind(&session.session_id)
        .bind(&session.user_id)
        .bind(&session.chat_id)
        .fetch_one(&mut *tx)
        .await?;
        let consolidated_at = (!unread).then(|| ts(at));
        sqlx::query(
            "INSERT INTO sessions_consolidations \
             (user_id, chat_id, session_id, first_seen_at, consolidated_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (user_id, chat_id, session_id) DO UPDATE \
             SET consolidated_at = EXCLUDED.consolidated_at, \
             attempts = CASE WHEN EXCLUDED.consolidated_at IS NULL \
             THEN sessions_consolidations.attempts ELSE 0 END",
        )
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .bind(ts(at))
        .bind(consolidated_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn reset_failed_attempts(&self) -> Result<(u64, u64)> {
        let mut tx = self.begin_write(WriteScope::Store).await?;
        let sessions = sqlx::query(
            "UPDATE sessions_consolidations SET attempts = 0 \
             WHERE consolidated_at IS NULL AND attempts > 0",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        // `->>` is NULL both for a missing key and a JSON null, as SQLite's json_extract; the
        // LIKE spares parsing the attributes of every memory.
        let memories = sqlx::query(
            "UPDATE memories SET attributes = (attributes::jsonb - 'enrichment_attempts')::text \
             WHERE attributes LIKE '%enrichment\\_attempts%' \
             AND (attributes::jsonb ->> 'enrichment_attempts') IS NOT NULL",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok((sessions, memories))
    }

    async fn record_consolidation_failure(&self, session: &SessionKey, error: &str) -> Result<i64> {
        let mut tx = self
            .begin_write(WriteScope::Owner(&session.user_id))
            .await?;
        let attempts: Option<i64> = sqlx::query_scalar(
            "UPDATE sessions_consolidations SET attempts = attempts + 1, last_error = $1 \
             WHERE user_id = $2 AND chat_id = $3 AND session_id = $4 RETURNING attempts",
        )
        .bind(error)
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(attempts.unwrap_or(0))
    }

    async fn episodes_for_session(
        &self,
        session: &SessionKey,
        offset: usize,
        limit: usize,
    ) -> Result<EpisodePage> {
        let rows = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.session_id = $1 AND m.user_id = $2 \
             AND m.chat_id IS NOT DISTINCT FROM $3 AND m.kind = 'episode' \
             AND m.valid_until IS NULL AND m.consolidated_at IS NULL \
             ORDER BY {TURN_ORDER} LIMIT $4 OFFSET $5"
        ))
        .bind(&session.session_id)
        .bind(&session.user_id)
        .bind(&session.chat_id)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let mut episodes = rows
            .iter()
            .map(memory_from_row)
            .collect::<Result<Vec<_>>>()?;
        let next_offset = (episodes.len() > limit).then_some(offset + limit);
        episodes.truncate(limit);
        Ok(EpisodePage {
            episodes,
            next_offset,
        })
    }

    async fn recent_turns(&self, session: &SessionKey, limit: usize) -> Result<Vec<Memory>> {
        let rows = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.session_id = $1 AND m.user_id = $2 \
             AND m.chat_id IS NOT DISTINCT FROM $3 AND m.kind = 'episode' \
             AND m.valid_until IS NULL ORDER BY {TURN_ORDER_DESC} LIMIT $4"
        ))
        .bind(&session.session_id)
        .bind(&session.user_id)
        .bind(&session.chat_id)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let mut turns = rows
            .iter()
            .map(memory_from_row)
            .collect::<Result<Vec<_>>>()?;
        turns.reverse();
        Ok(turns)
    }
}
