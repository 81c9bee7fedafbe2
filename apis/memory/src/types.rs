//! The data the memory API speaks in: memories, search requests and hits, facts, sessions.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The three kinds of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// A raw dialogue turn.
    Episode,
    /// A durable fact, extracted or remembered explicitly; subject to decay.
    Fact,
    /// A weekly reflection; never decays.
    Reflection,
}

impl MemoryKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Episode => "episode",
            MemoryKind::Fact => "fact",
            MemoryKind::Reflection => "reflection",
        }
    }

    /// The prefix of this kind's memory ids (`ep`, `fact`, `ref`).
    pub fn prefix(self) -> &'static str {
        match self {
            MemoryKind::Episode => "ep",
            MemoryKind::Fact => "fact",
            MemoryKind::Reflection => "ref",
        }
    }

    /// Parses a stored or user-given name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "episode" => Some(MemoryKind::Episode),
            "fact" => Some(MemoryKind::Fact),
            "reflection" => Some(MemoryKind::Reflection),
            _ => None,
        }
    }
}

/// One stored memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// `ep_*`, `fact_*` or `ref_*`.
    pub id: String,
    /// Its kind.
    pub kind: MemoryKind,
    /// The text.
    pub content: String,
    /// The session it came from.
    pub session_id: Option<String>,
    /// The owner.
    pub user_id: Option<String>,
    /// The chat it came from.
    pub chat_id: Option<String>,
    /// When it happened.
    pub event_time: DateTime<Utc>,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
    /// When it was soft-deleted, if it was.
    pub valid_until: Option<DateTime<Utc>>,
    /// 0.0 to 1.0.
    pub confidence: f64,
    /// How often search returned it.
    pub access_count: i64,
    /// When search last returned it.
    pub last_accessed: Option<DateTime<Utc>>,
    /// Decay per day; 0 = protected.
    pub decay_rate: f64,
    /// Provenance: the memories it was derived from.
    pub source_ids: Vec<String>,
    /// Who spoke (episodes).
    pub source_role: Option<String>,
    /// Linked entities.
    pub entity_ids: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Extensible metadata.
    pub attributes: Map<String, Value>,
    /// Seed 001's type (`conversation`, `fact`, `context`), when it was stored with one.
    pub memory_type: Option<String>,
    /// When it stops being retrievable, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// True when every member of `chat_id` may see it.
    pub shared: bool,
    /// When a newer memory replaced it.
    pub superseded_at: Option<DateTime<Utc>>,
    /// The memory that replaced it.
    pub superseded_by_id: Option<String>,
    /// When decay faded it: out of the context the agent is given, still found by search
    /// (ranked lower), and back when it is recalled. `None` while it is fresh.
    pub faded_at: Option<DateTime<Utc>>,
    /// The people (person entity ids) it is about.
    pub subject_ids: Vec<String>,
    /// Why it is quarantined, if it is: its text carries instructions aimed at the agent,
    /// hidden characters or an imitation of a tool call. Never put into the agent's context;
    /// search shows it, flagged, until the user or an admin releases or forgets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine: Option<Quarantine>,
    /// Whose words it is: the user's, the agent's, told, inferred, reflected, imported, or a
    /// service's; search weighs it by this and the context block marks a model's words.
    #[serde(default)]
    pub origin: crate::Origin,
    /// Since when it is true in the world, where known (else when it was said).
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
    /// Until when it was true: a newer fact superseded it, or (equal to `valid_from`) a
    /// correction showed it was never true. `None` while it holds.
    #[serde(default)]
    pub valid_to: Option<DateTime<Utc>>,
}

/// Why a memory is quarantined: what the write-time screen found in its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Quarantine {
    /// The screen's reason: `hidden_characters`, `instruction_override`, `role_hijack`,
    /// `standing_instruction`, `exfiltration`, `prompt_leak` or `tool_call_imitation`.
    pub reason: String,
    /// What matched (at most 80 characters), or what hides text.
    pub evidence: String,
}

