//! The storage boundary: what the service and the search layer need from a memory store, as
//! traits. [`MemoryBackend`] gathers them; it has two implementations, the SQLite
//! [`MemoryStore`](super::MemoryStore) (`store/sqlite/`) and the PostgreSQL store
//! (`store/postgres/`). Only each database's own upkeep stays outside them: opening (with its
//! options), and the test helpers that reach the pool.
//!
//! The traits follow the store's files, one concern each, so that a backend can be written and
//! reviewed concern by concern; a caller holding `dyn MemoryBackend` calls every method without
//! importing them.

mod admin;
mod indexes;
mod inspection;
mod memories;
mod people_and_sessions;

pub(crate) use admin::{
    AccessRecords, JobRecords, MemoryExport, StoreAdmin, JOB_CLAIMS_KEPT_SECS, JOB_HISTORY_KEPT,
};
pub(crate) use indexes::{
    vector_scope, EntityLinks, EntityReads, FullTextIndex, IndexQueue, IndexReads, VectorIndex,
    VectorSearch,
};
pub(crate) use inspection::InspectionQueries;
pub(crate) use memories::{
    FactLifecycle, MemoryIngest, MemoryRecords, MemoryRemoval, SearchRecords, SoftForget,
};
pub(crate) use people_and_sessions::{PeopleRecords, SessionLeases, SessionRecords};

/// Everything a memory store provides: the storage traits together.
pub(crate) trait MemoryBackend:
    MemoryRecords
    + MemoryIngest
    + MemoryRemoval
    + SoftForget
    + FactLifecycle
    + FullTextIndex
    + VectorIndex
    + VectorSearch
    + IndexQueue
    + EntityLinks
    + SessionRecords
    + SessionLeases
    + PeopleRecords
    + MemoryExport
    + StoreAdmin
    + JobRecords
    + AccessRecords
    + InspectionQueries
    + std::fmt::Debug
{
}

impl MemoryBackend for super::sqlite::MemoryStore {}
#[cfg(feature = "postgres")]
impl MemoryBackend for super::postgres::PostgresStore {}
