//! The [`MemoryHost`] trait: what a host that serves memory to people and programs (`mnemo
//! serve`, the command line) needs beyond [`MemoryApi`]: storing turns and imports, what a
//! user asks to remember or forget, people, counts, API keys, MCP sessions and chat
//! membership. The memory extension publishes it in the kernel's `Services` as
//! `dyn MemoryHost`, so that a host compiles against this crate and no database driver.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_kernel::{Event, ToolScope};
use serde_json::Value;

use crate::api::MemoryApi;
use crate::error::Result;
use crate::receipts::ForgetReceipt;
use crate::records::{
    EntitySummary, ExternalId, IngestedEvent, KeyRecord, McpSessionRecord, OwnerSummary, Person,
    Subject,
};
use crate::types::{Memory, MemoryStats, MemoryType, SessionKey};

/// The configured limits a host checks requests against before it calls the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    /// The longest memory text, in characters (`max_content_chars`).
    pub max_content_chars: usize,
    /// Hits of a search that names no limit (`search_limit`).
    pub search_limit: usize,
    /// The most hits a search may ask for (`max_search_limit`).
    pub max_search_limit: usize,
}

/// What a host may do with memory, beside [`MemoryApi`].
#[async_trait]
pub trait MemoryHost: MemoryApi {
    /// The configured limits.
    fn limits(&self) -> HostLimits;

    /// Why the store's database does not answer, when it is known not to (a server reports
    /// itself not ready); `None` while it answers.
    fn store_unreachable(&self) -> Option<String>;

    /// Stores conversation events in one transaction, each at most once by its id; what became
    /// of each, in order. `from_user_key`: sent with a user's key, so a turn in a chat does not
    /// make its user a member of that chat.
    ///
    /// # Errors
    /// An event is invalid (nothing is stored then), or the store fails.
    async fn ingest_batch(
        &self,
        events: &[Event],
        from_user_key: bool,
    ) -> Result<Vec<IngestedEvent>>;

    /// Stores one imported turn, as an admin's import: its memory id, `None` when it was
    /// already stored.
    ///
    /// # Errors
    /// The event is invalid, or the store fails.
    async fn import(&self, event: &Event) -> Result<Option<String>>;

    /// Stores one turn imported with a user's key: as [`MemoryHost::import`], without making
    /// the user a member of the turn's chat.
    ///
    /// # Errors
    /// The event is invalid, or the store fails.
    async fn import_from_user_key(&self, event: &Event) -> Result<Option<String>>;

    /// Restores one exported row of `table`; false when it was there already.
    ///
    /// # Errors
    /// The table or row is not one an export writes, or the store fails.
    async fn import_row(&self, table: &str, row: &Value) -> Result<bool>;

    /// Every stored row, of one user or of everyone, as an export writes them.
    ///
    /// # Errors
    /// The store fails.
    async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>>;

    /// Remembers a fact for the caller, about `subjects` (people by name, by external id, or
    /// both: a known external id names its person, an unknown one anchors the person named);
    /// its id and the people's names.
    ///
    /// # Errors
    /// The content is invalid, a subject's external id conflicts with the caller's people (it
    /// anchors another person, or the person named carries another one; nothing is written
    /// then), or the store fails.
    async fn remember(
        &self,
        scope: &ToolScope,
        content: &str,
        subjects: &[Subject],
        expires_at: Option<DateTime<Utc>>,
        shared: bool,
    ) -> Result<(String, Vec<String>)>;

    /// Stores a memory of one of seed 001's types for the caller; its id.
    ///
    /// # Errors
    /// The content is invalid, or the store fails.
    async fn store_typed(
        &self,
        scope: &ToolScope,
        memory_type: MemoryType,
        content: &str,
        metadata: serde_json::Map<String, Value>,
    ) -> Result<String>;

    /// Replaces a fact with a corrected one; the new fact's id.
    ///
    /// # Errors
    /// No such active fact of `user_id`, invalid content, or the store fails.
    async fn correct_fact(
        &self,
        user_id: Option<&str>,
        old_id: &str,
        content: &str,
    ) -> Result<String>;

    /// Confirms one of `owner`'s facts: it stops decaying, a model's fact becomes the user's
    /// word, and the stated facts it contradicted give way to it. Returns those.
    ///
    /// # Errors
    /// No such active fact of the owner, or the store fails.
    async fn confirm(&self, owner: &str, id: &str) -> Result<Vec<String>>;

    /// Releases one of `owner`'s quarantined memories: it may be put into the agent's context
    /// again. Returns it, released.
    ///
    /// # Errors
    /// No such memory of the owner, it is not quarantined, or the store fails.
    async fn release(&self, owner: &str, memory_id: &str) -> Result<Memory>;