impl Memory {
    /// Whether it is the user's own words, and so evidence for what is drawn from it or written
    /// about it: not the assistant's turn, not a model's words ([`Origin::is_model_made`]) and
    /// not quarantined. The one rule behind a fact's evidence, a grounded `remember` and the
    /// people a context lists (`people_told_in` writes it in SQL).
    ///
    /// [`Origin::is_model_made`]: crate::Origin::is_model_made
    pub fn is_users_own_words(&self) -> bool {
        self.source_role.as_deref() != Some("assistant")
            && !self.origin.is_model_made()
            && self.quarantine.is_none()
    }

    /// Its seed-001 type, as a `memory_type` filter reads it: the type it was stored with, else
    /// `conversation` for an episode and its kind's name for the rest.
    pub fn type_name(&self) -> &str {
        match (&self.memory_type, self.kind) {
            (Some(memory_type), _) => memory_type,
            (None, MemoryKind::Episode) => MemoryType::Conversation.as_str(),
            (None, kind) => kind.as_str(),
        }
    }
}

/// How a hybrid search fuses its candidate lists (`fusion` in `[extensions.memory]`). A search
/// of one list (another [`SearchMode`]) ranks by RRF, which keeps the list's own order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum FusionMethod {
    /// The lists' normalised scores, weighted and added.
    #[default]
    Scores,
    /// Reciprocal Rank Fusion: each list adds 1 / (k + rank).
    Rrf,
}

impl FusionMethod {
    /// The name used in the configuration and in answers.
    pub fn as_str(self) -> &'static str {
        match self {
            FusionMethod::Scores => "scores",
            FusionMethod::Rrf => "rrf",
        }
    }
}

/// How a search ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// FTS5, vector and entity lists fused by their normalised scores (or by Reciprocal Rank
    /// Fusion with `fusion = "rrf"`).
    #[default]
    Hybrid,
    /// BM25 over FTS5 alone.
    Fts,
    /// Vector KNN alone.
    Vector,
    /// Entity match alone.
    Entity,
}

impl SearchMode {
    /// Parses a user-given name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "hybrid" => Some(SearchMode::Hybrid),
            "fts" => Some(SearchMode::Fts),
            "vector" => Some(SearchMode::Vector),
            "entity" => Some(SearchMode::Entity),
            _ => None,
        }
    }
}

/// Seed 001's memory types, each with its own lifetime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    /// A durable fact (the default); a new one about the same thing supersedes the old.
    #[default]
    Fact,
    /// A value for today: kept until the end of the day.
    Context,
    /// A conversation note, kept 30 days.
    Conversation,
}

impl MemoryType {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Fact => "fact",
            MemoryType::Context => "context",
            MemoryType::Conversation => "conversation",
        }
    }
}

/// A search and its filters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchRequest {
    /// What to look for.
    pub query: String,
    /// The caller: with `chat_id`, they see their personal memories, their memories of that chat
    /// and the chat's shared memories; without, their personal memories only. `None` with no
    /// chat searches every owner (internal use only).
    pub user_id: Option<String>,
    /// The chat the caller is in.
    pub chat_id: Option<String>,
    /// Only memories about (linked to) one of these entities; empty = no such filter.
    pub about: Vec<String>,
    /// The time expiry is judged at (the kernel clock); `None` ignores expiry.
    pub at: Option<DateTime<Utc>>,
    /// Ask about a past time: what the user believed then, or what was true then
    /// ([`crate::AsOf`]); `None` asks about now. Expiry is judged at that time too.
    pub as_of: Option<crate::AsOf>,
    /// Also return memories a newer one superseded.
    pub include_superseded: bool,
    /// Overrides `min_similarity` for the vector list (`Some(-1.0)`: nearest neighbours whatever
    /// their similarity).
    pub min_similarity: Option<f32>,
    /// Only memories of this seed-001 type (`conversation` = episodes and conversation
    /// memories, `fact`, `context`).
    pub memory_type: Option<MemoryType>,
    /// Only these kinds; empty = every kind.
    pub kinds: Vec<MemoryKind>,
    /// Leave out this session's memories (context injection excludes the current session).
    pub exclude_session: Option<String>,
    /// Only memories whose event time is at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Only memories whose event time is before this.
    pub until: Option<DateTime<Utc>>,
    /// Only memories carrying every one of these tags.
    pub tags: Vec<String>,
    /// Only memories whose metadata (their attributes, as `store_memory` keeps them) holds each
    /// of these keys with this value; empty = no such filter.
    pub metadata: serde_json::Map<String, Value>,
    /// Most results.
    pub limit: usize,
    /// How to rank.
    pub mode: SearchMode,
    /// Also return soft-deleted memories.
    pub include_deleted: bool,
    /// Leave out facts that decay faded: what the context the agent is given does. Search
    /// finds them (ranked lower by their confidence), and recalling them brings them back.
    pub exclude_faded: bool,
    /// Leave out quarantined memories: what the agent's context and the agent's own tools do.
    /// Search for the user or an admin finds them, flagged with the reason.
    pub exclude_quarantined: bool,
    /// Count the results as accessed (access_count, last_accessed).
    pub touch: bool,
}

