//! The hot path: storing conversation turns as episodes.

use std::time::Instant;

use mnemo_kernel::spans::gen_ai;
use mnemo_kernel::Event;
use mnemo_memory_api::spans;
use mnemo_ner_api::ExtractedEntity;
use serde_json::Map;
use tracing::Instrument as _;

use super::group_commit::OwnedTurn;
use super::MemoryService;
use crate::error::{record_failure, MemoryError, Result};
use crate::store::NewMemory;
use crate::types::{IngestedEvent, MemoryKind, Origin, SessionCompleted};

impl MemoryService {
    /// Refuses empty or over-long memory text, naming the limit.
    pub(crate) fn check_content(&self, field: &str, content: &str) -> Result<()> {
        if content.trim().is_empty() {
            return Err(MemoryError::Invalid(format!("`{field}` must not be empty")));
        }
        if content.contains('\0') {
            return Err(MemoryError::Invalid(format!(
                "`{field}` contains a NUL character"
            )));
        }
        let length = content.chars().count();
        if length > self.config.max_content_chars {
            return Err(MemoryError::Invalid(format!(
                "`{field}` is {length} characters; the limit is {} (max_content_chars)",
                self.config.max_content_chars
            )));
        }
        Ok(())
    }

    pub(super) fn fast_entities(&self, text: &str) -> Vec<ExtractedEntity> {
        self.state
            .get()
            .and_then(|state| state.ner.as_ref())
            .map(|ner| ner.extract_fast(text))
            .unwrap_or_default()
    }

    /// The hot path: saves a conversation event as an episode, links fast-NER entities, and on a
    /// user's new session announces the user's other open sessions as completed. No model call
    /// and no embedding happen here; the indexer embeds later.
    ///
    /// # Errors
    /// The event lacks ids or text, the text is too long, or the store fails.
    pub async fn ingest(&self, event: &Event) -> Result<Option<String>> {
        let span = tracing::info_span!(
            spans::INGEST,
            mnemo.ingest.outcome = tracing::field::Empty,
            gen_ai.operation.name = gen_ai::CREATE_MEMORY,
            gen_ai.memory.record.count = 1_i64,
            error.type = tracing::field::Empty,
        );
        let result = self
            .store_turn(event, true, Writer::Trusted)
            .instrument(span.clone())
            .await;
        let outcome = match &result {
            Ok(Some(_)) => "stored",
            Ok(None) => "skipped",
            Err(_) => "error",
        };
        span.record(spans::INGEST_OUTCOME, outcome);
        record_failure(&span, &result);
        result
    }

    /// Stores a conversation event as [`Self::ingest`] does, but announces none of the sessions
    /// it closes: an import leaves their consolidation to the scheduled job (or `mnemo jobs run
    /// execute_consolidation`) instead of waiting for the model session by session while it
    /// reads the file (40 events took 404 s with a local model).
    ///
    /// # Errors
    /// As [`Self::ingest`].
    pub async fn import(&self, event: &Event) -> Result<Option<String>> {
        self.store_turn(event, false, Writer::Trusted).await
    }

    /// Imports a turn as [`Self::import`] does, written by the user's own API key: a turn in a
    /// chat does not make its user a member (only a trusted writer, the host or an admin key,
    /// records that).
    ///
    /// # Errors
    /// As [`Self::ingest`].
    pub async fn import_from_user_key(&self, event: &Event) -> Result<Option<String>> {
        self.store_turn(event, false, Writer::UserKey).await
    }

    pub(super) async fn store_turn(
        &self,
        event: &Event,
        announce: bool,
        writer: Writer,
    ) -> Result<Option<String>> {
        let started = Instant::now();
        // A turn that announces nothing is an import's: the user's turns are marked imported.
        let Some(turn) = self.prepare_turn(event, !announce)? else {
            return Ok(None);
        };
        if writer == Writer::Trusted {
            self.note_members(&[turn.event]).await?;
        }
        let entities = turn.turn.entities.len();
        let stored = self
            .group_commit
            .commit(&self.state()?.store, vec![turn.turn])
            .await?;
        let id = self
            .finish_turn(
                turn.event,
                stored.into_iter().next().unwrap_or_default(),
                announce,
            )
            .await;
        tracing::debug!(memory_id = ?id, entities, micros = started.elapsed().as_micros() as u64, "turn handled");
        Ok(id)
    }

