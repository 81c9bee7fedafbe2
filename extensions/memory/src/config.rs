//! `[extensions.memory]`.

use mnemo_kernel::ValidateConfig;
use mnemo_memory_api::{FusionMethod, OriginWeights};
use serde::{Deserialize, Serialize};

/// The memory extension's options; every key is listed in `config.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Database file, relative to the data directory (or absolute), when the store is SQLite.
    pub database: String,
    /// `postgres://…`: keep the store in PostgreSQL (with pgvector) instead of SQLite, so that
    /// several `mnemo serve` instances share it; no SQLite file is written then. Empty = SQLite.
    /// `MNEMO_DATABASE_URL` overrides it.
    pub database_url: String,
    /// PostgreSQL: connections in each instance's pool.
    pub max_connections: u32,
    /// SQLite `synchronous`: `full` (a committed write survives power loss) or `normal`; on
    /// PostgreSQL, `full` or `extra` keep `synchronous_commit` on, and the others turn it off.
    pub synchronous: String,
    /// How long a connection waits for a database lock, in milliseconds.
    pub busy_timeout_ms: u64,
    /// Facts injected into the system prompt before each turn.
    pub context_limit: usize,
    /// A caller whose scope holds at most this many memories gets up to `context_limit` facts
    /// in every context, the most relevant by the same fusion, even when none is similar to the
    /// prompt (seed 000: "include top N memory entries regardless of similarity", for a
    /// personal assistant's small store). Larger stores keep the similarity floor, so an
    /// unrelated prompt brings no unrelated facts; 0 = never.
    pub context_fill_below: usize,
    /// Results of `search_memory` when the caller gives no limit.
    pub search_limit: usize,
    /// Most results one search may return.
    pub max_search_limit: usize,
    /// Candidates taken from each list (FTS5, vector, entity) before fusion.
    pub candidates_per_list: usize,
    /// How hybrid search fuses its lists: `scores` (a weighted sum of BM25 and cosine scores,
    /// each normalised by the query's best match) or `rrf` (Reciprocal Rank Fusion, ranks only).
    pub fusion: FusionMethod,
    /// Score fusion: the vector list's share (0 to 1); the text (BM25) lists get the rest.
    pub vector_weight: f64,
    /// Score fusion over episodes: the share of the text weight (0 to 1) given to the
    /// conversation-context list, which scores a turn by its own BM25 plus that of the turn
    /// before it (a reply is about what it answers); the plain text list keeps the rest.
    pub context_weight: f64,
    /// Hybrid search: when the query names exactly one person who is named too often to be
    /// specific (a conversation's speaker), turns that person spoke (`Name: …`) get their
    /// relevance times 1 + this; 0 = off.
    pub speaker_weight: f64,
    /// Hybrid search: when the query names a period ("in May 2023", "last week"), memories said
    /// in it or in the week after get their relevance times 1 + this; 0 = off.
    pub period_weight: f64,
    /// Score fusion: added for memories linked to the query's entities, times the share matched.
    pub entity_weight: f64,
    /// The RRF constant k in score = sum of 1 / (k + rank) (`fusion = "rrf"`).
    pub rrf_k: f64,
    /// Hybrid search: an episode also gets this share of the relevance of the turn just before
    /// it in its session (an answer follows its question); 0 = off.
    pub previous_turn_weight: f64,
    /// Hybrid search: an episode also gets this share of the relevance of the turn just after it.
    pub next_turn_weight: f64,
    /// Hybrid search: an episode also gets this share of the relevance of the two best other
    /// turns of its session among the leading candidates (a session that matches in several
    /// turns is about the question); 0 = off.
    pub session_weight: f64,
    /// Hybrid search: the weight of the feedback list, which scores the candidates again by
    /// their similarity to the query vector moved towards the vectors of its
    /// `feedback_matches` best first matches (pseudo-relevance feedback); 0 = off.
    pub feedback_weight: f64,
    /// Hybrid search, score fusion: for a query in the first person, the weight of the
    /// sentence-key list, which scores each turn the user spoke by its best sentence's cosine
    /// similarity (as a share of the best one's margin over `sentence_floor`); added after the
    /// neighbours' and the session's shares, which it does not spread to; 0 = off.
    pub sentence_weight: f64,
    /// The cosine similarity the sentence-key list counts as unrelated.
    pub sentence_floor: f32,
    /// Hybrid search: how many of the best first matches shape the feedback query.
    pub feedback_matches: usize,
    /// Hybrid search: how far the feedback query moves from the query towards the mean of those
    /// matches (the query and the mean are unit vectors; 1 = halfway).
    pub feedback_shift: f64,
    /// Vector neighbours less similar than this (cosine) are not results: a nearest-neighbour
    /// list always has neighbours, related or not.
    pub min_similarity: f32,
    /// Vector search takes this many candidates per wanted neighbour by sign-bit Hamming
    /// distance, then re-scores them with 8-bit codes of the vectors; 0 searches exactly, by
    /// brute force over the float vectors.
    pub vector_oversample: usize,
    /// A new fact supersedes an older one of the same owner, chat and subjects at least this
    /// similar (cosine); no LLM is involved.
    pub supersede_similarity: f32,
    /// Turns of the current session shown in the context, each a user message and the agent's
    /// reply (seed 001's "last 5 turns (user + assistant)"): the last twice as many messages.
    pub context_window: usize,
    /// Messages from other sessions shown in the context (vector similarity above min_similarity).
    pub context_messages: usize,
    /// Rough size limit of the whole memory context block, in tokens (4 characters each).
    pub context_token_budget: usize,
    /// When expired memories are soft-deleted (cron, UTC); they are hidden from retrieval at once.
    pub expiry_cron: String,
    /// Longest memory text accepted, in characters; longer input is refused, not cut.
    pub max_content_chars: usize,
    /// Most items one tool call may carry in a list (`remember`'s `facts`); a longer list is
    /// refused whole.
    pub max_batch_size: usize,
    /// Longest line `mnemo ingest` and `mnemo import` read, in bytes; a longer line is refused
    /// without being read into memory, and the next line is read.
    pub max_event_bytes: usize,
    /// Decay rate per day given to new facts (0 = never decays).
    pub fact_decay_rate: f64,
    /// Two facts whose word sets have at least this Jaccard similarity are duplicates.
    pub dedup_jaccard: f64,
    /// Screen every write for memory poisoning (instructions aimed at the agent, hidden
    /// characters, imitated tool calls): a turn, a remembered memory or a reflection that
    /// carries them is stored quarantined, out of every context; a fact a model extracted that
    /// carries them is refused. Off stores everything as it comes, as before issue #47.
    pub quarantine_poisoned: bool,
    /// What becomes of a memory the chat's own model writes through a tool during a
    /// conversation (`remember`, `store_memory`) that the user's words in that conversation do
    /// not bear out (the consolidation's grounding check): `keep` stores it as the agent's claim
    /// (origin `agent`, weighed by `origin_weights.agent`, marked in the context, never
    /// superseding what the user stated), `refuse` refuses the call with an error the model
    /// sees. A memory the user's words bear out is stored as told either way.
    pub ungrounded_model_memories: UngroundedModelMemories,
    /// How much search trusts each origin of a memory (see [`OriginWeights`]).
    pub origin_weights: OriginWeights,
    /// Memories embedded per batch by the background indexer.
    pub index_batch_size: usize,
    /// Episodes per page for consolidation.
    pub consolidation_page_size: usize,
    /// Memories listed by `get_entity_info`.
    pub entity_memory_limit: usize,
    /// Which memory tools the model is offered.
    pub tools: ToolProfile,
    /// What forgetting a memory (the `forget_memory` tool, `DELETE /v1/memories/{id}`, `mnemo
    /// forget`) does: remove it for good, or soft-delete it as the reference design does.
    pub forget: ForgetMode,
}