impl SearchRequest {
    /// A search as every door starts it (the tools, `/v1/search`, `mnemo search`): `user`'s
    /// memories as they see them in `chat` (their personal ones, theirs of that chat and its
    /// shared ones; without a chat, their personal ones), hybrid, at most `limit` hits, counted
    /// as recalled. Each door then adds its own filters.
    pub fn for_caller(
        query: impl Into<String>,
        user_id: &str,
        chat_id: Option<&str>,
        limit: usize,
    ) -> Self {
        SearchRequest {
            query: query.into(),
            user_id: Some(user_id.to_owned()),
            chat_id: chat_id.map(str::to_owned),
            limit,
            touch: true,
            ..SearchRequest::default()
        }
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The memory.
    pub memory: Memory,
    /// Fused score (weighted normalised scores, or RRF), or the single list's rank score.
    pub score: f64,
    /// Why it ranked where it did: [`SearchHit::score`] is `(fused × speaker × period +
    /// neighbours + session) × confidence_weight`.
    pub why: ScoreBreakdown,
}

impl SearchHit {
    /// The score as hits show it, to six decimals.
    pub fn shown_score(&self) -> f64 {
        (self.score * 1e6).round() / 1e6
    }

    /// The hit as a model (the search tools) and `mnemo search --json` see it: `id`, `kind`,
    /// `content`, `score` (to six decimals), `event_time`, `session_id`, `tags`, `confidence`,
    /// `matched_by` (the lists that found it) and `supersedes`; and `quarantine` (reason and
    /// evidence) for a quarantined memory.
    pub fn summary(&self) -> Value {
        let memory = &self.memory;
        let mut summary = serde_json::json!({
            "id": memory.id,
            "kind": memory.kind.as_str(),
            "content": memory.content,
            "score": self.shown_score(),
            "event_time": memory.event_time.to_rfc3339(),
            "session_id": memory.session_id,
            "tags": memory.tags,
            "confidence": memory.confidence,
            "matched_by": self.why.lists.iter().map(|list| list.list.clone()).collect::<Vec<_>>(),
            "supersedes": memory.attributes.get("supersedes"),
            "origin": memory.origin,
            "origin_weight": self.why.origin_weight,
        });
        // A model's fact that contradicts what the user stated says so until they confirm it.
        if let (Some(contested), Some(fields)) = (
            memory.attributes.get(crate::CONTRADICTS),
            summary.as_object_mut(),
        ) {
            fields.insert(crate::CONTRADICTS.to_owned(), contested.clone());
        }
        // Only quarantined hits carry the key: the agent's tools never return them.
        if let (Some(quarantine), Some(fields)) = (&memory.quarantine, summary.as_object_mut()) {
            fields.insert("quarantine".to_owned(), serde_json::json!(quarantine));
        }
        summary
    }
}

/// How a search hit's score came about.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ScoreBreakdown {
    /// How the lists were fused for this search.
    #[serde(default)]
    pub fusion: FusionMethod,
    /// Each candidate list that returned the memory, in the order the lists were searched.
    pub lists: Vec<ListMatch>,
    /// The lists' fused relevance (weighted normalised scores, or RRF).
    pub fused: f64,
    /// The factor for being a turn spoken by the one conversation speaker the query names
    /// (hybrid search); 1 otherwise.
    #[serde(default = "no_factor")]
    pub speaker: f64,
    /// The factor for being said in the period the query names, or the week after (hybrid
    /// search); 1 otherwise.
    #[serde(default = "no_factor")]
    pub period: f64,
    /// What the neighbouring turns of its session added (hybrid search over episodes); may be
    /// negative when its own relevance was shared out.
    pub neighbours: f64,
    /// What the best other matches of its session added (hybrid search over episodes).
    #[serde(default)]
    pub session: f64,
    /// The factor its confidence contributed: `min(1, 0.5 + confidence)`.
    pub confidence_weight: f64,
    /// The factor its origin contributed (`[extensions.memory.origin_weights]`): the user's
    /// own words weigh more than the agent's, what was stated more than what was inferred.
    #[serde(default = "no_factor")]
    pub origin_weight: f64,
}

