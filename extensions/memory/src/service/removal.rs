//! Removing memories for good, erasing users, and expiry, with the announcements other
//! extensions follow.

use std::sync::PoisonError;

use super::{announce, MemoryService};
use crate::config::ForgetMode;
use mnemo_kernel::spans::gen_ai;
use mnemo_memory_api::spans;
use tracing::Instrument;

use crate::error::{record_failure, MemoryError, Result};
use crate::store::{Erasure, ForgetRequest};
use crate::types::ForgetReceipt;

impl MemoryService {
    /// Forgets one of the owner's memories, and everything derived from it, as
    /// `[extensions.memory] forget` says: for good, or soft-deleted (see
    /// [`Self::forget_with_lineage`]). Returns the receipt.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] when it is not an active memory of the owner (under `soft`,
    /// one forgotten before is not active).
    pub async fn forget(&self, owner: &str, memory_id: &str) -> Result<ForgetReceipt> {
        let not_found =
            || MemoryError::NotFound(format!("no memory `{memory_id}` of yours to forget"));
        match self.store()?.get(memory_id).await? {
            Some(memory) if memory.user_id.as_deref() == Some(owner) => {
                let soft = self.config().forget == ForgetMode::Soft;
                if soft && memory.valid_until.is_some() {
                    return Err(not_found());
                }
                self.forget_with_lineage(Some(owner), &[memory_id.to_owned()], soft)
                    .await
            }
            _ => Err(not_found()),
        }
    }

    /// Forgets the memories `ids`, whoever owns them, with everything derived from them (see
    /// `MemoryRemoval::forget`): removed for good, or soft-deleted with `soft` (never retrieved
    /// again, the rows kept for an admin). The recent query vectors are dropped, since one of
    /// them may be a forgotten text's, and each removed memory is announced on
    /// `memory.forgotten` ([`crate::MemoryForgotten`]) so that extensions with their own copies
    /// (the markdown mirror) remove them too. `user_id` is who asked, for the receipt (`None`
    /// for an admin). Returns the receipt, also kept in the store's audit table; unknown ids
    /// are skipped.
    ///
    /// # Errors
    /// The store fails; nothing is removed then.
    pub async fn forget_with_lineage(
        &self,
        user_id: Option<&str>,
        ids: &[String],
        soft: bool,
    ) -> Result<ForgetReceipt> {
        let span = tracing::info_span!(
            spans::FORGET,
            gen_ai.operation.name = gen_ai::DELETE_MEMORY,
            gen_ai.memory.record.count = tracing::field::Empty,
            mnemo.forget.receipt = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let state = self.state()?;
        let query_vectors = state.searcher.forget_query_vectors();
        let request = ForgetRequest {
            ids,
            soft,
            user_id,
            at: self.now()?,
            query_vectors,
        };
        let result = state.store.forget(&request).instrument(span.clone()).await;
        record_failure(&span, &result);
        let forgetting = result?;
        let removed = forgetting
            .receipt
            .removed
            .iter()
            .filter(|entry| entry.kind != "entity");
        span.record(
            gen_ai::MEMORY_RECORD_COUNT,
            mnemo_kernel::spans::count(removed.count()),
        );
        span.record("mnemo.forget.receipt", forgetting.receipt.id.as_str());
        state.searcher.stats().clear();
        // A reflection the forget removed must not be shown from the cache.
        self.reflections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        tracing::info!(
            receipt = %forgetting.receipt.id,
            removed = forgetting.receipt.removed.len(),
            changed = forgetting.receipt.changed.len(),
            "forgotten, with what was derived from it"
        );
        self.announce_forgotten(forgetting.forgotten).await;
        Ok(forgetting.receipt)
    }

    /// The newest `limit` forget and erasure receipts of `user_id` (everyone's for `None`).
    ///
    /// # Errors
    /// The store fails.
    pub async fn receipts(
        &self,
        user_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ForgetReceipt>> {
        self.store()?.receipts(user_id, limit).await
    }

    /// Brings back a soft-deleted memory, with what its soft forget took with it (see
    /// `SoftForget::restore`), and wakes the indexer to give them their vectors again; nothing
    /// restored when no soft-deleted memory has this id. A copy the markdown mirror dropped is
    /// not brought back.
    ///
    /// # Errors
    /// The store fails; nothing changes then.
    pub async fn restore(&self, memory_id: &str) -> Result<crate::types::Restoration> {
        let state = self.state()?;
        let restoration = state.store.restore(memory_id).await?;
        if !restoration.restored.is_empty() {
            tracing::info!(
                %memory_id,
                with = restoration.restored.len() - 1,
                sources_back = restoration.sources_back.len(),
                "memory restored"
            );
            state.searcher.stats().clear();
            self.index_wakeup.notify_one();
        }
        Ok(restoration)
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
    /// `memory.user_erased` ([`crate::UserErased`]). Returns the erasure's receipt, the one
    /// receipt of the user the audit table keeps.
    ///
    /// # Errors
    /// The store fails; nothing is removed then.
    pub async fn erase_user(&self, user_id: &str) -> Result<ForgetReceipt> {
        let state = self.state()?;
        let Erasure { erased, receipt } = state.store.erase_user(user_id).await?;
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
        Ok(receipt)
    }

    /// Soft-deletes expired memories now; returns how many.
    ///
    /// # Errors
    /// The store fails.
    pub async fn expire_now(&self) -> Result<u64> {
        self.store()?.expire(self.now()?).await
    }
}
