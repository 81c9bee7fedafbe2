//! The memory service's API: the [`MemoryApi`] trait, the data it speaks in, the events the
//! memory extension publishes, and one opaque error. The memory extension implements it; the
//! maintenance and reflection extensions and hosts call it, and depend on this crate alone, so
//! that they compile neither the database drivers nor the model runtime.
#![warn(missing_docs)]

mod api;
mod error;
mod events;
pub mod spans;
mod types;

pub use api::MemoryApi;
pub use error::{MemoryApiError, Result, StorageError};
pub use events::{MemoryForgotten, SessionCompleted, UserErased};
pub use types::{
    CandidateList, DecayReport, EntityInfo, EpisodePage, FusionMethod, ListMatch, ListRequest,
    Memory, MemoryKind, MemoryStats, MemoryType, NewFact, PendingSession, SavedFacts,
    ScoreBreakdown, SearchHit, SearchMode, SearchRequest, SessionKey, SkippedFact,
};
