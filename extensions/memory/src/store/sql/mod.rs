//! SQL written once for both backends. The storage traits whose SQL reads the same in SQLite and
//! PostgreSQL are implemented here, once, for every [`SqlStore`]; each backend keeps a small
//! [`Dialect`] for what truly differs (the columns that order rows as stored, byte-order
//! collation, a few JSON statements), its own way of taking the write lock, and the
//! [`SqlStore`] hooks where it does its own work (matching earlier mentions, vectors, what
//! ends a removal).
//!
//! Queries are built with sqlx's `QueryBuilder`, which numbers the placeholders for each
//! database; values are bound and read through [`Bind`] and [`Driver`], written once for any
//! driver with the types mnemo stores, so that the shared code names no driver and carries none
//! of sqlx's trait bounds.
//! Both dialects read the same SQL: `IS NOT DISTINCT FROM` (SQLite 3.39 and later), `<>`,
//! `RETURNING`, and `ON CONFLICT … DO UPDATE SET x = EXCLUDED.x`.

mod access;
mod admin;
mod driver;
mod entities;
mod export;
mod index_queue;
mod ingest;
mod inspection;
mod lifecycle;
mod lineage;
mod people;
mod records;
mod removal;
mod retire;
mod scope;
mod sessions;
mod shared_runs;
mod vectors;

use std::ops::{Deref, DerefMut};

use async_trait::async_trait;
use sqlx::{Database, Pool, QueryBuilder, Transaction};

use crate::error::Result;
use crate::types::Memory;

pub(crate) use access::{remove_memberships, revoke_user_keys};
pub(crate) use admin::integrity_counts;
pub(crate) use driver::{Driver, Run};
pub(crate) use entities::{count_earlier_mentions, link_entities, MAX_EARLIER_MENTIONS};
#[cfg(feature = "postgres")]
pub(crate) use export::exported_table;
pub(crate) use export::{export_order, exported_record, hex, push_user_rows, EXPORT_TABLES};
pub(crate) use index_queue::{cache_vectors, index_items, queue_every_memory};
pub(crate) use ingest::insert_memory;
pub(crate) use lifecycle::Decayed;
pub(crate) use records::touch;
pub(crate) use removal::{forgotten, FORGOTTEN_COLUMNS};
pub(crate) use scope::{push_filters, push_scope};
pub(crate) use vectors::{provider_status, push_owner_and_kind, record_provider, set_metadata};

/// What a write transaction changes, and so which lock it takes. SQLite has one writer at a
/// time whatever the scope; PostgreSQL takes advisory locks by scope, so that writers of
/// different owners run in parallel.
/// Only PostgreSQL reads the scope; without the `postgres` feature it goes unread.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) enum WriteScope<'a> {
    /// One owner's memories, entities, sessions and events ('' for memories of nobody): writers
    /// of the same owner take turns, writers of different owners run in parallel.
    Owner(&'a str),
    /// Several owners' memories at once (an admin's batch of turns): the owners' locks, taken
    /// in one order by every such writer.
    Owners(&'a [&'a str]),
    /// Rows of several owners that no owner's writer changes (vectors, the indexer's queue): runs
    /// beside owners' writers, and waits only for whole-store writers.
    Beside,
    /// Anything of anyone (decay, expiry, imports, rebuilding the vector index): every other
    /// writer waits.
    Store,
    /// Rows whose primary key settles a race by itself (job claims, the job history): no lock
    /// beyond the database's own (SQLite still has one writer at a time).
    Keyed,
}

