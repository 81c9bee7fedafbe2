//! What the storage traits take and give, the same for every backend: a memory to insert, what
//! storing a turn did, an item of the indexer's queue, a person, what ranking needs, whether
//! vector search is on, and what the integrity check found.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::types::{MemoryKind, Origin, Quarantine, SessionKey};

/// A memory to insert.
#[derive(Debug, Clone)]
pub(crate) struct NewMemory {
    /// Kind.
    pub(crate) kind: MemoryKind,
    /// Text.
    pub(crate) content: String,
    /// Session.
    pub(crate) session_id: Option<String>,
    /// Owner.
    pub(crate) user_id: Option<String>,
    /// Chat.
    pub(crate) chat_id: Option<String>,
    /// When it happened.
    pub(crate) event_time: DateTime<Utc>,
    /// When recorded.
    pub(crate) created_at: DateTime<Utc>,
    /// Speaker, for episodes.
    pub(crate) source_role: Option<String>,
    /// Provenance.
    pub(crate) source_ids: Vec<String>,
    /// Tags.
    pub(crate) tags: Vec<String>,
    /// Metadata.
    pub(crate) attributes: Map<String, Value>,
    /// Decay per day.
    pub(crate) decay_rate: f64,
    /// Initial confidence.
    pub(crate) confidence: f64,
    /// Seed 001's type, if given.
    pub(crate) memory_type: Option<String>,
    /// When it stops being retrievable.
    pub(crate) expires_at: Option<DateTime<Utc>>,
    /// Visible to every member of `chat_id`.
    pub(crate) shared: bool,
    /// The people it is about (person entity ids); they are linked as entities too.
    pub(crate) subject_ids: Vec<String>,
    /// Why it is stored quarantined (see `crate::screening`), if it is.
    pub(crate) quarantine: Option<Quarantine>,
    /// Whose words it is.
    pub(crate) origin: Origin,
    /// Since when it is true in the world, where known; `None` = since `event_time`.
    pub(crate) valid_from: Option<DateTime<Utc>>,
}

impl NewMemory {
    /// The session it belongs to: its user's, in its chat. `None` without a session or owner.
    pub(crate) fn session_key(&self) -> Option<SessionKey> {
        Some(SessionKey {
            user_id: self.user_id.clone()?,
            chat_id: self.chat_id.clone(),
            session_id: self.session_id.clone()?,
        })
    }
}

/// What [`MemoryStore::insert_turn`] stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredTurn {
    /// The new memory; `None` when the event was stored before.
    pub memory_id: Option<String>,
    /// When the event was stored before: the memory it became, if it is still active.
    pub earlier: Option<String>,
    /// True when this turn opened its session.
    pub new_session: bool,
    /// The user's other open sessions in the same chat (or personal conversation), which this
    /// turn closed by opening a new one and which still wait for consolidation: each is reported
    /// once, by the turn that closed it.
    pub closed_sessions: Vec<SessionKey>,
}

/// What ranking a search candidate needs: see [`MemoryStore::rank_keys`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RankKey {
    /// The memory's confidence.
    pub(crate) confidence: f64,
    /// Its event time, in seconds.
    pub(crate) event_time: i64,
    /// The turn before it in its session (episodes only, when asked for).
    pub(crate) previous: Option<String>,
    /// The turn after it in its session (episodes only, when asked for).
    pub(crate) next: Option<String>,
    /// Its session (episodes only).
    pub(crate) session: Option<SessionKey>,
    /// Whose words it is.
    pub(crate) origin: Origin,
}

/// A row of `rank_keys`' query: id, confidence, event time, previous and next turn, owner,
/// chat, session id (episodes only) and origin. PostgreSQL reads it as is; SQLite reads it packed, as
/// `RankColumns<Real>`, and turns it into this.
pub(crate) type RankRow = RankColumns<f64>;

/// [`RankRow`]'s columns, with the confidence as `Confidence` (SQLite reads it packed, as text).
pub(crate) type RankColumns<Confidence> = (
    String,
    Confidence,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

impl RankKey {
    /// The id and key a [`RankRow`] holds.
    pub(crate) fn from_row(row: RankRow) -> (String, Self) {
        let (id, confidence, event_time, previous, next, user_id, chat_id, session_id, origin) =
            row;
        // An episode of nobody's (no owner) is in no user's session.
        let session = user_id
            .zip(session_id)
            .map(|(user_id, session_id)| SessionKey {
                user_id,
                chat_id,
                session_id,
            });
        let key = Self {
            confidence,
            event_time,
            previous,
            next,
            session,
            // The column's check admits no other name; a row read past it counts as the user's.
            origin: Origin::parse(&origin).unwrap_or_default(),
        };
        (id, key)
    }
}

/// A full-text first pass (see `search::full_text`): the memories that have one of the query's
/// rare words, or all its common words together.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FirstPass {
    /// The FTS5 query ranked: `rare OR (common)`.
    pub(crate) query: String,
    /// The common words together, as an FTS5 query (`"a" AND "b"`).
    pub(crate) common: String,
    /// The rare words, as an FTS5 query (`"x" OR "y"`); `None` when every word is common.
    pub(crate) rare: Option<String>,
    /// How many of the last stored matches of `common` within the request's scope (highest
    /// rowid on SQLite) a memory with none of the rare words must be among to be ranked.
    pub(crate) newest_kept: usize,
}

/// The memories a search may see, as far as the full-text index can tell them apart: an
/// owner's, and in a chat also the chat's shared ones (the visibility rule itself, with the
/// other filters, is applied after the match; see `sqlite::scope`). No owner and no chat is the
/// whole store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct TextScope<'a> {
    pub(crate) user_id: Option<&'a str>,
    pub(crate) chat_id: Option<&'a str>,
}