    /// Forgets one of `owner`'s memories, with what was derived from it, its indexes, links and
    /// copies; the receipt.
    ///
    /// # Errors
    /// No such memory of the owner, or the store fails.
    async fn forget(&self, owner: &str, memory_id: &str) -> Result<ForgetReceipt>;

    /// Erases everything stored about a user; the erasure's receipt.
    ///
    /// # Errors
    /// The store fails.
    async fn erase_user(&self, user_id: &str) -> Result<ForgetReceipt>;

    /// The newest `limit` forget and erasure receipts of `user_id`, newest first.
    ///
    /// # Errors
    /// The store fails.
    async fn receipts(&self, user_id: &str, limit: usize) -> Result<Vec<ForgetReceipt>>;

    /// The memories that replaced `id`.
    ///
    /// # Errors
    /// The store fails.
    async fn replaced_by(&self, id: &str) -> Result<Vec<Memory>>;

    /// The messaging provider `session` came through (`telegram`), as its user's turns named
    /// it (the first one named); `None` when none did, or the session is not recorded.
    ///
    /// # Errors
    /// The store fails.
    async fn session_provider(&self, session: &SessionKey) -> Result<Option<String>>;

    /// The person `reference` names among `owner`'s people (a name, an alias or a relation).
    ///
    /// # Errors
    /// The store fails.
    async fn find_person(&self, owner: &str, reference: &str) -> Result<Option<Person>>;

    /// The person among `owner`'s people that `external` anchors (never another owner's).
    ///
    /// # Errors
    /// The store fails.
    async fn person_by_external_id(
        &self,
        owner: &str,
        external: &ExternalId,
    ) -> Result<Option<Person>>;

    /// Every person `owner` told about.
    ///
    /// # Errors
    /// The store fails.
    async fn get_known_people(&self, owner: &str) -> Result<Vec<Person>>;

    /// Counts, of one user or of the whole store.
    ///
    /// # Errors
    /// The store fails.
    async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats>;

    /// The owners of memories, the most memories first, at most `limit`.
    ///
    /// # Errors
    /// The store fails.
    async fn owners(&self, limit: usize) -> Result<Vec<OwnerSummary>>;

    /// One owner's entities, the most linked first, at most `limit`.
    ///
    /// # Errors
    /// The store fails.
    async fn owner_entities(&self, owner: &str, limit: usize) -> Result<Vec<EntitySummary>>;

    /// Memories waiting for their vectors.
    ///
    /// # Errors
    /// The store fails.
    async fn pending_index(&self) -> Result<i64>;

    /// Every API key, revoked ones too.
    ///
    /// # Errors
    /// The store fails.
    async fn keys(&self) -> Result<Vec<KeyRecord>>;

    /// One API key by id.
    ///
    /// # Errors
    /// The store fails.
    async fn key(&self, id: &str) -> Result<Option<KeyRecord>>;

    /// Stores a new key; false when its id or hash is taken.
    ///
    /// # Errors
    /// The store fails.
    async fn insert_key(&self, key: &KeyRecord) -> Result<bool>;

    /// Revokes a key at `at`; the key as it is now, `None` if there is none by that id.
    ///
    /// # Errors
    /// The store fails.
    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>>;

    /// A store-wide setting.
    ///
    /// # Errors
    /// The store fails.
    async fn store_setting(&self, name: &str) -> Result<Option<String>>;

    /// Sets a store-wide setting once; false when it was set already.
    ///
    /// # Errors
    /// The store fails.
    async fn set_store_setting(&self, name: &str, value: &str) -> Result<bool>;

    /// Records the client's `initialize` parameters of a new MCP session.
    ///
    /// # Errors
    /// The store fails.
    async fn store_mcp_session(&self, id: &str, initialize: &str) -> Result<()>;

    /// Binds an MCP session to the key that opened it.
    ///
    /// # Errors
    /// The store fails.
    async fn bind_mcp_session(&self, id: &str, key_id: &str) -> Result<()>;

    /// An MCP session as stored.
    ///
    /// # Errors
    /// The store fails.
    async fn mcp_session(&self, id: &str) -> Result<Option<McpSessionRecord>>;

    /// Ends an MCP session.
    ///
    /// # Errors
    /// The store fails.
    async fn delete_mcp_session(&self, id: &str) -> Result<()>;

    /// Makes `user` a member of `chat`; false when they were one.
    ///
    /// # Errors
    /// An invalid id, or the store fails.
    async fn add_chat_member(&self, chat: &str, user: &str) -> Result<bool>;

    /// Ends `user`'s membership of `chat`; false when they were not one.
    ///
    /// # Errors
    /// An invalid id, or the store fails.
    async fn remove_chat_member(&self, chat: &str, user: &str) -> Result<bool>;

    /// Whether `user` is a member of `chat`.
    ///
    /// # Errors
    /// The store fails.
    async fn is_chat_member(&self, chat: &str, user: &str) -> Result<bool>;
}
