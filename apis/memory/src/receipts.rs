//! What a forget or an erasure did, as the user and an auditor are told: the receipt names the
//! kind and id of every memory and entity it removed or changed, and counts the index entries
//! and caches that went with them. It never holds content.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One memory or entity a forget removed or changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReceiptEntry {
    /// Its id (`ep_…`, `fact_…`, `ref_…`, `ent_…`).
    pub id: String,
    /// `episode`, `fact`, `reflection` or `entity`.
    pub kind: String,
    /// Why: `forgotten` (asked for), `all_sources_forgotten`, `not_grounded_without_source`,
    /// `built_on_removed` (a reflection), `no_mentions_left` (an entity), `erased` (the user's
    /// erasure); for a change, `lost_sources` (the forgotten ids left its provenance).
    pub why: String,
    /// For a change: the ids that left its provenance (a restore of a soft forget puts them
    /// back). Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_sources: Vec<String>,
}

impl ReceiptEntry {
    /// An entry of a memory or entity removed, or changed without naming lost sources.
    pub fn new(id: impl Into<String>, kind: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: kind.into(),
            why: why.into(),
            lost_sources: Vec::new(),
        }
    }
}

/// What one forget or erasure removed and changed, kept in the store's audit table
/// (`forget_receipts`) and returned to whoever asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForgetReceipt {
    /// `rcpt_…`.
    pub id: String,
    /// `forget` (removed for good), `forget_soft` (soft-deleted, under `forget = "soft"`) or
    /// `erase_user`.
    pub action: String,
    /// Whose memories.
    pub user_id: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
    /// The memory ids asked for.
    pub requested: Vec<String>,
    /// Every memory and entity removed (soft-deleted under `forget_soft`), with why.
    pub removed: Vec<ReceiptEntry>,
    /// Every memory kept but changed: a fact that lost a forgotten source and is still grounded
    /// in the sources it has left.
    pub changed: Vec<ReceiptEntry>,
    /// How many of each artefact went with them: `memory_rows`, `full_text_entries`, `vectors`,
    /// `sentence_keys`, `entity_links`, `index_queue_entries`, `cached_vectors` (the embedding
    /// cache's vectors of their texts), `query_vectors` (recent searches' vectors, dropped
    /// whole), `copies_announced` (`memory.forgotten` events, on which the markdown mirror
    /// removes its copies).
    pub artefacts: BTreeMap<String, u64>,
}

impl ForgetReceipt {
    /// The ids of the memories and entities it removed.
    pub fn removed_ids(&self) -> Vec<&str> {
        self.removed.iter().map(|entry| entry.id.as_str()).collect()
    }
}

/// What restoring a soft-deleted memory brought back. A memory a soft forget asked for comes
/// back with what that forget took with it: the memories drawn from it, and the sources it took
/// from the provenance of the facts that stayed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restoration {
    /// The memories active again, the one asked for first; empty when no soft-deleted memory
    /// has that id.
    pub restored: Vec<String>,
    /// The facts whose provenance got back the sources the forget had taken.
    pub sources_back: Vec<String>,
}
