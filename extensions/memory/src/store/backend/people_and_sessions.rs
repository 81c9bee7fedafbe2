//! The storage traits for sessions and people.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::store::Person;
use crate::types::{EpisodePage, ExternalId, Memory, PendingSession, SessionKey};

/// Sessions: consolidation records and the turns of one session.
#[async_trait]
pub(crate) trait SessionRecords: Send + Sync {
    /// Sessions not consolidated yet, oldest first, except `exclude`; only `user_id`'s if given.
    ///
    /// # Errors
    /// The database fails.
    async fn pending_consolidations(&self, user_id: Option<&str>) -> Result<Vec<PendingSession>>;

    /// True once the session was consolidated.
    ///
    /// # Errors
    /// The database fails.
    async fn is_session_consolidated(&self, session: &SessionKey) -> Result<bool>;

    /// The messaging provider `session` came through (`telegram`), as its user's turns named
    /// it; `None` when none did, or the session is not recorded.
    ///
    /// # Errors
    /// The database fails.
    async fn session_provider(&self, session: &SessionKey) -> Result<Option<String>>;

    /// Records that the consolidation of `session` read `episode_ids`, in one transaction: they
    /// are marked, and the session counts as consolidated unless a user turn it has not read
    /// arrived meanwhile (then it stays pending for the next run).
    ///
    /// # Errors
    /// The database fails; nothing is marked then.
    async fn mark_session_consolidated(
        &self,
        session: &SessionKey,
        episode_ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<()>;

    /// Gives every session and memory whose jobs gave up after repeated failures (a model
    /// outage used up `max_consolidation_attempts` or the enrichment attempts) a fresh start;
    /// returns how many sessions and memories that was.
    ///
    /// # Errors
    /// The database fails; nothing is changed then.
    async fn reset_failed_attempts(&self) -> Result<(u64, u64)>;

    /// Records a failed consolidation attempt; returns the number of attempts so far.
    ///
    /// # Errors
    /// The database fails.
    async fn record_consolidation_failure(&self, session: &SessionKey, error: &str) -> Result<i64>;

    /// A page of the session's active episodes that no consolidation has read yet, oldest
    /// first.
    ///
    /// # Errors
    /// The database fails.
    async fn episodes_for_session(
        &self,
        session: &SessionKey,
        offset: usize,
        limit: usize,
    ) -> Result<EpisodePage>;

    /// The last `limit` active episodes of a session, oldest first.
    ///
    /// # Errors
    /// The database fails.
    async fn recent_turns(&self, session: &SessionKey, limit: usize) -> Result<Vec<Memory>>;
}

/// People: an owner's person entities, by name or relation.
#[async_trait]
pub(crate) trait PeopleRecords: Send + Sync {
    /// The owner's person whose relation is `relation` (case-insensitive), most mentioned first.
    ///
    /// # Errors
    /// The database fails.
    async fn person_by_relation(&self, owner: &str, relation: &str) -> Result<Option<Person>>;

    /// The owner's person named `name` (canonical name or alias, case-insensitive).
    ///
    /// # Errors
    /// The database fails.
    async fn person_by_name(&self, owner: &str, name: &str) -> Result<Option<Person>>;

    /// Creates a person, or gives an existing one of that name the relation; returns it.
    ///
    /// # Errors
    /// The database fails.
    async fn upsert_person(
        &self,
        owner: &str,
        name: &str,
        relation: Option<&str>,
    ) -> Result<Person>;

    /// Renames a person known only by relation (a placeholder name), keeping the old name as alias.
    ///
    /// # Errors
    /// The database fails.
    async fn rename_person(&self, person: &Person, name: &str) -> Result<()>;

    /// The owner's person that `external` anchors; another owner's never.
    ///
    /// # Errors
    /// The database fails.
    async fn person_by_external_id(
        &self,
        owner: &str,
        external: &ExternalId,
    ) -> Result<Option<Person>>;

    /// Anchors the owner's person `person_id` to `external`, and keeps `called` (a name it was
    /// called by) as an alias when it is a new name for them, in one transaction; returns the
    /// person as it is now. Anchoring a person to the id it carries changes nothing.
    ///
    /// # Errors
    /// [`crate::error::MemoryError::Invalid`] when `external` anchors another of the owner's
    /// people, or the person carries another external id; `NotFound` when the owner has no
    /// such person. Nothing is changed then. Or the database fails.
    async fn anchor_person(
        &self,
        owner: &str,
        person_id: &str,
        external: &ExternalId,
        called: Option<&str>,
    ) -> Result<Person>;

    /// Every person of the owner (the people registry), by name: told about, named by a model,
    /// or anchored to an external id.
    ///
    /// # Errors
    /// The database fails.
    async fn known_people(&self, owner: &str) -> Result<Vec<Person>>;

    /// The people the owner told about where `chat_id` can see it (the context's "Known
    /// People"), by name: each is linked to a memory in the user's own words (not the agent's
    /// turn, nor a model's inference or reflection) that is active, not superseded, not
    /// quarantined, and in the scope by the visibility rule of every search (`push_scope`),
    /// so a person told about in one chat is not shown in another or in the personal scope.
    /// Expiry is the expiry job's: a memory past its `expires_at` counts until it runs.
    ///
    /// # Errors
    /// The database fails.
    async fn people_told_in(&self, owner: &str, chat_id: Option<&str>) -> Result<Vec<Person>>;
}

/// Leases on a session's consolidation, so that processes sharing the store never consolidate
/// one session at once.
#[async_trait]
pub(crate) trait SessionLeases: Send + Sync {
    /// Leases the session to `holder` until `until`: true when it had no lease, its lease ran
    /// out before `now`, or `holder` held it. A session without a consolidation record has
    /// nothing to share: true.
    ///
    /// # Errors
    /// The database fails.
    async fn lease_session(
        &self,
        session: &SessionKey,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// Ends `holder`'s lease on the session, if it holds one.
    ///
    /// # Errors
    /// The database fails.
    async fn release_session(&self, session: &SessionKey, holder: &str) -> Result<()>;
}