    /// Stores `events` (conversation turns) as [`Self::ingest`] stores one, all in one
    /// transaction: every one, or none. Each event is checked before anything is written, and
    /// the first that cannot be stored is named (`events[2]: …`). Returns, in order, what became
    /// of each (see [`IngestedEvent`]). With `from_user_key`, a turn in a chat does not make its
    /// user a member.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] naming the first bad event; the store fails (nothing is stored).
    pub async fn ingest_batch(
        &self,
        events: &[Event],
        from_user_key: bool,
    ) -> Result<Vec<IngestedEvent>> {
        let span = tracing::info_span!(
            spans::INGEST,
            mnemo.ingest.outcome = tracing::field::Empty,
            gen_ai.operation.name = gen_ai::CREATE_MEMORY,
            gen_ai.memory.record.count = mnemo_kernel::spans::count(events.len()),
            error.type = tracing::field::Empty,
        );
        let result = self
            .store_batch(events, from_user_key)
            .instrument(span.clone())
            .await;
        // One span for the batch (one transaction): `stored` when it stored any event.
        let outcome = match &result {
            Ok(ingested) if ingested.iter().any(|event| event.stored) => "stored",
            Ok(_) => "skipped",
            Err(_) => "error",
        };
        span.record(spans::INGEST_OUTCOME, outcome);
        record_failure(&span, &result);
        result
    }

    async fn store_batch(
        &self,
        events: &[Event],
        from_user_key: bool,
    ) -> Result<Vec<IngestedEvent>> {
        // Each event's turn, `None` for a session command.
        let mut events_stored: Vec<Option<&Event>> = Vec::with_capacity(events.len());
        let mut turns = Vec::with_capacity(events.len());
        for (index, event) in events.iter().enumerate() {
            let turn = self
                .prepare_turn(event, false)
                .map_err(|error| match error {
                    MemoryError::Invalid(message) => {
                        MemoryError::Invalid(format!("events[{index}]: {message}"))
                    }
                    other => other,
                })?;
            events_stored.push(turn.as_ref().map(|turn| turn.event));
            turns.extend(turn.map(|turn| turn.turn));
        }
        if !from_user_key {
            let ready: Vec<&Event> = events_stored.iter().flatten().copied().collect();
            self.note_members(&ready).await?;
        }
        let mut stored = self
            .group_commit
            .commit(&self.state()?.store, turns)
            .await?
            .into_iter();
        let mut ingested = Vec::with_capacity(events.len());
        for event in events_stored {
            ingested.push(match event {
                Some(event) => {
                    let turn = stored.next().unwrap_or_default();
                    match turn.earlier.clone() {
                        Some(earlier) if turn.memory_id.is_none() => IngestedEvent {
                            memory_id: Some(earlier),
                            stored: false,
                        },
                        _ => {
                            let memory_id = self.finish_turn(event, turn, true).await;
                            IngestedEvent {
                                stored: memory_id.is_some(),
                                memory_id,
                            }
                        }
                    }
                }
                None => IngestedEvent {
                    memory_id: None,
                    stored: false,
                },
            });
        }
        Ok(ingested)
    }

