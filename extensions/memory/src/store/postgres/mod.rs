//! The PostgreSQL store: several `mnemo serve` instances on one database. [`PostgresStore`]
//! implements the storage traits of [`super::backend`] file by file, as the SQLite store does:
//! the same tables and values (see `migrations-postgres/`), with PostgreSQL's own full text (a
//! generated tsvector with a GIN index), pgvector's HNSW index for vectors, and what several
//! instances need to share one database:
//!
//! - writes are serialised per owner by transaction-level advisory locks ([`open`]), so that
//!   what SQLite's one writer made atomic (finding or creating an entity, opening a session)
//!   stays atomic across instances, while different users write in parallel;
//! - the indexer's queue is taken by lease with `FOR UPDATE SKIP LOCKED` (`index_queue`), so
//!   one instance embeds each memory.
//!
//! Files: `open` (connecting, migrations, write transactions), `scope` (visibility and request
//! filters), `text_search` (full-text queries as tsquery), then one storage trait each:
//! `records`, `fulltext`, `vectors`, `index_queue`, `export` and `admin`, and `entities`
//! (linking earlier mentions through the text search index) (storing and removing memories,
//! linking entities, a fact's lifecycle, access records, sessions and people are written once in
//! `store/sql/`, over `dialect`, with `lifecycle` holding PostgreSQL's own writes for it);
//! `reachability` probes whether the database answers, so that a server refuses at once while
//! it does not.

mod admin;
mod dialect;
mod entities;
mod export;
mod fulltext;
mod index_queue;
mod lifecycle;
mod open;
mod reachability;
mod records;
mod scope;
mod text_search;
mod vectors;

use std::sync::RwLock;

use sqlx::PgPool;

pub(crate) use open::redacted;

use super::VectorStatus;

/// The PostgreSQL store: see the module docs.
#[derive(Debug)]
pub(crate) struct PostgresStore {
    pool: PgPool,
    vector: RwLock<VectorStatus>,
    /// HNSW candidates per search (`hnsw.ef_search`); 0 searches every vector exactly.
    ef_search: usize,
    /// The owner this instance's last index batch ended with (store/index_order.rs).
    index_cursor: crate::store::index_order::OwnerCursor,
    /// Whether the database answers, as the probe last found.
    reachability: reachability::Reachability,
    /// The probe's task, stopped with the store.
    probe: tokio::task::JoinHandle<()>,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.probe.abort();
    }
}

#[cfg(test)]
pub(crate) mod tests;