/// What truly differs between the two databases' SQL, for the shared code; the rest of what
/// it needs of a driver ([`Driver`]) is the same for both.
pub(crate) trait Dialect: Driver {
    /// The name of the store's full-text index, for messages: SQLite's `FTS5`, PostgreSQL's
    /// `full text`.
    const FULL_TEXT: &'static str;
    /// What a read of the rows a purge removes ends with: PostgreSQL's ` FOR UPDATE`, so that a
    /// writer that reads them waits; nothing for SQLite, whose one writer is this one.
    const LOCK_ROWS: &'static str;
    /// The column of `memories` that orders rows as they were stored: SQLite's `rowid`,
    /// PostgreSQL's `seq`.
    const STORED_ORDER: &'static str;
    /// The table of the memories' vectors: SQLite's `vec_memories`, PostgreSQL's
    /// `memory_vectors`.
    const VECTORS: &'static str;
    /// Removes `enrichment_attempts` from every memory's attributes that has it.
    const CLEAR_ENRICHMENT_ATTEMPTS: &'static str;
    /// What a column of `memories` is prefixed with in a search's filters so that the planner
    /// never drives the query by its index: SQLite's unary `+`; nothing for PostgreSQL.
    const OFF_INDEX: &'static str;
    /// How `memory_entities me` is joined to `memories m` when the links should drive the
    /// query: SQLite's `CROSS JOIN`, which keeps the order as written; PostgreSQL's `JOIN`.
    const JOIN_IN_ORDER: &'static str;
    /// A memory's count of enrichment attempts (alias `m`), 0 if it has none.
    const ENRICHMENT_ATTEMPTS: &'static str;
    /// The column of `memory_entities` that orders links as they were made: SQLite's `rowid`,
    /// PostgreSQL's `position`.
    const LINK_ORDER: &'static str;
    /// The function giving the greatest of its arguments: SQLite's scalar `MAX`, PostgreSQL's
    /// `GREATEST`.
    const GREATEST: &'static str;
    /// The ids of the entities linked to the memory being updated (`memories.id`), as a compact
    /// JSON list sorted byte by byte, for `UPDATE memories SET entity_ids = …`.
    const LINKED_ENTITY_IDS: &'static str;

    /// `column` sorted by bytes, as SQLite sorts text.
    fn byte_order(column: &str) -> String;
    /// `column` sorted as names: ASCII letters without case, then by bytes.
    fn name_order(column: &str) -> String;
    /// Appends "`column` is `name`, ASCII letters without case", in the form the name indexes
    /// serve.
    fn push_same_name(builder: &mut QueryBuilder<Self>, column: &str, name: &str);
    /// A table of the texts of the JSON list in `column`, as a column `value`, for `FROM`.
    fn json_texts(column: &str) -> String;
    /// The value of `key` in the JSON object in `column`, NULL where it is missing or null.
    fn json_field(column: &str, key: &str) -> String;
    /// The start and the end of the expression that sets `key` in the JSON attributes of the
    /// memory being updated to the SQL value written between them.
    fn set_attribute(key: &str) -> (String, &'static str);
    /// The number under `key` in the JSON object in `column`, NULL where it is missing or null.
    /// SQLite's `json_extract` gives a number as it is, as [`Dialect::json_field`] does.
    fn json_number(column: &str, key: &str) -> String {
        Self::json_field(column, key)
    }
    /// Appends what orders the entities an entity lookup by `name` found: PostgreSQL's
    /// ` ORDER BY` a canonical match first; nothing for SQLite, which keeps its index's order.
    fn push_canonical_first(_builder: &mut QueryBuilder<Self>, _name: &str) {}
    /// Appends "`column` is one of `values`": SQLite's `IN (?, …)`, PostgreSQL's `= ANY($n)`
    /// binding one array.
    fn push_one_of(builder: &mut QueryBuilder<Self>, column: &str, values: &[String]);
    /// Appends "the tags of memory `m` hold `tag`".
    fn push_tagged(builder: &mut QueryBuilder<Self>, tag: &str);
    /// Appends "the attributes of memory `m` hold `key` with the value `entry` gives it", where
    /// `entry` is the JSON object `{key: value}` as text and `path` SQLite's JSON path to `key`
    /// (`$."key"`); both are bound, never written into the SQL.
    fn push_attribute_equals(builder: &mut QueryBuilder<Self>, path: &str, entry: &str);
}

/// Binding values while a query is built: `builder.push(" AND user_id = ").text(user)`.
pub(crate) trait Bind {
    /// Binds a text.
    fn text(&mut self, value: impl Into<String>) -> &mut Self;
    /// Binds a text or NULL.
    fn opt_text(&mut self, value: Option<impl Into<String>>) -> &mut Self;
    /// Binds an integer.
    fn int(&mut self, value: i64) -> &mut Self;
    /// Binds an integer or NULL.
    fn opt_int(&mut self, value: Option<i64>) -> &mut Self;
    /// Binds a real number.
    fn float(&mut self, value: f64) -> &mut Self;
    /// Binds bytes.
    fn bytes(&mut self, value: Vec<u8>) -> &mut Self;
    /// Binds a count, limit or offset, saturated at `i64::MAX`.
    fn count(&mut self, value: usize) -> &mut Self;
    /// Appends `(?, ?, …)` binding each of `values`.
    fn text_list(&mut self, values: &[String]) -> &mut Self;
}

impl<D: Driver> Bind for QueryBuilder<D> {
    fn text(&mut self, value: impl Into<String>) -> &mut Self {
        D::bind_text(self, value.into());
        self
    }

