//! Storing new memories: a conversation turn on the hot path, or any memory, each in one
//! transaction with its entity links and its place in the index queue.

use async_trait::async_trait;
use mnemo_ner_api::ExtractedEntity;
use serde_json::Value;
use sqlx::{Sqlite, Transaction};

use super::entities::link_entities;
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::MemoryIngest;
use crate::store::rows::{new_id, ts};
use crate::store::sql::{chat_key, close_other_sessions};
use crate::store::{NewMemory, StoredTurn, TurnRow};
use crate::types::SessionKey;

#[async_trait]
impl MemoryIngest for MemoryStore {
    async fn insert_memory(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let id = insert_in_tx(&mut tx, memory, entities).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn insert_turns(&self, turns: &[TurnRow<'_>]) -> Result<Vec<StoredTurn>> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let mut stored = Vec::with_capacity(turns.len());
        for turn in turns {
            stored.push(store_turn_in_tx(&mut tx, turn).await?);
        }
        tx.commit().await?;
        Ok(stored)
    }
}

/// Stores one turn inside `tx` (see `MemoryIngest::insert_turn`).
async fn store_turn_in_tx(
    tx: &mut Transaction<'_, Sqlite>,
    turn: &TurnRow<'_>,
) -> Result<StoredTurn> {
    let TurnRow {
        memory,
        entities,
        event_id,
        record_session,
    } = *turn;
    if let Some(event_id) = event_id {
        // Ids are unique per user; a row from before schema 7 ('') stands for any user's.
        // The memory it became, if it is still there.
        let known: Option<Option<String>> = sqlx::query_scalar(
            "SELECT m.id FROM ingested_events e \
             LEFT JOIN memories m ON m.id = e.memory_id AND m.valid_until IS NULL \
             AND COALESCE(m.user_id, '') = ?2 \
             WHERE e.event_id = ?1 AND e.user_id IN (?2, '') LIMIT 1",
        )
        .bind(event_id)
        .bind(memory.user_id.as_deref().unwrap_or_default())
        .fetch_optional(&mut **tx)
        .await?;
        if let Some(earlier) = known {
            return Ok(StoredTurn {
                earlier,
                ..StoredTurn::default()
            });
        }
    }
    let mut new_session = false;
    let mut closed_sessions = Vec::new();
    if let (true, Some(session)) = (record_session, memory.session_key()) {
        new_session = sqlx::query(
            "INSERT OR IGNORE INTO sessions_consolidations \
             (user_id, chat_id, session_id, first_seen_at) VALUES (?, ?, ?, ?)",
        )
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .bind(ts(memory.event_time))
        .execute(&mut **tx)
        .await?
        .rows_affected()
            == 1;
        if new_session {
            closed_sessions = close_other_sessions::<Sqlite>(tx, &session, memory.created_at)
                .await?
                .into_iter()
                .map(|session_id| SessionKey {
                    session_id,
                    ..session.clone()
                })
                .collect();
        } else {
            // A turn after the session was consolidated makes it pending again: the next
            // consolidation reads the episodes it has not read yet.
            sqlx::query(
                "UPDATE sessions_consolidations SET consolidated_at = NULL, attempts = 0 \
                 WHERE user_id = ? AND chat_id = ? AND session_id = ? \
                 AND consolidated_at IS NOT NULL",
            )
            .bind(&session.user_id)
            .bind(chat_key(session.chat_id.as_deref()))
            .bind(&session.session_id)
            .execute(&mut **tx)
            .await?;
        }
    }
    let id = insert_in_tx(tx, memory, entities).await?;
    if let Some(event_id) = event_id {
        sqlx::query("INSERT INTO ingested_events (user_id, event_id, memory_id) VALUES (?, ?, ?)")
            .bind(memory.user_id.as_deref().unwrap_or_default())
            .bind(event_id)
            .bind(&id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(StoredTurn {
        memory_id: Some(id),
        earlier: None,
        new_session,
        closed_sessions,
    })
}

/// Inserts a memory, queues it for a vector and links its entities, inside `tx`.
pub(super) async fn insert_in_tx(
    tx: &mut Transaction<'_, Sqlite>,
    memory: &NewMemory,
    entities: &[ExtractedEntity],
) -> Result<String> {
    let id = new_id(memory.kind.prefix());
    sqlx::query(
        "INSERT INTO memories (id, kind, content, session_id, user_id, chat_id, event_time, \
         created_at, confidence, decay_rate, source_ids, source_role, tags, attributes, \
         memory_type, expires_at, shared, subject_ids) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&id)
    .bind(memory.kind.as_str())
    .bind(&memory.content)
    .bind(&memory.session_id)
    .bind(&memory.user_id)
    .bind(&memory.chat_id)
    .bind(ts(memory.event_time))
    .bind(ts(memory.created_at))
    .bind(memory.confidence)
    .bind(memory.decay_rate)
    .bind(Value::from(memory.source_ids.clone()).to_string())
    .bind(&memory.source_role)
    .bind(Value::from(memory.tags.clone()).to_string())
    .bind(Value::Object(memory.attributes.clone()).to_string())
    .bind(&memory.memory_type)
    .bind(memory.expires_at.map(ts))
    .bind(i64::from(memory.shared))
    .bind(Value::from(memory.subject_ids.clone()).to_string())
    .execute(&mut **tx)
    .await?;
    for subject in &memory.subject_ids {
        sqlx::query("INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)")
            .bind(&id)
            .bind(subject)
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query("INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES (?, ?)")
        .bind(&id)
        .bind(ts(memory.created_at))
        .execute(&mut **tx)
        .await?;
    let owner = memory.user_id.clone().unwrap_or_default();
    link_entities(tx, &id, &owner, entities, Some(&memory.content)).await?;
    Ok(id)
}
