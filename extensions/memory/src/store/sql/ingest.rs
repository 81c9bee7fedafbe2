//! Storing new memories, for both backends: a conversation turn on the hot path, or any memory,
//! each in one transaction with its entity links and its place in the index queue. Each
//! transaction takes its owners' turn, so that two writers storing the same event, or opening
//! the same session, take turns.

use std::collections::BTreeSet;

use async_trait::async_trait;
use mnemo_ner_api::ExtractedEntity;
use serde_json::Value;
use sqlx::{Database, QueryBuilder};

use super::sessions::{close_other_sessions, push_session_key, push_session_values};
use super::{link_entities, Bind, Driver, Run, SqlStore, WriteScope};
use crate::error::Result;
use crate::store::backend::MemoryIngest;
use crate::store::rows::{new_id, ts};
use crate::store::{NewMemory, StoredTurn, TurnRow};
use crate::types::SessionKey;

#[async_trait]
impl<S: SqlStore> MemoryIngest for S {
    async fn insert_memory(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        let owner = memory.user_id.as_deref().unwrap_or_default();
        let mut tx = self.write(WriteScope::Owner(owner)).await?;
        let id = insert_memory::<S>(&mut tx, memory, entities).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn insert_turns(&self, turns: &[TurnRow<'_>]) -> Result<Vec<StoredTurn>> {
        // The owner's turn makes the event check and the session's opening atomic: a second
        // writer storing the same event waits, then sees it stored. A batch of several owners'
        // turns (an admin's) takes each of their turns.
        let owners: Vec<&str> = turns
            .iter()
            .map(|turn| turn.memory.user_id.as_deref().unwrap_or_default())
            .collect::<BTreeSet<&str>>()
            .into_iter()
            .collect();
        let scope = match owners.as_slice() {
            [] => WriteScope::Owner(""),
            [owner] => WriteScope::Owner(owner),
            several => WriteScope::Owners(several),
        };
        let mut tx = self.write(scope).await?;
        let mut stored = Vec::with_capacity(turns.len());
        for turn in turns {
            stored.push(store_turn::<S>(&mut tx, turn).await?);
        }
        tx.commit().await?;
        Ok(stored)
    }
}

/// Stores one turn on `connection`, inside the caller's transaction (see
/// `MemoryIngest::insert_turn`).
async fn store_turn<S: SqlStore>(
    connection: &mut <S::Db as Database>::Connection,
    turn: &TurnRow<'_>,
) -> Result<StoredTurn> {
    let TurnRow {
        memory,
        entities,
        event_id,
        record_session,
        provider,
    } = *turn;
    let owner = memory.user_id.as_deref().unwrap_or_default();
    if let Some(event_id) = event_id {
        if let Some(earlier) = stored_event::<S>(connection, event_id, owner).await? {
            return Ok(StoredTurn {
                earlier,
                ..StoredTurn::default()
            });
        }
    }
    let mut new_session = false;
    let mut closed_sessions = Vec::new();
    if let (true, Some(session)) = (record_session, memory.session_key()) {
        // The session's messaging provider is the first one its user's turns name.
        let mut record = QueryBuilder::<S::Db>::new(
            "INSERT INTO sessions_consolidations \
             (user_id, chat_id, session_id, first_seen_at, provider) VALUES (",
        );
        push_session_values(&mut record, &session);
        record
            .push(", ")
            .int(ts(memory.event_time))
            .push(", ")
            .opt_text(provider)
            .push(") ON CONFLICT DO NOTHING");
        new_session = S::Db::execute(connection, record).await? == 1;
        if new_session {
            closed_sessions =
                close_other_sessions::<S::Db>(connection, &session, memory.created_at)
                    .await?
                    .into_iter()
                    .map(|session_id| SessionKey {
                        session_id,
                        ..session.clone()
                    })
                    .collect();
        } else {
            // A turn after the session was consolidated makes it pending again: the next
            // consolidation reads the episodes it has not read yet. A session opened without a
            // provider takes the first one a later turn names; one it has stays.
            let mut reopen = QueryBuilder::<S::Db>::new(
                "UPDATE sessions_consolidations SET consolidated_at = NULL, \
                 attempts = CASE WHEN consolidated_at IS NULL THEN attempts ELSE 0 END",
            );
            if let Some(provider) = provider {
                reopen
                    .push(", provider = COALESCE(provider, ")
                    .text(provider)
                    .push(")");
            }
            push_session_key(&mut reopen, &session);
            reopen.push(match provider {
                Some(_) => " AND (consolidated_at IS NOT NULL OR provider IS NULL)",
                None => " AND consolidated_at IS NOT NULL",
            });
            S::Db::execute(connection, reopen).await?;
        }
    }
    let id = insert_memory::<S>(connection, memory, entities).await?;
    if let Some(event_id) = event_id {
        let mut record = QueryBuilder::<S::Db>::new(
            "INSERT INTO ingested_events (user_id, event_id, memory_id) VALUES (",
        );
        record
            .text(owner)
            .push(", ")
            .text(event_id)
            .push(", ")
            .text(&id)
            .push(")");
        S::Db::execute(connection, record).await?;
    }
    Ok(StoredTurn {
        memory_id: Some(id),
        earlier: None,
        new_session,
        closed_sessions,
    })
}

/// Whether `owner` stored `event_id` before: `None` if not, else the memory it became if that
/// is still active.
async fn stored_event<S: SqlStore>(
    connection: &mut <S::Db as Database>::Connection,
    event_id: &str,
    owner: &str,
) -> Result<Option<Option<String>>> {
    // Ids are unique per user; a row with user '' stands for any user's (in SQLite, such rows
    // come from before schema 7, when events were not per user).
    let mut query = QueryBuilder::<S::Db>::new(
        "SELECT m.id AS id FROM ingested_events e \
         LEFT JOIN memories m ON m.id = e.memory_id AND m.valid_until IS NULL \
         AND COALESCE(m.user_id, '') = ",
    );
    query
        .text(owner)
        .push(" WHERE e.event_id = ")
        .text(event_id)
        .push(" AND e.user_id IN (")
        .text(owner)
        .push(", '') LIMIT 1");
    match S::Db::rows(connection, query).await?.first() {
        Some(row) => Ok(Some(S::Db::opt_text(row, "id")?)),
        None => Ok(None),
    }
}

/// Inserts a memory, queues it for a vector and links its entities on `connection`, inside the
/// caller's transaction (which holds the owner's turn); returns its id. Used by the lifecycle
/// for corrections.
pub(crate) async fn insert_memory<S: SqlStore>(
    connection: &mut <S::Db as Database>::Connection,
    memory: &NewMemory,
    entities: &[ExtractedEntity],
) -> Result<String> {
    let id = new_id(memory.kind.prefix());
    let mut insert = QueryBuilder::<S::Db>::new(
        "INSERT INTO memories (id, kind, content, session_id, user_id, chat_id, event_time, \
         created_at, confidence, decay_rate, source_ids, source_role, tags, attributes, \
         memory_type, expires_at, shared, subject_ids, quarantine, origin, valid_from) VALUES (",
    );
    insert
        .text(&id)
        .push(", ")
        .text(memory.kind.as_str())
        .push(", ")
        .text(&memory.content)
        .push(", ")
        .opt_text(memory.session_id.as_deref())
        .push(", ")
        .opt_text(memory.user_id.as_deref())
        .push(", ")
        .opt_text(memory.chat_id.as_deref())
        .push(", ")
        .int(ts(memory.event_time))
        .push(", ")
        .int(ts(memory.created_at))
        .push(", ")
        .float(memory.confidence)
        .push(", ")
        .float(memory.decay_rate)
        .push(", ")
        .text(Value::from(memory.source_ids.clone()).to_string())
        .push(", ")
        .opt_text(memory.source_role.as_deref())
        .push(", ")
        .text(Value::from(memory.tags.clone()).to_string())
        .push(", ")
        .text(Value::Object(memory.attributes.clone()).to_string())
        .push(", ")
        .opt_text(memory.memory_type.as_deref())
        .push(", ")
        .opt_int(memory.expires_at.map(ts))
        .push(", ")
        .int(i64::from(memory.shared))
        .push(", ")
        .text(Value::from(memory.subject_ids.clone()).to_string())
        .push(", ")
        .opt_text(
            memory
                .quarantine
                .as_ref()
                .map(|quarantine| serde_json::json!(quarantine).to_string()),
        )
        .push(", ")
        .text(memory.origin.as_str())
        .push(", ")
        .int(ts(memory.valid_from.unwrap_or(memory.event_time)))
        .push(")");
    S::Db::execute(connection, insert).await?;
    for subject in &memory.subject_ids {
        let mut link = QueryBuilder::<S::Db>::new(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (",
        );
        link.text(&id)
            .push(", ")
            .text(subject)
            .push(") ON CONFLICT DO NOTHING");
        S::Db::execute(connection, link).await?;
    }
    let mut queue =
        QueryBuilder::<S::Db>::new("INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES (");
    queue
        .text(&id)
        .push(", ")
        .int(ts(memory.created_at))
        .push(")");
    S::Db::execute(connection, queue).await?;
    let owner = memory.user_id.as_deref().unwrap_or_default();
    link_entities::<S>(connection, &id, owner, entities, Some(&memory.content)).await?;
    Ok(id)
}