/// A factor that changes nothing.
fn no_factor() -> f64 {
    1.0
}

/// One candidate list's verdict on a memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListMatch {
    /// `fts`, `context`, `vector`, `entity` or `feedback`.
    pub list: String,
    /// 1-based rank in that list.
    pub rank: usize,
    /// The list's own score: BM25 relevance (fts), cosine similarity (vector; feedback, to the
    /// query moved towards its best first matches), or how many of the query's entities it is
    /// linked to (entity).
    pub score: f64,
}

/// One ranked list that hybrid search fuses, as the memory service's
/// `candidate_lists` returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateList {
    /// `fts`, `context` (BM25 with the turn before), `vector`, `entity` or `feedback` (the
    /// other lists' candidates scored again against the query moved towards its best first
    /// matches).
    pub name: &'static str,
    /// Memory ids, best first, each with the list's own score: BM25 relevance (fts, higher is
    /// better), cosine similarity (vector, feedback), or how many of the query's entities it is
    /// linked to (entity).
    pub hits: Vec<(String, f64)>,
}

/// Which memories [`crate::MemoryApi::list_memories`] lists: one owner's, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListRequest {
    /// The owner.
    pub user_id: String,
    /// Only memories kept in this chat; `None` lists every scope of the owner (personal and
    /// each chat), as the owner's own inspection does.
    pub chat_id: Option<String>,
    /// Only these kinds; empty for all.
    pub kinds: Vec<MemoryKind>,
    /// Also memories that are no longer active: soft-deleted by decay or a correction,
    /// superseded, or expired.
    pub include_inactive: bool,
    /// Only memories said or learnt at or after this time.
    #[serde(default)]
    pub since: Option<DateTime<Utc>>,
    /// Only memories said or learnt before this time.
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    /// Only memories linked to this entity (`ent_*`): memories that name it, and for a person
    /// the facts about them (a fact's subjects are linked too).
    #[serde(default)]
    pub entity_id: Option<String>,
    /// Only quarantined memories (the screen held them back from the agent's context), for the
    /// owner or an admin to release or forget.
    #[serde(default)]
    pub quarantined: bool,
    /// Most memories returned.
    pub limit: usize,
    /// Memories skipped first, for paging.
    pub offset: usize,
}

impl ListRequest {
    /// The owner's active memories of every kind and scope, the first `limit`.
    pub fn active(user_id: impl Into<String>, limit: usize) -> Self {
        Self {
            user_id: user_id.into(),
            chat_id: None,
            kinds: Vec::new(),
            include_inactive: false,
            since: None,
            until: None,
            entity_id: None,
            quarantined: false,
            limit,
            offset: 0,
        }
    }
}

/// A fact to save in a batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewFact {
    /// The fact's text.
    pub content: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Provenance: source episode ids.
    #[serde(default)]
    pub source_ids: Vec<String>,
    /// 0.0 to 1.0; default 1.0.
    #[serde(default)]
    pub confidence: Option<f64>,
}

