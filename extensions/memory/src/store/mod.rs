//! The memory store: every SQL statement of the memory extension lives in this module tree. The
//! rest of the crate reaches a store through the storage traits of [`backend`], gathered as
//! [`MemoryBackend`]; two backends implement them, file by file and one concern each:
//!
//! - [`sqlite`]: the default, one file in the data directory (FTS5, sqlite-vec and a quantised
//!   in-memory mirror of the vectors);
//! - `postgres` (with the `postgres` feature): PostgreSQL with pgvector, for several
//!   `mnemo serve` instances on one database (tsvector full text, HNSW vectors, leases and
//!   advisory locks between instances).
//!
//! `types` holds what the traits take and give, and `rows` the stored forms both backends share
//! (Unix seconds, JSON lists, little-endian vector blobs), so that a store moves between them
//! row by row (`mnemo migrate-store`). `backends` opens PostgreSQL, or says how to build it in.

mod backend;
mod backends;
#[cfg(test)]
mod conformance;
mod counts;
mod index_order;
#[cfg(test)]
pub(crate) mod index_order_checks;
mod listing;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
mod rows;
#[cfg(test)]
pub(crate) mod sentence_key_checks;
mod sql;
pub(crate) mod sqlite;
mod types;

pub(crate) use crate::types::{EntitySummary, KeyRecord, McpSessionRecord, OwnerSummary, Person};
pub(crate) use backend::MemoryBackend;
pub(crate) use backends::{open_postgres, redacted, PostgresOptions};
pub(crate) use rows::{content_hash, new_id};
pub(crate) use sqlite::{MemoryStore, StoreOptions, DEFAULT_WAL_TRUNCATE_FRAMES};
pub(crate) use types::{
    Erasure, FirstPass, ForgetRequest, Forgetting, NewMemory, RankKey, TextScope, TurnRow,
};
pub use types::{IndexItem, IntegrityReport, MirrorSize, StoredTurn, VectorStatus};

/// Removes the memories `ids` for good through [`backend::MemoryRemoval::forget`] as an admin would,
/// for the store's tests: what was removed.
#[cfg(test)]
pub(crate) async fn purge<S: backend::MemoryRemoval + ?Sized>(
    store: &S,
    ids: &[String],
) -> crate::error::Result<Vec<crate::types::MemoryForgotten>> {
    let request = ForgetRequest {
        ids,
        soft: false,
        user_id: None,
        at: chrono::Utc::now(),
        query_vectors: 0,
    };
    Ok(store.forget(&request).await?.forgotten)
}
