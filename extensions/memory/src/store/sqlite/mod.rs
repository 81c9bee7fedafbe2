//! The SQLite store, the default backend: one file in the data directory, FTS5 for full text,
//! sqlite-vec with a quantised in-memory mirror for vectors. [`MemoryStore`] implements the
//! storage traits of [`super::backend`] file by file; only opening it (`MemoryStore::open`, with
//! SQLite's options) is SQLite's own.
//!
//! Files: `open` (connection options, pragmas, migrations and every call into C),
//! `checkpoint` (the WAL checkpointer), `scope` (visibility and request filters), `records`,
//! `fulltext`, `vectors`, `index_queue`, `export` and `admin`, one storage trait each;
//! `entities` (linking earlier mentions through FTS5) and `removal` (what ends a removal here),
//! SQLite's parts of traits written once for both backends in `store/sql/`, over `dialect`, as
//! are storing memories, a fact's lifecycle, access records, sessions and people; `packed`
//! reads many small rows as one.

mod admin;
mod checkpoint;
mod dialect;
mod entities;
mod export;
mod fulltext;
mod index_merge;
mod index_queue;
mod open;
mod packed;
mod records;
mod removal;
mod scope;
mod scope_rank;
mod text_statistics;
mod vectors;

use std::sync::{Arc, RwLock};

use sqlx::sqlite::SqlitePool;

pub(crate) use checkpoint::DEFAULT_WAL_TRUNCATE_FRAMES;
pub(crate) use open::StoreOptions;

use super::VectorStatus;
use crate::vector_index::QuantizedIndex;

/// The SQLite store: see the module docs.
#[derive(Debug)]
pub(crate) struct MemoryStore {
    pool: SqlitePool,
    /// One writer at a time inside the process; readers never wait on it (WAL). Shared with
    /// the checkpointer, which holds it while it truncates the log.
    write_lock: Arc<tokio::sync::Mutex<()>>,
    vector: RwLock<VectorStatus>,
    /// The quantised in-memory mirror of `vec_memories` that answers KNN queries.
    mirror: RwLock<QuantizedIndex>,
    /// The mirror of `memory_sentence_vectors` (rows `sentence_key(memory, ordinal)`), at the
    /// same generation as `mirror`.
    sentence_mirror: RwLock<QuantizedIndex>,
    /// One mirror reload at a time.
    reload_lock: tokio::sync::Mutex<()>,
    vector_oversample: usize,
    /// The scopes' full-text figures that `scope_bm25()` ranks by.
    text_statistics: text_statistics::TextStatistics,
    /// The owner the indexer's last batch ended with (store/index_order.rs).
    index_cursor: crate::store::index_order::OwnerCursor,
    /// The background WAL checkpointer; stopped on close and drop.
    checkpointer: tokio::task::JoinHandle<()>,
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.checkpointer.abort();
    }
}

#[cfg(test)]
pub(crate) mod tests;
