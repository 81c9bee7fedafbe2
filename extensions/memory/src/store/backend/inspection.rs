//! The storage trait for inspection: what a person looking at a store asks that the agent
//! never does (whose memories are here, which entities an owner has, what a fact replaced).

use async_trait::async_trait;

use crate::error::Result;
use crate::store::{EntitySummary, OwnerSummary};
use crate::types::Memory;

/// Questions the inspector and the admin API ask.
#[async_trait]
pub(crate) trait InspectionQueries: Send + Sync {
    /// The owners with memories, by user id, at most `limit`.
    ///
    /// # Errors
    /// The database fails.
    async fn owners(&self, limit: usize) -> Result<Vec<OwnerSummary>>;

    /// The owner's entities of any type (people too), those linked to most memories first, at
    /// most `limit`.
    ///
    /// # Errors
    /// The database fails.
    async fn owner_entities(&self, owner: &str, limit: usize) -> Result<Vec<EntitySummary>>;

    /// The memories that `id` replaced (their `superseded_by_id` is `id`), oldest first.
    ///
    /// # Errors
    /// The database fails.
    async fn replaced_by(&self, id: &str) -> Result<Vec<Memory>>;
}
