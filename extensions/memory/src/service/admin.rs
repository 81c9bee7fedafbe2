//! Administration through the service: statistics, integrity, export and import, and what
//! the benchmark needs to drive the index directly.

use super::MemoryService;
use crate::error::Result;

impl MemoryService {
    /// Gives the sessions and memories that the maintenance jobs gave up on after repeated
    /// failures a fresh start (`mnemo jobs retry`); returns how many sessions and memories.
    ///
    /// # Errors
    /// The store fails; nothing is changed then.
    pub async fn retry_given_up(&self) -> Result<(u64, u64)> {
        self.store()?.reset_failed_attempts().await
    }
}
