//! The SQLite store: every SQL statement of the memory extension lives in this module tree,
//! one file per concern, behind [`MemoryStore`].

mod checkpoint;
mod entities;
mod export;
mod fulltext;
mod index_queue;
mod ingest;
mod integrity;
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

pub use checkpoint::DEFAULT_WAL_TRUNCATE_FRAMES;
pub use index_queue::IndexItem;
pub use ingest::{NewMemory, StoredTurn};
pub use integrity::IntegrityReport;
pub use open::StoreOptions;
pub use people::Person;
pub use records::RankKey;
pub(crate) use rows::content_hash;
pub use vectors::VectorStatus;

use crate::vector_index::QuantizedIndex;

/// The SQLite store.
#[derive(Debug)]
pub struct MemoryStore {
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
