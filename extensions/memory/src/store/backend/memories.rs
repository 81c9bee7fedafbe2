//! The storage traits for memories themselves: reading, storing, removing, and a fact's
//! lifecycle.

use async_trait::async_trait;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;

use crate::error::Result;
use crate::store::{Erasure, ForgetRequest, Forgetting, NewMemory, RankKey, StoredTurn, TurnRow};
use crate::types::{
    DecayAction, DecayReport, ForgetReceipt, ListRequest, Memory, MemoryKind, MemoryStats,
    SearchRequest,
};

/// What a search reads and writes of memories: the keys ranking needs, and counting accesses.
/// Each backend writes these for its own database; the rest of [`MemoryRecords`] is written
/// once (`store/sql/records.rs`).
#[async_trait]
pub(crate) trait SearchRecords: Send + Sync {
    /// Which of `ids` pass the request's filters, with what ranking needs and without reading
    /// their text: confidence, event time, an episode's session and, with `neighbours`, its previous and
    /// next turn in its session.
    ///
    /// # Errors
    /// The database fails.
    async fn rank_keys(
        &self,
        ids: &[String],
        request: &SearchRequest,
        neighbours: bool,
    ) -> Result<HashMap<String, RankKey>>;

    /// Counts the memories as recalled `times` more times, the last at `at` (a later
    /// recall already written stays the last).
    ///
    /// # Errors
    /// The database fails.
    async fn touch(&self, ids: &[String], times: u32, at: DateTime<Utc>) -> Result<()>;
}

/// Reading memories: by id, through a request's filters, the keys ranking needs and counting
/// accesses ([`SearchRecords`]), and the listings the service, tools and jobs ask for.
#[async_trait]
pub(crate) trait MemoryRecords: SearchRecords {
    /// One memory by id, active or not.
    ///
    /// # Errors
    /// The database fails.
    async fn get(&self, id: &str) -> Result<Option<Memory>>;

    /// Memories by id that pass the request's filters, keyed by id.
    ///
    /// # Errors
    /// The database fails.
    async fn load_filtered(
        &self,
        ids: &[String],
        request: &SearchRequest,
    ) -> Result<HashMap<String, Memory>>;

    /// Counts of active memories, entities and the index queue; only `user_id`'s if given.
    ///
    /// # Errors
    /// The database fails.
    async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats>;

    /// Active memories of `kinds` not yet enriched and with at most `max_entities` entity links.
    ///
    /// # Errors
    /// The database fails.
    async fn memories_for_enrichment(
        &self,
        kinds: &[MemoryKind],
        max_entities: usize,
        max_attempts: i64,
        limit: usize,
    ) -> Result<Vec<Memory>>;

    /// How many active memories of `kinds`, not enriched, the enrichment gave up on: they
    /// failed `max_attempts` times (`mnemo jobs retry` gives them a fresh start).
    ///
    /// # Errors
    /// The database fails.
    async fn enrichments_given_up(&self, kinds: &[MemoryKind], max_attempts: i64) -> Result<u64>;

    /// The newest active reflection for `user_id` (or one without an owner) in exactly the
    /// scope of `chat_id`: personal without it, that chat's with it. A quarantined one is
    /// passed over: it never reaches a context.
    ///
    /// # Errors
    /// The database fails.
    async fn latest_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>>;

