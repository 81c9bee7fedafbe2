//! Who may do what, through the service: API keys, MCP sessions, chat memberships and the
//! store's one-off settings. The server's key checks, its MCP sessions and `mnemo keys` read and
//! write them in the store, so that every server on it agrees.

use chrono::{DateTime, Utc};

use super::MemoryService;
use std::sync::PoisonError;

use crate::error::{MemoryError, Result};
use crate::store::{KeyRecord, McpSessionRecord};

impl MemoryService {
    /// Stores a new key (its hash); returns `false` when a key with its id exists.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn insert_key(&self, key: &KeyRecord) -> Result<bool> {
        self.store()?.insert_key(key).await
    }

    /// Every key, revoked ones included, oldest first.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn keys(&self) -> Result<Vec<KeyRecord>> {
        self.store()?.keys(None).await
    }

    /// The key `id`, revoked or not.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn key(&self, id: &str) -> Result<Option<KeyRecord>> {
        Ok(self.store()?.keys(Some(id)).await?.into_iter().next())
    }

    /// Revokes the key `id` at `at` (the first revocation's time stands); returns it as stored,
    /// or `None` when there is no such key.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>> {
        self.store()?.revoke_key(id, at).await
    }

    /// The store setting `name`, if set.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn store_setting(&self, name: &str) -> Result<Option<String>> {
        self.store()?.setting(name).await
    }

    /// Sets the store setting `name` unless it is set; returns whether this call set it.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn set_store_setting(&self, name: &str, value: &str) -> Result<bool> {
        self.store()?.set_setting(name, value).await
    }

    /// Records that the MCP session `id` was opened by the key `key_id` (the first binding
    /// stands); sessions older than a week are forgotten.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn bind_mcp_session(&self, id: &str, key_id: &str) -> Result<()> {
        self.store()?.bind_mcp_session(id, key_id, Utc::now()).await
    }

    /// Keeps the client's `initialize` parameters (JSON) of the MCP session `id`, from which
    /// any server restores it.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn store_mcp_session(&self, id: &str, initialize: &str) -> Result<()> {
        self.store()?
            .store_mcp_session(id, initialize, Utc::now())
            .await
    }

    /// The MCP session `id`, if the store knows it.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn mcp_session(&self, id: &str) -> Result<Option<McpSessionRecord>> {
        self.store()?.mcp_session(id).await
    }

    /// Forgets the MCP session `id`.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn delete_mcp_session(&self, id: &str) -> Result<()> {
        self.store()?.delete_mcp_session(id).await
    }

    /// Makes `user` a member of `chat` (an admin's doing); returns whether they were not one.
    ///
    /// # Errors
    /// An invalid id; the store is not open, or fails.
    pub async fn add_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        check_ids(chat, user)?;
        let added = self
            .store()?
            .add_chat_member(chat, user, "admin", Utc::now())
            .await?;
        self.remember_member(chat, user);
        Ok(added)
    }

    /// Removes `user` from `chat`; returns whether they were a member. What they shared there
    /// stays; they no longer read what others share.
    ///
    /// # Errors
    /// An invalid id; the store is not open, or fails.
    pub async fn remove_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        check_ids(chat, user)?;
        self.known_members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(chat.to_owned(), user.to_owned()));
        self.store()?.remove_chat_member(chat, user).await
    }

    /// Whether `user` is a member of `chat`, as the store says now.
    ///
    /// # Errors
    /// The store is not open, or fails.
    pub async fn is_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        self.store()?.is_chat_member(chat, user).await
    }

    /// Records that a trusted writer stored `user`'s turn in `chat`: they are a member. A pair
    /// this process knows costs nothing; a new one, a read and at most one write.
    pub(super) async fn note_chat_member(&self, chat: &str, user: &str) -> Result<()> {
        let pair = (chat.to_owned(), user.to_owned());
        if self
            .known_members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&pair)
        {
            return Ok(());
        }
        let store = self.store()?;
        if !store.is_chat_member(chat, user).await? {
            store
                .add_chat_member(chat, user, "turn", Utc::now())
                .await?;
        }
        self.remember_member(chat, user);
        Ok(())
    }

    fn remember_member(&self, chat: &str, user: &str) {
        let mut known = self
            .known_members
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if known.len() >= KNOWN_MEMBERS {
            known.clear();
        }
        known.insert((chat.to_owned(), user.to_owned()));
    }
}

/// Memberships a process remembers at most (then it starts over).
const KNOWN_MEMBERS: usize = 100_000;

fn check_ids(chat: &str, user: &str) -> Result<()> {
    for (field, id) in [("chat_id", chat), ("user_id", user)] {
        mnemo_kernel::check_id(field, id)
            .map_err(|error| MemoryError::Invalid(error.to_string()))?;
    }
    Ok(())
}
