//! The [`MemoryApi`] trait: what the memory extension publishes in the kernel's `Services` as
//! `dyn MemoryApi`, for the maintenance and reflection extensions (the consolidator's tools and
//! the jobs' calls).

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{
    DecayAction, DecayReport, EpisodePage, ListRequest, Memory, MemoryKind, NewFact,
    PendingSession, SavedFacts, SearchHit, SearchRequest, SessionKey,
};

/// What other extensions may do with memory.
#[async_trait]
pub trait MemoryApi: Send + Sync + 'static {
    /// Hybrid (or single-mode) search with filters.
    ///
    /// # Errors
    /// The store fails.
    async fn search(&self, request: SearchRequest) -> Result<Vec<SearchHit>>;

    /// One owner's memories, newest first (by when they were said or learnt), filtered by
    /// scope, kind and whether they are still active: what an inspector or an export of one
    /// user shows, and what replay scenarios check the store by.
    ///
    /// # Errors
    /// The limit is 0 or over 1,000, or the store fails.
    async fn list_memories(&self, request: ListRequest) -> Result<Vec<Memory>>;

    /// One memory by id, active or not.
    ///
    /// # Errors
    /// The store fails.
    async fn get_memory(&self, id: &str) -> Result<Option<Memory>>;

    /// True once the session was consolidated (the consolidator's idempotency guard).
    ///
    /// # Errors
    /// The store fails.
    async fn is_session_consolidated(&self, session: &SessionKey) -> Result<bool>;

    /// A page of the session's episodes that no consolidation has read yet (page size from
    /// config, 30 by default), oldest first.
    ///
    /// # Errors
    /// The store fails.
    async fn get_episodes_for_consolidation(
        &self,
        session: &SessionKey,
        offset: usize,
    ) -> Result<EpisodePage>;

    /// Saves facts extracted from a session, owned by the session's user and kept in its chat,
    /// with two-level deduplication: exact duplicates inside the batch, and facts whose
    /// word-set Jaccard similarity to an active fact is at least `dedup_jaccard`.
    ///
    /// # Errors
    /// A fact is empty or too long (nothing is saved then), or the store fails.
    async fn save_facts_batch(
        &self,
        session: &SessionKey,
        facts: Vec<NewFact>,
    ) -> Result<SavedFacts>;

    /// Records that a consolidation of the session read `episode_ids` (the episodes
    /// [`MemoryApi::get_episodes_for_consolidation`] gave it): the next one reads only later
    /// turns, and the session stays pending if a user turn arrived meanwhile.
    ///
    /// # Errors
    /// The store fails.
    async fn mark_session_consolidated(
        &self,
        session: &SessionKey,
        episode_ids: &[String],
    ) -> Result<()>;

    /// Leases the session's consolidation to this process for `seconds`: true when no other
    /// process holds a live lease on it. Processes sharing one store (several servers on one
    /// PostgreSQL database, or several on one SQLite file) then never consolidate one session at
    /// once; a lease whose process died runs out.
    ///
    /// # Errors
    /// The store fails.
    async fn lease_consolidation(&self, session: &SessionKey, seconds: i64) -> Result<bool>;

    /// Gives up this process's lease on the session's consolidation (it ended, done or not).
    ///
    /// # Errors
    /// The store fails.
    async fn release_consolidation(&self, session: &SessionKey) -> Result<()>;

    /// Records a failed consolidation; returns the attempts so far.
    ///
    /// # Errors
    /// The store fails.
    async fn record_consolidation_failure(&self, session: &SessionKey, error: &str) -> Result<i64>;

    /// Sessions waiting for consolidation, oldest first.
    ///
    /// # Errors
    /// The store fails.
    async fn get_pending_consolidations(&self) -> Result<Vec<PendingSession>>;

    /// Active facts of the same owner that may contradict `fact_id` (hybrid search on its text),
    /// but for those decay faded: out of the context, a new fact does not retire them.
    ///
    /// # Errors
    /// The fact does not exist, or the store fails.
    async fn detect_conflicts(&self, fact_id: &str, limit: usize) -> Result<Vec<SearchHit>>;

    /// The old fact's confidence drops to 0.3; the new one records `supersedes`.
    ///
    /// # Errors
    /// Either fact is missing, or the store fails.
    async fn resolve_conflict(&self, old_fact_id: &str, new_fact_id: &str) -> Result<()>;

    /// Ebbinghaus decay of active facts; what happens to a fact below `threshold` is `action`'s:
    /// [`DecayAction::Archive`] fades it (it leaves the context the agent is given, search
    /// still finds it, ranked lower, and a recall brings it back; nothing is deleted);
    /// [`DecayAction::SoftDelete`] soft-deletes it and drops its vector, so that it is never
    /// retrieved again (facts an earlier run faded included). Protected facts never decay.
    ///
    /// # Errors
    /// The store fails; nothing is half-applied.
    async fn run_decay(&self, threshold: f64, action: DecayAction) -> Result<DecayReport>;

    /// True when the ner extension has a provider beyond the fast ones.
    fn accurate_ner_available(&self) -> bool;

    /// Memories to re-extract entities for: not enriched yet, with at most `max_entity_count`
    /// links, and fewer than `max_attempts` failed enrichments.
    ///
    /// # Errors
    /// The store fails.
    async fn get_memories_for_entity_enrichment(
        &self,
        kinds: &[MemoryKind],
        max_entity_count: usize,
        max_attempts: i64,
        limit: usize,
    ) -> Result<Vec<Memory>>;

    /// How many memories of `kinds` the enrichment gave up on after `max_attempts` failures:
    /// skipped by every run until `mnemo jobs retry`.
    ///
    /// # Errors
    /// The store fails.
    async fn count_enrichments_given_up(
        &self,
        kinds: &[MemoryKind],
        max_attempts: i64,
    ) -> Result<u64>;

    /// Re-extracts entities with the accurate strategy, links them and stamps `enriched_at`;
    /// returns the memory's entity-link count. A failed extraction is counted on the memory
    /// (`enrichment_attempts`), so that a memory the model keeps failing on is not retried
    /// forever.
    ///
    /// # Errors
    /// The memory is missing, NER fails, or the store fails.
    async fn enrich_memory_entities(&self, memory_id: &str) -> Result<usize>;

    /// Saves a reflection (never decays) for `user_id`'s personal memory, or with `chat_id` for
    /// that chat only (a reflection over a chat's memories is seen only there), and invalidates
    /// the cached latest reflection.
    ///
    /// # Errors
    /// The text is empty or too long, or the store fails.
    async fn save_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
        content: &str,
        source_ids: Vec<String>,
        tags: Vec<String>,
    ) -> Result<String>;

    /// The newest reflection for `user_id` in exactly this scope: personal without `chat_id`,
    /// that chat's with it.
    ///
    /// # Errors
    /// The store fails.
    async fn get_latest_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>>;

    /// Active, not superseded facts and episodes of the last `days` days, newest first, in
    /// every scope of the user (the caller groups them by chat).
    ///
    /// # Errors
    /// The store fails.
    async fn get_recent_memories_for_reflection(
        &self,
        user_id: Option<&str>,
        days: i64,
        limit: usize,
    ) -> Result<Vec<Memory>>;
}
