//! Removing memories for good, erasing users, and expiry, with the announcements other
//! extensions follow.

use std::sync::PoisonError;

use super::{announce, MemoryService};
use crate::config::ForgetMode;
use crate::error::{MemoryError, Result};

impl MemoryService {
    /// Forgets one of the owner's memories as `[extensions.memory] forget` says: for good (see
    /// [`Self::purge`]), or soft-deleted (see [`Self::forget_softly`]).
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] when it is not an active memory of the owner (under `soft`,
    /// one forgotten before is not active).
    pub async fn forget(&self, owner: &str, memory_id: &str) -> Result<()> {
        let not_found =
            || MemoryError::NotFound(format!("no memory `{memory_id}` of yours to forget"));
        match self.store()?.get(memory_id).await? {
            Some(memory) if memory.user_id.as_deref() == Some(owner) => {
                let ids = [memory_id.to_owned()];
                let forgotten = match self.config().forget {
                    ForgetMode::Hard => self.purge(&ids).await?,
                    ForgetMode::Soft => self.forget_softly(&ids).await?,
                };
                if forgotten == 0 {
                    return Err(not_found());
                }
                Ok(())
            }
            _ => Err(not_found()),
        }
    }

    /// Soft-deletes the active memories among `ids`, whoever owns them (see
    /// `SoftForget::retire`: never retrieved again, the row kept for an admin), then announces
    /// each on `memory.forgotten` as [`Self::purge`] does, so that the markdown mirror drops its
    /// copies. Returns how many were soft-deleted.
    ///
    /// # Errors
    /// The store fails; nothing changes then.
    pub async fn forget_softly(&self, ids: &[String]) -> Result<u64> {
        let state = self.state()?;
        let retired = state.store.retire(ids, self.now()?).await?;
        state.searcher.stats().clear();
        let count = retired.len() as u64;
        self.announce_forgotten(retired).await;
        Ok(count)
    }

    /// Brings back a soft-deleted memory (see `SoftForget::restore`) and wakes the indexer to
    /// give it its vector again; `false` when no soft-deleted memory has this id. A copy the
    /// markdown mirror dropped is not brought back.
    ///
    /// # Errors
    /// The store fails; nothing changes then.
    pub async fn restore(&self, memory_id: &str) -> Result<bool> {
        let state = self.state()?;
        let restored = state.store.restore(memory_id).await?;
        if restored {
            tracing::info!(%memory_id, "memory restored");
            state.searcher.stats().clear();
            self.index_wakeup.notify_one();
        }
        Ok(restored)
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
        self.announce_forgotten(removed).await;
        Ok(count)
    }

    /// Announces each of `forgotten` on `memory.forgotten`.
    async fn announce_forgotten(&self, forgotten: Vec<crate::types::MemoryForgotten>) {
        let Ok(state) = self.state() else {
            return;
        };
        for forgotten in forgotten {
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
