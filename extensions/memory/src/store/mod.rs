//! The SQLite store: every SQL statement of the memory extension lives in this module tree,
//! one file per concern. The rest of the crate reaches it through the storage traits of
//! [`backend`] (gathered as [`MemoryBackend`]), which [`MemoryStore`] implements file by file;
//! only opening it (`MemoryStore::open`, with SQLite's options) is SQLite's own.
//!
//! Files: `open` (connection options, pragmas, migrations and every call into C),
//! `checkpoint` (the WAL checkpointer), `rows` (stored forms), `scope` (visibility and request
//! filters), `records`, `ingest`, `entities`, `fulltext`, `vectors`, `index_queue`, `removal`,
//! `lifecycle`, `sessions`, `people`, `export` and `admin`, one storage trait each.

mod admin;
mod backend;
mod checkpoint;
mod entities;
mod export;
mod fulltext;
mod index_queue;
mod ingest;
mod lifecycle;
mod open;
mod people;
mod records;
mod removal;
mod rows;
mod scope;
mod sessions;
mod vectors;

use std::sync::{Arc, RwLock};

use sqlx::sqlite::SqlitePool;

pub use admin::IntegrityReport;
pub(crate) use backend::MemoryBackend;
pub(crate) use checkpoint::DEFAULT_WAL_TRUNCATE_FRAMES;
pub use index_queue::IndexItem;
pub(crate) use ingest::NewMemory;
pub use ingest::StoredTurn;
pub(crate) use open::StoreOptions;
pub use people::Person;
pub(crate) use records::RankKey;
pub(crate) use rows::content_hash;
pub use vectors::VectorStatus;

use crate::vector_index::QuantizedIndex;

/// The SQLite store, the one implementation of [`MemoryBackend`].
#[derive(Debug)]
pub(crate) struct MemoryStore {
    pool: SqlitePool,
    /// One writer at a time inside the process; readers never wait on it (WAL). Shared with
    /// the checkpointer, which holds it while it truncates the log.
    write_lock: Arc<tokio::sync::Mutex<()>>,
    vector: RwLock<VectorStatus>,
    /// The quantised in-memory mirror of `vec_memories` that answers KNN queries.
    mirror: RwLock<QuantizedIndex>,
    /// One mirror reload at a time.
    reload_lock: tokio::sync::Mutex<()>,
    vector_oversample: usize,
    /// The background WAL checkpointer; stopped on close and drop.
    checkpointer: tokio::task::JoinHandle<()>,
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.checkpointer.abort();
    }
}

#[cfg(test)]
mod tests;