/// What forgetting one memory does (`[extensions.memory] forget`). Erasing a user
/// (`forget-user`) and an explicit purge (`mnemo forget --purge`) always remove for good.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForgetMode {
    /// Removed for good, everywhere: row, text index, vector, entity links, cached vectors and
    /// the markdown copies. What a user who asks to forget expects.
    #[default]
    Hard,
    /// Soft-deleted (seed 003: "records are never physically removed"): never retrieved again,
    /// its vector dropped and its markdown copies removed, but the row stays, so an admin can
    /// bring it back (`mnemo restore`) or remove it for good (`mnemo forget --purge`).
    Soft,
}

/// A set of memory tools offered to the model (`[extensions.memory] tools`).
///
/// The seeds this system grew from each had their own tools; each set stays available, and the
/// default offers one tool per job so that a small model never has to pick between look-alikes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolProfile {
    /// `search_memory`, `remember`, `correct_fact`, `forget_memory`: one search, one way to
    /// store, one to fix, one to erase.
    #[default]
    Default,
    /// Seed 000's people-aware pair: `remember`, `recall`.
    People,
    /// Seed 001's typed memories: `search_memories`, `store_memory`, `forget_memory`,
    /// `set_context`, `get_context`.
    Typed,
    /// The reference design's orchestrator tools (seed 003): `search_memory`, `remember_fact`,
    /// `correct_fact`, `confirm_fact`, `memory_stats`, `get_entity_info`.
    Reference,
    /// All thirteen.
    All,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            database: "memory.db".to_owned(),
            database_url: String::new(),
            max_connections: 8,
            synchronous: "full".to_owned(),
            busy_timeout_ms: 5_000,
            context_limit: 10,
            context_fill_below: 500,
            search_limit: 10,
            max_search_limit: 50,
            candidates_per_list: 50,
            fusion: FusionMethod::Scores,
            vector_weight: 0.3,
            context_weight: 0.5,
            speaker_weight: 1.0,
            period_weight: 1.0,
            entity_weight: 0.1,
            rrf_k: 60.0,
            previous_turn_weight: 0.15,
            next_turn_weight: 0.1,
            session_weight: 0.1,
            feedback_weight: 0.3,
            sentence_weight: 1.5,
            sentence_floor: 0.2,
            feedback_matches: 3,
            feedback_shift: 0.5,
            min_similarity: 0.3,
            vector_oversample: 8,
            supersede_similarity: 0.75,
            context_window: 5,
            context_messages: 5,
            context_token_budget: 2_000,
            expiry_cron: "0 * * * *".to_owned(),
            max_content_chars: 20_000,
            max_batch_size: 50,
            max_event_bytes: 1 << 20,
            fact_decay_rate: 0.1,
            dedup_jaccard: 0.75,
            quarantine_poisoned: true,
            ungrounded_model_memories: UngroundedModelMemories::Keep,
            origin_weights: OriginWeights::default(),
            index_batch_size: 32,
            consolidation_page_size: 30,
            entity_memory_limit: 20,
            tools: ToolProfile::Default,
            forget: ForgetMode::Hard,
        }
    }
}

