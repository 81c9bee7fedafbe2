//! The memory service's API: the [`MemoryApi`] trait for extensions and the [`MemoryHost`]
//! trait for hosts, the data they speak in, the events the memory extension publishes, and one
//! opaque error. The memory extension implements them; the maintenance and reflection
//! extensions and the server call them, and depend on this crate alone, so that they compile
//! neither the database drivers nor the model runtime.
#![warn(missing_docs)]

mod api;
mod as_of;
mod error;
mod events;
pub mod grounding;
mod host;
mod origin;
mod receipts;
mod records;
pub mod spans;
mod types;

/// The memory extension's name in `config.toml` (`[extensions.memory]`) and on the bus.
pub const EXTENSION_NAME: &str = "memory";

pub use api::MemoryApi;
pub use as_of::{AsOf, TimeAxis};
pub use error::{MemoryApiError, Result, StorageError};
pub use events::{MemoryForgotten, SessionCompleted, UserErased};
pub use host::{HostLimits, MemoryHost};
pub use origin::{Origin, OriginWeights, CONTRADICTS};
pub use receipts::{ForgetReceipt, ReceiptEntry, Restoration};
pub use records::{
    content_event_id, EntitySummary, ExternalId, IngestedEvent, KeyRecord, McpSessionRecord,
    OwnerSummary, Person, Subject, MAX_EXTERNAL_ID_CHARS,
};
pub use types::{
    CandidateList, DecayAction, DecayReport, EntityInfo, EpisodePage, FusionMethod, ListMatch,
    ListRequest, Memory, MemoryKind, MemoryStats, MemoryType, NewFact, PendingSession, Quarantine,
    SavedFacts, ScoreBreakdown, SearchHit, SearchMode, SearchRequest, SessionKey, SkippedFact,
};