    /// What `event` is to become: its episode and entities; `None` for a session command.
    fn prepare_turn<'e>(
        &self,
        event: &'e Event,
        imported: bool,
    ) -> Result<Option<PreparedTurn<'e>>> {
        let state = self.state()?;
        let Some(text) = event.payload.text() else {
            return Ok(None);
        };
        let (Some(session_id), Some(user_id)) =
            (event.session_id.as_deref(), event.user_id.as_deref())
        else {
            return Err(MemoryError::Invalid(format!(
                "event {} has no session_id or user_id; it was not stored",
                event.id
            )));
        };
        self.check_content("text", text)?;
        if let Some(provider) = event.provider.as_deref() {
            mnemo_kernel::check_id("provider", provider)
                .map_err(|error| MemoryError::Invalid(error.to_string()))?;
        }
        let is_user = event.topic() == mnemo_kernel::TOPIC_USER_MESSAGE;
        // "/new" tells the host (and the markdown mirror) to start a new session; it is not
        // something the user said, so it is neither a turn nor reflected on.
        if is_user && text.trim() == mnemo_kernel::NEW_SESSION_COMMAND {
            tracing::debug!(event_id = %event.id, "a session command; not stored as a turn");
            return Ok(None);
        }
        let entities = self.fast_entities(text);
        let episode = NewMemory {
            kind: MemoryKind::Episode,
            content: text.to_owned(),
            session_id: Some(session_id.to_owned()),
            user_id: Some(user_id.to_owned()),
            chat_id: event.chat_id.clone(),
            event_time: event.at,
            created_at: state.ctx.now(),
            source_role: Some(if is_user { "user" } else { "assistant" }.to_owned()),
            source_ids: if event.id.is_empty() {
                Vec::new()
            } else {
                vec![format!("event:{}", event.id)]
            },
            tags: Vec::new(),
            attributes: Map::new(),
            decay_rate: self.config.fact_decay_rate,
            confidence: 1.0,
            memory_type: None,
            expires_at: None,
            shared: false,
            subject_ids: Vec::new(),
            // Stored whatever it says (nothing the user said is lost), held back if poisoned.
            quarantine: self.quarantine_for(text),
            // The agent's words are the agent's however they came.
            origin: match (is_user, imported) {
                (false, _) => Origin::Agent,
                (true, false) => Origin::User,
                (true, true) => Origin::Imported,
            },
            valid_from: None,
        };
        Ok(Some(PreparedTurn {
            event,
            turn: OwnedTurn {
                memory: episode,
                entities,
                event_id: (!event.id.is_empty()).then(|| event.id.clone()),
                record_session: is_user,
                provider: event.provider.clone(),
            },
        }))
    }

    /// Records the trusted writer's turns' users as members of their chats.
    async fn note_members(&self, events: &[&Event]) -> Result<()> {
        for event in events {
            if let (Some(chat), Some(user)) = (event.chat_id.as_deref(), event.user_id.as_deref()) {
                self.note_chat_member(chat, user).await?;
            }
        }
        Ok(())
    }

    /// After a turn's commit: announces the sessions it closed and wakes the indexer; returns
    /// its memory id, `None` when it was stored before.
    async fn finish_turn(
        &self,
        event: &Event,
        stored: crate::store::StoredTurn,
        announce: bool,
    ) -> Option<String> {
        let Some(id) = stored.memory_id else {
            tracing::debug!(event_id = %event.id, "event already stored; skipped");
            return None;
        };
        let Ok(state) = self.state() else {
            return Some(id);
        };
        let user_id = event.user_id.clone();
        // The user moved to a new session: the ones it closed are ready for consolidation.
        for session in stored.closed_sessions.into_iter().filter(|_| announce) {
            let completed = SessionCompleted { session };
            super::announce(
                &state.ctx,
                &completed,
                |announcement| {
                    announcement
                        .with_scope(None, user_id.clone(), event.chat_id.clone())
                        .with_parent(event.id.clone())
                },
                "the session waits for the nightly consolidation",
            )
            .await;
        }
        self.index_wakeup.notify_one();
        Some(id)
    }
}

/// A turn ready to store: its event, and its episode and entities.
#[derive(Debug)]
struct PreparedTurn<'e> {
    event: &'e Event,
    turn: OwnedTurn,
}

/// Who wrote a turn: whether its chat may count its user as a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Writer {
    /// The host, an admin key, an operator's import: a turn in a chat makes its user a member.
    Trusted,
    /// The user's own API key: it cannot make its user a member of anything.
    UserKey,
}