    fn opt_text(&mut self, value: Option<impl Into<String>>) -> &mut Self {
        D::bind_opt_text(self, value.map(Into::into));
        self
    }

    fn int(&mut self, value: i64) -> &mut Self {
        D::bind_int(self, value);
        self
    }

    fn opt_int(&mut self, value: Option<i64>) -> &mut Self {
        D::bind_opt_int(self, value);
        self
    }

    fn float(&mut self, value: f64) -> &mut Self {
        D::bind_float(self, value);
        self
    }

    fn bytes(&mut self, value: Vec<u8>) -> &mut Self {
        D::bind_bytes(self, value);
        self
    }

    fn count(&mut self, value: usize) -> &mut Self {
        self.int(i64::try_from(value).unwrap_or(i64::MAX))
    }

    fn text_list(&mut self, values: &[String]) -> &mut Self {
        self.push("(");
        for (index, value) in values.iter().enumerate() {
            if index > 0 {
                self.push(", ");
            }
            D::bind_text(self, value.clone());
        }
        self.push(")");
        self
    }
}

/// A write transaction with the lock its store's writers take turns on, released after the
/// transaction ends (fields drop in order).
pub(crate) struct WriteTx<D: Database> {
    tx: Transaction<'static, D>,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl<D: Database> WriteTx<D> {
    /// A transaction holding `turn`, if the store has an in-process lock.
    pub(crate) fn new(
        tx: Transaction<'static, D>,
        turn: Option<tokio::sync::OwnedMutexGuard<()>>,
    ) -> Self {
        Self { tx, _turn: turn }
    }

    /// Commits, then releases the lock.
    pub(crate) async fn commit(self) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }
}

impl<D: Database> Deref for WriteTx<D> {
    type Target = D::Connection;

    fn deref(&self) -> &D::Connection {
        &self.tx
    }
}

impl<D: Database> DerefMut for WriteTx<D> {
    fn deref_mut(&mut self) -> &mut D::Connection {
        &mut self.tx
    }
}

/// A store whose shared storage traits are written once, here: its pool and its writers' turn.
#[async_trait]
pub(crate) trait SqlStore: Send + Sync {
    /// The store's database.
    type Db: Dialect;

    /// The connection pool.
    fn pool(&self) -> &Pool<Self::Db>;

    /// Begins a write transaction for `scope`, after the writers before it.
    async fn write(&self, scope: WriteScope<'_>) -> Result<WriteTx<Self::Db>>;

    /// Takes the turn that counting accesses ([`records::touch`]) waits for: SQLite's one
    /// writer in the process; none for PostgreSQL, whose row locks are enough.
    async fn access_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        None
    }

    /// The memories of the `depth` newest links of entity `entity_id` (all for a negative
    /// depth), newest first, each with its link's position: SQLite reads them packed.
    async fn newest_entity_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>>;

    /// Links a new entity to the owner's earlier memories that mention `name`, through the
    /// store's own full-text index.
    async fn link_earlier_mentions(
        connection: &mut <Self::Db as Database>::Connection,
        entity_id: &str,
        owner: &str,
        name: &str,
    ) -> Result<()>;

