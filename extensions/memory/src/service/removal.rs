//! Removing memories for good, erasing users, and expiry, with the announcements other
//! extensions follow.

use std::sync::PoisonError;

use super::{announce, MemoryService};
use crate::error::{MemoryError, Result};

impl MemoryService {
    /// Forgets one of the owner's memories for good (see [`Self::purge`]). Decay and corrections
    /// soft-delete instead, so that what they hide stays recoverable.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] when it is not a memory of the owner.
    pub async fn forget(&self, owner: &str, memory_id: &str) -> Result<()> {
        match self.store()?.get(memory_id).await? {
            Some(memory) if memory.user_id.as_deref() == Some(owner) => {
                self.purge(&[memory_id.to_owned()]).await?;
                Ok(())
            }
            _ => Err(MemoryError::NotFound(format!(
                "no memory `{memory_id}` of yours to forget"
            ))),
        }
    }

    /// Removes memories for good, whoever owns them: row, full-text entry, vector, entity links
    /// and cached vector (see `MemoryRemoval::purge`), then announces each on
    /// `memory.forgotten` ([`crate::MemoryForgotten`]) so that extensions with their own copies (the
    /// markdown mirror) remove them too. Returns how many were removed; unknown ids are skipped.
    ///
    /// # Errors
    /// The store fails; nothing is removed then.
    pub async fn purge(&self, ids: &[String]) -> Result<u64> {
        let state = self.state()?;
        let removed = state.store.purge(ids).await?;
        state.searcher.stats().clear();
        let count = removed.len() as u64;
        for forgotten in removed {
            tracing::info!(memory_id = %forgotten.memory_id, "memory forgotten");
            let scope = (
                forgotten.session_id.clone(),
                forgotten.user_id.clone(),
                forgotten.chat_id.clone(),
            );
            announce(
                &state.ctx,
                &forgotten,
                |event| event.with_scope(scope.0, scope.1, scope.2),
                "copies of the forgotten memory kept by other extensions stay",
            )
            .await;
        }
        Ok(count)
    }

    /// Removes everything stored about `user_id` (see `MemoryRemoval::erase_user`; their keys
    /// are revoked and their chat memberships removed in the same transaction), forgets
    /// the recent query vectors, whoever asked them, and announces the erasure on
    /// `memory.user_erased` ([`crate::UserErased`]). Returns how many memories were removed.
    ///
    /// # Errors
    /// The store fails; nothing is removed then.
    pub async fn erase_user(&self, user_id: &str) -> Result<u64> {
        let state = self.state()?;
        let erased = state.store.erase_user(user_id).await?;
        state.searcher.stats().clear();
        state.searcher.forget_query_vectors();
        // Their memberships went with them (and their keys were revoked).
        self.known_members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(_, member)| member != user_id);
        let removed = erased.memories_removed;
        tracing::info!(user_id, removed, "user erased");
        announce(
            &state.ctx,
            &erased,
            |event| event.with_scope(None, Some(user_id.to_owned()), None),
            "copies of the erased user's data kept by other extensions stay",
        )
        .await;
        Ok(removed)
    }

    /// Soft-deletes expired memories now; returns how many.
    ///
    /// # Errors
    /// The store fails.
    pub async fn expire_now(&self) -> Result<u64> {
        self.store()?.expire(self.now()?).await
    }
}
