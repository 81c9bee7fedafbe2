//! Memory poisoning at write time: what the screen (`crate::screening`) finds in a text to be
//! stored becomes the memory's quarantine, and the owner or an admin lifts it.

use super::MemoryService;
use crate::error::{MemoryError, Result};
use crate::screening;
use crate::types::{Memory, Quarantine};

impl MemoryService {
    /// Why `text` is to be stored quarantined (see `crate::screening::screen`), or `None`: also
    /// `None` under `quarantine_poisoned = false`.
    pub(crate) fn quarantine_for(&self, text: &str) -> Option<Quarantine> {
        if !self.config.quarantine_poisoned {
            return None;
        }
        let finding = screening::screen(text)?;
        tracing::info!(
            reason = finding.reason.as_str(),
            "the memory screen found a poisoning sign; the memory is stored quarantined"
        );
        Some(Quarantine {
            reason: finding.reason.as_str().to_owned(),
            evidence: finding.evidence,
        })
    }

    /// Releases the quarantined memory `memory_id`: it may be put into the agent's context
    /// again. `owner` is the caller's user id (`None` for an admin, who may release anyone's).
    /// Returns the released memory.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] when it is not a memory of the owner; [`MemoryError::Invalid`]
    /// when it is not quarantined (nothing changes then); the store fails.
    pub async fn release(&self, owner: Option<&str>, memory_id: &str) -> Result<Memory> {
        let store = self.store()?;
        let memory = match store.get(memory_id).await? {
            Some(memory) if owner.is_none() || memory.user_id.as_deref() == owner => memory,
            _ => {
                return Err(MemoryError::NotFound(format!(
                    "no memory `{memory_id}` to release"
                )))
            }
        };
        if memory.quarantine.is_none() || !store.release(memory_id).await? {
            return Err(MemoryError::Invalid(format!(
                "memory `{memory_id}` is not quarantined"
            )));
        }
        tracing::info!(%memory_id, "quarantined memory released");
        Ok(Memory {
            quarantine: None,
            ..memory
        })
    }
}