    /// How many of the memories `ids` have a vector, on `connection` inside the caller's
    /// transaction (for a forget's receipt).
    async fn count_vectors(
        &self,
        connection: &mut <Self::Db as Database>::Connection,
        ids: &[String],
    ) -> Result<u64>;

    /// Removes the vectors, sentence vectors and queue entries of the memories `ids`, on
    /// `connection` inside the caller's transaction.
    async fn drop_vectors(
        &self,
        connection: &mut <Self::Db as Database>::Connection,
        ids: &[String],
    ) -> Result<()>;

    /// Forgets the vectors of `ids` wherever the store keeps them besides the database, once
    /// their removal is committed: SQLite's in-memory mirror; nothing for PostgreSQL.
    fn vectors_dropped(&self, _ids: &[String]) {}

    /// Removes the vectors of `user`, who owns `theirs` memories, on `connection` inside the
    /// caller's transaction: the first step of erasing the user.
    async fn erase_user_vectors(
        &self,
        connection: &mut <Self::Db as Database>::Connection,
        user: &str,
        theirs: usize,
    ) -> Result<()>;

    /// Starts a removal of up to `rows` memories on `connection`, inside its transaction before
    /// any row goes: SQLite lets a bulk removal delete from its full-text index without
    /// `secure-delete` (it merges the index at the end instead); nothing for PostgreSQL.
    async fn begin_removal(
        &self,
        _connection: &mut <Self::Db as Database>::Connection,
        _rows: usize,
    ) -> Result<()> {
        Ok(())
    }

    /// Ends a removal of memories on `connection`, inside its transaction once the rows are
    /// gone: `erased` names the user erased, if it is an erasure, and `removed` says whether
    /// any memory went. SQLite drops the erased owner's range of index rows, merges its
    /// full-text index (a bulk removal) or marks the merge due, and moves the vector generation
    /// on (returned); nothing for PostgreSQL.
    async fn end_removal(
        &self,
        _connection: &mut <Self::Db as Database>::Connection,
        _erased: Option<&str>,
        _removed: bool,
    ) -> Result<Option<i64>> {
        Ok(None)
    }

    /// After a removal of `ids` (an erasure if `erased`) is committed, with the generation
    /// [`SqlStore::end_removal`] gave: SQLite moves its vector mirror along, PostgreSQL takes the
    /// planner's statistics again after an erasure.
    async fn removal_committed(&self, ids: &[String], generation: Option<i64>, erased: bool);

    /// Records `supersedes: old_id` in the attributes of memory `id`, as SQLite's `json_set`
    /// does: the key's value replaced where it stands, or the key appended; a memory that does
    /// not exist, or whose attributes are not a JSON object, is left alone.
    async fn set_supersedes(
        connection: &mut <Self::Db as Database>::Connection,
        id: &str,
        old_id: &str,
    ) -> Result<()>;

    /// Writes a decay run at `now` on `connection`, inside the caller's transaction: each
    /// fact's new confidence and `decayed_at`, and `faded_at` for those that faded.
    async fn write_decay(
        connection: &mut <Self::Db as Database>::Connection,
        decayed: &[Decayed],
        now: i64,
    ) -> Result<()> {
        lifecycle::write_decay_each::<Self::Db>(connection, decayed, now).await
    }

    /// The memories a query selecting [`crate::store::rows::MEMORY_COLUMNS`] returns, in its
    /// order, read on a pooled connection.
    async fn fetch_memories(&self, query: QueryBuilder<Self::Db>) -> Result<Vec<Memory>> {
        self.read(query)
            .await?
            .iter()
            .map(Self::Db::memory)
            .collect()
    }

    /// Runs a read query on a pooled connection; its rows.
    async fn read(
        &self,
        query: QueryBuilder<Self::Db>,
    ) -> Result<Vec<<Self::Db as Database>::Row>> {
        let mut connection = self.pool().acquire().await?;
        Self::Db::rows(&mut connection, query).await
    }
}