impl<'a> TextScope<'a> {
    /// The scope `request` searches in.
    pub(crate) fn of(request: &'a crate::types::SearchRequest) -> Self {
        Self {
            user_id: request.user_id.as_deref(),
            chat_id: request.chat_id.as_deref(),
        }
    }
}

/// A memory waiting for its vector.
#[derive(Debug, Clone)]
pub struct IndexItem {
    /// The memory.
    pub memory_id: String,
    /// Its text.
    pub content: String,
    /// Its owner (a vector-table metadata column).
    pub user_id: String,
    /// Its kind (a vector-table metadata column).
    pub kind: String,
    /// False when it was deleted before being indexed.
    pub active: bool,
    /// A turn the user spoke, which also gets sentence keys (see `crate::sentence_keys`).
    pub spoken_by_user: bool,
}

/// Whether vector search can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorStatus {
    /// `vec_memories` matches the embedding provider.
    Enabled {
        /// Vector length.
        dimensions: usize,
        /// The provider's model id.
        model_id: String,
    },
    /// Vector search is off; the reason says why and what to do.
    Disabled {
        /// Why.
        reason: String,
    },
}

/// The size of the in-memory vector index: one row per memory with a vector, one per sentence
/// key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MirrorSize {
    /// Rows for memories' own vectors.
    pub memory_rows: usize,
    /// Rows for the sentence keys of the user's turns.
    pub sentence_rows: usize,
    /// Approximate heap bytes of both (0 where the database holds the vectors).
    pub heap_bytes: usize,
}

/// What the store's integrity check (`mnemo check`) found. Consistent when [`Self::problems`]
/// is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IntegrityReport {
    /// `PRAGMA integrity_check`'s findings; empty when it says `ok`.
    pub database: Vec<String>,
    /// The full-text index disagrees with `memories` (FTS5 `integrity-check`): why.
    pub full_text: Option<String>,
    /// Rows of `memories` (active or not).
    pub memories: i64,
    /// Active memories (not soft-deleted).
    pub active: i64,
    /// Vectors in `vec_memories`; `None` when no vector index exists.
    pub vectors: Option<i64>,
    /// Vectors and sentence keys whose memory is gone or soft-deleted.
    pub orphan_vectors: i64,
    /// Active memories with neither a vector nor a place in the indexer's queue: lost from
    /// semantic search.
    pub unindexed: i64,
    /// Active memories waiting in the indexer's queue (not a fault: the indexer catches up).
    pub queued: i64,
    /// Recorded event ids whose memory was forgotten: kept on purpose (an id, no content), so
    /// that replaying the same events does not bring the memory back. Not a fault.
    pub forgotten_events: i64,
}

impl IntegrityReport {
    /// What is wrong, one line each; empty when the store is consistent.
    pub fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self
            .database
            .iter()
            .map(|finding| format!("database: {finding}"))
            .collect();
        if let Some(reason) = &self.full_text {
            problems.push(format!("full-text index: {reason}"));
        }
        if self.orphan_vectors > 0 {
            problems.push(format!(
                "{} vectors belong to no active memory",
                self.orphan_vectors
            ));
        }
        if self.unindexed > 0 {
            problems.push(format!(
                "{} active memories have no vector and are not queued for one",
                self.unindexed
            ));
        }
        problems
    }
}

/// A turn to store with others in one transaction (`MemoryIngest::insert_turns`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnRow<'a> {
    /// The episode.
    pub(crate) memory: &'a NewMemory,
    /// Its fast-NER entities, to link.
    pub(crate) entities: &'a [mnemo_ner_api::ExtractedEntity],
    /// The event's id, recorded so that it is stored once.
    pub(crate) event_id: Option<&'a str>,
    /// Whether it opens or reopens its session's consolidation row (a user's turn).
    pub(crate) record_session: bool,
    /// The messaging provider its event named (`telegram`): the session keeps the first one
    /// its turns name.
    pub(crate) provider: Option<&'a str>,
}

/// A forget to carry out with everything derived from it ([`MemoryRemoval::forget`]).
///
/// [`MemoryRemoval::forget`]: crate::store::backend::MemoryRemoval::forget
#[derive(Debug, Clone)]
pub(crate) struct ForgetRequest<'a> {
    /// The memories asked for.
    pub(crate) ids: &'a [String],
    /// Soft-delete (`forget = "soft"`) instead of removing for good.
    pub(crate) soft: bool,
    /// The owner who asked, for the receipt; `None` for an admin.
    pub(crate) user_id: Option<&'a str>,
    /// When.
    pub(crate) at: DateTime<Utc>,
    /// The recent query vectors dropped with it (the searcher's cache, outside the store).
    pub(crate) query_vectors: u64,
}

/// What a forget did: the announcements for the markdown mirror, and the receipt (stored in
/// `forget_receipts` in the same transaction).
#[derive(Debug, Clone)]
pub(crate) struct Forgetting {
    /// One `memory.forgotten` announcement per removed memory.
    pub(crate) forgotten: Vec<crate::types::MemoryForgotten>,
    /// The receipt.
    pub(crate) receipt: crate::types::ForgetReceipt,
}

/// What erasing a user did: the `memory.user_erased` announcement and the receipt, the one
/// receipt of that user the audit table keeps.
#[derive(Debug, Clone)]
pub(crate) struct Erasure {
    /// The announcement.
    pub(crate) erased: crate::types::UserErased,
    /// The receipt.
    pub(crate) receipt: crate::types::ForgetReceipt,
}