/// Why a fact of a batch was not saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedFact {
    /// The fact's text.
    pub content: String,
    /// `duplicate_in_batch` or `similar_to:<id>`.
    pub reason: String,
}

/// What `save_facts_batch` did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedFacts {
    /// Ids of the facts saved, in input order.
    pub saved: Vec<String>,
    /// Facts left out as duplicates.
    pub skipped: Vec<SkippedFact>,
}

/// A page of a session's episodes, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodePage {
    /// The episodes.
    pub episodes: Vec<Memory>,
    /// Offset of the next page, if there is one.
    pub next_offset: Option<usize>,
}

/// What a decay run does with a fact whose confidence falls below the threshold
/// (`[extensions.memory_maintenance] decay_action`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecayAction {
    /// The fact fades (`faded_at`): it leaves the context the agent is given, search still
    /// finds it, and a recall brings it back. Nothing the user said silently disappears.
    #[default]
    Archive,
    /// The reference design's: the fact is soft-deleted (`valid_until`) and its vector
    /// dropped, as expiry does; it is never retrieved again, and its row stays for audit.
    SoftDelete,
}

/// What a decay run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecayReport {
    /// Facts whose confidence was lowered and that stay active.
    pub decayed: usize,
    /// Facts that fell below the threshold and faded: out of the context, still searchable
    /// ([`DecayAction::Archive`]).
    pub faded: usize,
    /// Facts that fell below the threshold and were soft-deleted, never retrieved again
    /// ([`DecayAction::SoftDelete`]).
    #[serde(default)]
    pub soft_deleted: usize,
}

/// An entity with what is linked to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityInfo {
    /// `ent_*`.
    pub id: String,
    /// The canonical name.
    pub name: String,
    /// person, project, organization, location, email, url, date or other.
    pub entity_type: String,
    /// Other names.
    pub aliases: Vec<String>,
    /// How often it was mentioned.
    pub mention_count: i64,
    /// A summary, if enrichment wrote one.
    pub summary: Option<String>,
    /// Active memories linked to it, newest first.
    pub memories: Vec<Memory>,
}

/// Counts for `memory_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryStats {
    /// Active episodes (neither soft-deleted nor superseded, as for every count here).
    pub episodes: i64,
    /// Active facts, but for those decay faded.
    pub facts: i64,
    /// Facts decay faded: out of the context the agent is given, still searchable, back on a
    /// recall. Counted apart from `facts`.
    #[serde(default)]
    pub faded_facts: i64,
    /// Active reflections.
    pub reflections: i64,
    /// Entities.
    pub entities: i64,
    /// Memories waiting for a vector.
    pub pending_index: i64,
    /// Event time of the newest active memory.
    pub latest: Option<DateTime<Utc>>,
}

/// One conversation session. A host's session id is only unique within one user's chat: hosts
/// often call every session `default`, `main` or `1`, so two users, or one user in two chats,
/// reuse it. Every session-keyed read and write goes through this key, never the id alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionKey {
    /// The user whose session it is.
    pub user_id: String,
    /// The chat it happens in; `None` for a personal conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// The host's session id.
    pub session_id: String,
}

impl SessionKey {
    /// The key of `session_id` for `user_id` in `chat_id`.
    pub fn new(
        user_id: impl Into<String>,
        chat_id: Option<String>,
        session_id: impl Into<String>,
    ) -> Self {
        Self {
            user_id: user_id.into(),
            chat_id,
            session_id: session_id.into(),
        }
    }
}

impl std::fmt::Display for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.chat_id {
            Some(chat) => write!(f, "{}/{chat}/{}", self.user_id, self.session_id),
            None => write!(f, "{}/{}", self.user_id, self.session_id),
        }
    }
}

/// A session waiting to be consolidated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingSession {
    /// The session.
    pub session: SessionKey,
    /// When it was first seen.
    pub first_seen_at: DateTime<Utc>,
    /// Failed consolidation attempts so far.
    pub attempts: i64,
}