    /// Active, not superseded, not quarantined facts and episodes of `user_id` since `since`,
    /// newest first: what the weekly reflection's model reads.
    ///
    /// # Errors
    /// The database fails.
    async fn recent_memories(
        &self,
        user_id: Option<&str>,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Memory>>;

    /// One owner's memories by scope, kind and activity at `now`, newest first, a page of them.
    ///
    /// # Errors
    /// The database fails.
    async fn list_memories(&self, request: &ListRequest, now: DateTime<Utc>)
        -> Result<Vec<Memory>>;

    /// The latest active, unexpired `context` memory of `owner` with attribute `key`, set in
    /// `chat_id` (or, failing that, outside any chat).
    ///
    /// # Errors
    /// The database fails.
    async fn context_value(
        &self,
        owner: &str,
        chat_id: Option<&str>,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Memory>>;
}

/// Storing new memories, each in one transaction with its entity links and its place in the
/// index queue.
#[async_trait]
pub(crate) trait MemoryIngest: Send + Sync {
    /// Inserts a memory, queues it for a vector, and links its entities, in one transaction.
    ///
    /// # Errors
    /// The database fails; nothing is written then.
    async fn insert_memory(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String>;

    /// Stores a conversation turn on the hot path, in one transaction (one fsync): the memory
    /// with its entity links and index-queue row; the event id, so that a replayed event is
    /// stored once (`None` memory id then); and, with `record_session`, the session's
    /// consolidation row (`new_session` is true when this turn opened it, and the user's other
    /// open sessions are closed then).
    ///
    /// # Errors
    /// The database fails; nothing is written then.
    #[cfg(test)]
    async fn insert_turn(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
        event_id: Option<&str>,
        record_session: bool,
    ) -> Result<StoredTurn> {
        let mut stored = self
            .insert_turns(&[TurnRow {
                memory,
                entities,
                event_id,
                record_session,
                provider: None,
            }])
            .await?;
        Ok(stored.pop().unwrap_or_default())
    }

    /// Stores `turns` as [`Self::insert_turn`] stores one, all in one transaction: every one
    /// of them, or (when the database fails) none. An event id twice in `turns` is stored once.
    /// Returns what became of each, in order.
    ///
    /// # Errors
    /// The database fails; nothing is written then.
    async fn insert_turns(&self, turns: &[TurnRow<'_>]) -> Result<Vec<StoredTurn>>;
}

/// Removing memories for good: some of them, or everything about a user.
#[async_trait]
pub(crate) trait MemoryRemoval: Send + Sync {
    /// Forgets the memories `request.ids` and everything derived from them, in one
    /// transaction: facts whose sources are all forgotten, facts that no longer stand on the
    /// sources they have left, reflections built on any of them (see `store/sql/lineage.rs`),
    /// each removed for good: the row (and through the trigger its full-text entry), its vectors,
    /// sentence keys, queue entry, entity links and the embedding cache's vectors of its text,
    /// while the event id it was stored from stays recorded (an id, no content) so that
    /// replaying the same events does not bring it back (or soft-deleted, under
    /// `request.soft`), the
    /// entities no memory mentions any more (not under `soft`), and the forgotten ids dropped
    /// from the provenance of the facts that stay. The receipt, stored in `forget_receipts` in
    /// the same transaction, names every memory and entity removed or changed and counts the
    /// artefacts that went with them. Unknown ids are skipped (an empty receipt).
    ///
    /// # Errors
    /// The database fails; nothing changes then.
    async fn forget(&self, request: &ForgetRequest<'_>) -> Result<Forgetting>;

    /// The newest `limit` receipts of `user_id` (every user's for `None`), newest first.
    ///
    /// # Errors
    /// The database fails, or a stored receipt is not one.
    async fn receipts(&self, user_id: Option<&str>, limit: usize) -> Result<Vec<ForgetReceipt>>;

    /// Removes everything stored about `user_id`, in one transaction: every memory they own
    /// (active or soft-deleted, in any chat, as [`Self::forget`] removes one), the event ids they were
    /// stored from, their entities and people, and their sessions' consolidation records.
    /// Their earlier forget receipts go too; the erasure's own receipt (the kinds and ids of
    /// what it removed) is the one receipt of theirs the audit table keeps. Returns the
    /// `memory.user_erased` announcement and the receipt.
    ///
    /// # Errors
    /// The database fails; nothing is removed then.
    async fn erase_user(&self, user_id: &str) -> Result<Erasure>;
}

/// Forgetting that keeps the row (`forget = "soft"`, the reference design's "records are
/// never physically removed"), and bringing such a memory back. Written once for both backends
/// (`store/sql/retire.rs`).
#[async_trait]
pub(crate) trait SoftForget: Send + Sync {
    /// Brings back the soft-deleted memory `id` (forgotten softly, expired, corrected or
    /// decayed): active again and queued for its vector. If a soft forget of `id` alone retired
    /// it, what that forget took with it comes back too, as its receipt lists it: the memories
    /// it soft-deleted (those still as it left them), and the sources it took from facts that
    /// stayed. Nothing restored when no soft-deleted memory has this id (an active one is left
    /// as it is).
    ///
    /// # Errors
    /// The database fails; nothing changes then.
    async fn restore(&self, id: &str) -> Result<crate::types::Restoration>;

    /// Releases the quarantined memory `id`: the screen's hold is lifted, and the memory may
    /// be put into the agent's context again. `false` when no memory with this id is
    /// quarantined.
    ///
    /// # Errors
    /// The database fails; nothing changes then.
    async fn release(&self, id: &str) -> Result<bool>;
}

/// A fact's life after it is stored: corrections, confirmation, conflicts, supersession,
/// decay and expiry.
#[async_trait]
pub(crate) trait FactLifecycle: Send + Sync {
    /// Replaces an active fact in one transaction: soft-deletes `old_id` and inserts the
    /// correction with the old id in its provenance; returns the new id.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] if `old_id` is not an active fact of `user_id`.
    async fn correct(
        &self,
        old_id: &str,
        user_id: Option<&str>,
        replacement: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String>;

    /// Protects a fact: decay rate 0, confidence 1. A model's fact becomes the user's word
    /// (origin `told`, the one it had kept as `confirmed_origin`), and the stated facts it
    /// contradicts (`contradicts`, see [`FactLifecycle::contest`]) are resolved as
    /// [`FactLifecycle::resolve_conflict`] resolves them, in the same transaction. Returns the
    /// ids of those it now supersedes.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] if it is not an active fact of `user_id`.
    async fn confirm(&self, id: &str, user_id: Option<&str>) -> Result<Vec<String>>;

    /// Lowers the old fact's confidence to 0.3 and records `supersedes` on the new one.
    ///
    /// # Errors
    /// Either fact is missing.
    async fn resolve_conflict(&self, old_id: &str, new_id: &str) -> Result<()>;

    /// Records that the model's fact `new_id` contradicts `old_id`, which someone stated,
    /// without touching `old_id`: `old_id` joins `new_id`'s `contradicts` list, which the
    /// user's confirmation of `new_id` resolves.
    ///
    /// # Errors
    /// Either fact is missing.
    async fn contest(&self, old_id: &str, new_id: &str) -> Result<()>;

    /// Ebbinghaus decay of active facts: confidence × exp(−rate × days since the later of the
    /// last access and the last decay), so no elapsed day is counted twice. Facts below
    /// `threshold` fade (`faded_at`, kept whole and searchable) under
    /// [`DecayAction::Archive`], or are soft-deleted (`valid_until`) and lose their vector
    /// under [`DecayAction::SoftDelete`], which also takes the facts an earlier run faded.
    /// Protected facts (rate 0) are untouched.
    ///
    /// # Errors
    /// The database fails; the run is one transaction, so nothing is half-applied.
    async fn decay(
        &self,
        threshold: f64,
        action: DecayAction,
        now: DateTime<Utc>,
    ) -> Result<DecayReport>;

    /// Marks `old_ids` superseded by `new_id` (and records `supersedes` on the new memory).
    ///
    /// # Errors
    /// The database fails.
    async fn supersede(&self, old_ids: &[String], new_id: &str, at: DateTime<Utc>) -> Result<()>;

    /// Soft-deletes memories whose expiry has passed; returns how many.
    ///
    /// # Errors
    /// The database fails.
    async fn expire(&self, now: DateTime<Utc>) -> Result<u64>;
}