impl ValidateConfig for MemoryConfig {
    /// Checks value ranges; every problem names its key.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut need = |ok: bool, key: &str, rule: &str| {
            if !ok {
                problems.push(format!("key `{key}`: {rule}"));
            }
        };
        need(
            ["off", "normal", "full", "extra"].contains(&self.synchronous.as_str()),
            "synchronous",
            "must be off, normal, full or extra",
        );
        need(
            !self.database.trim().is_empty(),
            "database",
            "must not be empty",
        );
        need(
            self.database_url.is_empty() || is_postgres_url(&self.database_url),
            "database_url",
            "must be empty (SQLite) or a postgres:// or postgresql:// URL",
        );
        need(
            (1..=1000).contains(&self.max_connections),
            "max_connections",
            "must be between 1 and 1000",
        );
        need(
            self.context_limit <= 50,
            "context_limit",
            "must be at most 50",
        );
        need(self.search_limit >= 1, "search_limit", "must be at least 1");
        need(
            self.max_search_limit >= self.search_limit,
            "max_search_limit",
            "must be at least search_limit",
        );
        need(
            self.candidates_per_list >= 1,
            "candidates_per_list",
            "must be at least 1",
        );
        need(self.rrf_k > 0.0, "rrf_k", "must be positive");
        need(
            (1..=50).contains(&self.feedback_matches),
            "feedback_matches",
            "must be between 1 and 50",
        );
        need(
            (0.0..=10.0).contains(&self.feedback_shift),
            "feedback_shift",
            "must be between 0 and 10",
        );
        for (key, value) in [
            ("speaker_weight", self.speaker_weight),
            ("period_weight", self.period_weight),
            ("sentence_weight", self.sentence_weight),
        ] {
            need(
                (0.0..=10.0).contains(&value),
                key,
                "must be between 0 and 10",
            );
        }
        for (key, value) in [
            ("vector_weight", self.vector_weight),
            ("context_weight", self.context_weight),
            ("entity_weight", self.entity_weight),
            ("previous_turn_weight", self.previous_turn_weight),
            ("next_turn_weight", self.next_turn_weight),
            ("session_weight", self.session_weight),
            ("feedback_weight", self.feedback_weight),
        ] {
            need((0.0..=1.0).contains(&value), key, "must be between 0 and 1");
        }
        need(
            (-1.0..=1.0).contains(&self.supersede_similarity),
            "supersede_similarity",
            "must be between -1 and 1",
        );
        need(
            (-1.0..=1.0).contains(&self.sentence_floor),
            "sentence_floor",
            "must be between -1 and 1",
        );
        need(
            (-1.0..=1.0).contains(&self.min_similarity),
            "min_similarity",
            "must be between -1 and 1",
        );
        need(
            self.max_content_chars >= 1,
            "max_content_chars",
            "must be at least 1",
        );
        need(
            (1..=1_000).contains(&self.max_batch_size),
            "max_batch_size",
            "must be between 1 and 1000",
        );
        need(
            self.max_event_bytes >= 1_024,
            "max_event_bytes",
            "must be at least 1024",
        );
        need(
            (0.0..=10.0).contains(&self.fact_decay_rate),
            "fact_decay_rate",
            "must be between 0 and 10",
        );
        need(
            (0.0..=1.0).contains(&self.dedup_jaccard),
            "dedup_jaccard",
            "must be between 0 and 1",
        );
        need(
            self.index_batch_size >= 1,
            "index_batch_size",
            "must be at least 1",
        );
        need(
            self.consolidation_page_size >= 1,
            "consolidation_page_size",
            "must be at least 1",
        );
        if let Some((origin, weight)) = self.origin_weights.invalid() {
            need(
                false,
                &format!("origin_weights.{origin}"),
                &format!("must be between 0 and 1, not {weight}"),
            );
        }
        problems
    }
}

/// What becomes of a memory the chat's model writes that the user's words do not bear out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UngroundedModelMemories {
    /// Stored as the agent's claim (origin `agent`).
    Keep,
    /// Refused; the model is told why.
    Refuse,
}

/// The variable that overrides `database_url`.
pub const DATABASE_URL_ENV: &str = "MNEMO_DATABASE_URL";

/// True for a URL PostgreSQL's clients read.
fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl MemoryConfig {
    /// The PostgreSQL URL to use, if any: `MNEMO_DATABASE_URL` (from `lookup`) when it is set and
    /// not empty, else `database_url`; `None` means SQLite.
    ///
    /// # Errors
    /// The variable is set to something that is not a PostgreSQL URL.
    pub fn postgres_url(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<String>, String> {
        if let Some(url) = lookup(DATABASE_URL_ENV).filter(|url| !url.trim().is_empty()) {
            return if is_postgres_url(url.trim()) {
                Ok(Some(url.trim().to_owned()))
            } else {
                Err(format!(
                    "{DATABASE_URL_ENV} must be a postgres:// or postgresql:// URL"
                ))
            };
        }
        Ok((!self.database_url.is_empty()).then(|| self.database_url.clone()))
    }
}
