//! `MemoryStore`: every SQL statement of mnemo lives here, behind one type, so that another
//! backend can follow without touching callers.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Once, PoisonError, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use mnemo_ner_api::ExtractedEntity;
use serde_json::{Map, Value};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection, Transaction};

use crate::error::{MemoryError, Result};
use crate::fts::{match_any, match_rare_or_all_common, query_terms};
use crate::types::{
    DecayReport, EntityInfo, EpisodePage, Memory, MemoryForgotten, MemoryKind, MemoryStats,
    PendingSession, SearchRequest, SessionKey, UserErased,
};
use crate::vector_index::{QuantizedIndex, VectorFilter, VectorRow};

const MEMORY_COLUMNS: &str = "m.id, m.kind, m.content, m.session_id, m.user_id, m.chat_id, \
    m.event_time, m.created_at, m.valid_until, m.confidence, m.access_count, m.last_accessed, \
    m.decay_rate, m.source_ids, m.source_role, m.entity_ids, m.tags, m.attributes, \
    m.memory_type, m.expires_at, m.shared, m.superseded_at, m.superseded_by_id, m.subject_ids";

/// How the database is opened.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long a connection waits for a lock before failing.
    pub busy_timeout: Duration,
    /// `synchronous` pragma: `full` makes a committed write survive power loss.
    pub synchronous: String,
    /// Connections in the pool (readers run in parallel with the one writer under WAL).
    pub max_connections: u32,
    /// Vector search: candidates taken by sign-bit Hamming distance per result, then re-scored
    /// (see [`crate::vector_index`]); 0 searches `vec_memories` exactly by brute force.
    pub vector_oversample: usize,
    /// Write-ahead log length, in pages, past which it is truncated
    /// ([`DEFAULT_WAL_TRUNCATE_FRAMES`]; see `checkpoint_loop`).
    pub wal_truncate_frames: i64,
}

/// Whether vector search can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorStatus {
    /// `vec_memories` matches the embedding provider.
    Enabled {
        /// Vector length.
        dimensions: usize,
        /// The provider's model id.
        model_id: String,
    },
    /// Vector search is off; the reason says why and what to do.
    Disabled {
        /// Why.
        reason: String,
    },
}

/// A memory to insert.
#[derive(Debug, Clone)]
pub struct NewMemory {
    /// Kind.
    pub kind: MemoryKind,
    /// Text.
    pub content: String,
    /// Session.
    pub session_id: Option<String>,
    /// Owner.
    pub user_id: Option<String>,
    /// Chat.
    pub chat_id: Option<String>,
    /// When it happened.
    pub event_time: DateTime<Utc>,
    /// When recorded.
    pub created_at: DateTime<Utc>,
    /// Speaker, for episodes.
    pub source_role: Option<String>,
    /// Provenance.
    pub source_ids: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Metadata.
    pub attributes: Map<String, Value>,
    /// Decay per day.
    pub decay_rate: f64,
    /// Initial confidence.
    pub confidence: f64,
    /// Seed 001's type, if given.
    pub memory_type: Option<String>,
    /// When it stops being retrievable.
    pub expires_at: Option<DateTime<Utc>>,
    /// Visible to every member of `chat_id`.
    pub shared: bool,
    /// The people it is about (person entity ids); they are linked as entities too.
    pub subject_ids: Vec<String>,
}

impl NewMemory {
    /// The session it belongs to: its user's, in its chat. `None` without a session or owner.
    pub fn session_key(&self) -> Option<SessionKey> {
        Some(SessionKey {
            user_id: self.user_id.clone()?,
            chat_id: self.chat_id.clone(),
            session_id: self.session_id.clone()?,
        })
    }
}

/// A memory waiting for its vector.
#[derive(Debug, Clone)]
pub struct IndexItem {
    /// The memory.
    pub memory_id: String,
    /// Its text.
    pub content: String,
    /// Its owner (a vector-table metadata column).
    pub user_id: String,
    /// Its kind (a vector-table metadata column).
    pub kind: String,
    /// False when it was deleted before being indexed.
    pub active: bool,
}

/// What [`MemoryStore::check_integrity`] found. Consistent when [`Self::problems`] is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IntegrityReport {
    /// `PRAGMA integrity_check`'s findings; empty when it says `ok`.
    pub database: Vec<String>,
    /// The full-text index disagrees with `memories` (FTS5 `integrity-check`): why.
    pub full_text: Option<String>,
    /// Rows of `memories` (active or not).
    pub memories: i64,
    /// Active memories (not soft-deleted).
    pub active: i64,
    /// Vectors in `vec_memories`; `None` when no vector index exists.
    pub vectors: Option<i64>,
    /// Vectors whose memory is gone or soft-deleted.
    pub orphan_vectors: i64,
    /// Active memories with neither a vector nor a place in the indexer's queue: lost from
    /// semantic search.
    pub unindexed: i64,
    /// Active memories waiting in the indexer's queue (not a fault: the indexer catches up).
    pub queued: i64,
    /// Recorded event ids whose memory was forgotten: kept on purpose (an id, no content), so
    /// that replaying the same events does not bring the memory back. Not a fault.
    pub forgotten_events: i64,
}

impl IntegrityReport {
    /// What is wrong, one line each; empty when the store is consistent.
    pub fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self
            .database
            .iter()
            .map(|finding| format!("database: {finding}"))
            .collect();
        if let Some(reason) = &self.full_text {
            problems.push(format!("full-text index: {reason}"));
        }
        if self.orphan_vectors > 0 {
            problems.push(format!(
                "{} vectors belong to no active memory",
                self.orphan_vectors
            ));
        }
        if self.unindexed > 0 {
            problems.push(format!(
                "{} active memories have no vector and are not queued for one",
                self.unindexed
            ));
        }
        problems
    }
}

/// What [`MemoryStore::insert_turn`] stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredTurn {
    /// The new memory; `None` when the event was stored before.
    pub memory_id: Option<String>,
    /// True when this turn opened its session.
    pub new_session: bool,
    /// The user's other open sessions in the same chat (or personal conversation), which this
    /// turn closed by opening a new one and which still wait for consolidation: each is reported
    /// once, by the turn that closed it.
    pub closed_sessions: Vec<SessionKey>,
}

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
    /// Cached document frequencies of query terms and entity-link totals (see [`TermStats`]).
    stats: std::sync::Mutex<TermStats>,
    /// The background WAL checkpointer; stopped on close and drop.
    checkpointer: tokio::task::JoinHandle<()>,
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.checkpointer.abort();
    }
}

/// How often the write-ahead log is checkpointed.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// Log frames (pages; 4 KB each by default, so 64 MB) past which the checkpointer truncates
/// the log. Also the size SQLite trims the log file to when it restarts it (`journal_size_limit`).
pub const DEFAULT_WAL_TRUNCATE_FRAMES: i64 = 16_384;

/// How long a truncation waits for readers still on the log before it gives up for now.
const TRUNCATE_WAIT: Duration = Duration::from_millis(200);

/// Checkpoint rounds skipped after readers kept a truncation from finishing (1 s): writers
/// then wait at most 200 ms in every 1.5 s for a reader that never lets go, and the log grows
/// for at most a second between attempts.
const TRUNCATE_BACKOFF_ROUNDS: u32 = 2;

/// Copies committed WAL frames into the database file in the background (PASSIVE: it never
/// blocks readers or the writer), so that the log stays short without a writer doing it.
///
/// Under a writer that never pauses, passive checkpoints never catch the log's end, so SQLite
/// never restarts the log and it grows without bound (400 MB in a 100k-memory bench; at a
/// million memories, closing the store then took longer than the next open waits). Past
/// `wal_truncate_frames` ([`DEFAULT_WAL_TRUNCATE_FRAMES`]) the checkpointer therefore takes the store's write lock, so that
/// writers queue in the process instead of spinning on SQLITE_BUSY, and runs a TRUNCATE
/// checkpoint: it copies the few frames left, waits up to [`TRUNCATE_WAIT`] for the readers
/// still on the log (searches take milliseconds) and empties the log file. A long reader (an
/// export) makes it give up and try again [`TRUNCATE_BACKOFF_ROUNDS`] rounds later, so writers
/// are never held longer than that wait.
async fn checkpoint_loop(
    pool: SqlitePool,
    write_lock: Arc<tokio::sync::Mutex<()>>,
    busy_timeout: Duration,
    truncate_frames: i64,
) {
    let mut interval = tokio::time::interval(CHECKPOINT_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backoff = 0;
    loop {
        interval.tick().await;
        if pool.is_closed() {
            break;
        }
        let log_frames = match checkpoint(&pool, "PASSIVE").await {
            Ok((_, log_frames)) => log_frames,
            Err(error) if pool.is_closed() => {
                tracing::trace!(%error, "checkpointer stopped with the pool");
                break;
            }
            Err(error) => {
                tracing::warn!(%error, "wal checkpoint failed; retrying");
                continue;
            }
        };
        if backoff > 0 {
            backoff -= 1;
            continue;
        }
        if log_frames > truncate_frames {
            let started = std::time::Instant::now();
            let _write = write_lock.lock().await;
            match truncate_log(&pool, busy_timeout).await {
                Ok(true) => tracing::debug!(
                    log_frames,
                    micros = started.elapsed().as_micros() as u64,
                    "wal truncated"
                ),
                Ok(false) => {
                    tracing::debug!(log_frames, "readers kept the wal; truncating later");
                    backoff = TRUNCATE_BACKOFF_ROUNDS;
                }
                Err(_) if pool.is_closed() => break,
                Err(error) => tracing::warn!(%error, log_frames, "wal truncation failed; retrying"),
            }
        }
    }
}

/// Runs `PRAGMA wal_checkpoint(mode)`; returns whether it was kept from finishing (by the
/// writer or readers) and the log's length in frames.
async fn checkpoint(
    pool: &SqlitePool,
    mode: &str,
) -> std::result::Result<(bool, i64), sqlx::Error> {
    let (busy, log_frames, checkpointed) =
        sqlx::query_as::<_, (i64, i64, i64)>(&format!("PRAGMA wal_checkpoint({mode})"))
            .fetch_one(pool)
            .await?;
    tracing::trace!(mode, busy, log_frames, checkpointed, "wal checkpoint");
    Ok((busy != 0, log_frames))
}

/// A TRUNCATE checkpoint that waits at most [`TRUNCATE_WAIT`] for readers; true when the log
/// was emptied. The connection gets `busy_timeout` back afterwards.
async fn truncate_log(
    pool: &SqlitePool,
    busy_timeout: Duration,
) -> std::result::Result<bool, sqlx::Error> {
    let mut connection = pool.acquire().await?;
    let set_timeout = |timeout: Duration| format!("PRAGMA busy_timeout = {}", timeout.as_millis());
    sqlx::query(&set_timeout(TRUNCATE_WAIT))
        .execute(&mut *connection)
        .await?;
    let outcome = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(&mut *connection)
        .await;
    sqlx::query(&set_timeout(busy_timeout))
        .execute(&mut *connection)
        .await?;
    let (busy, log_frames, checkpointed) = outcome?;
    tracing::trace!(busy, log_frames, checkpointed, "wal truncation");
    Ok(busy == 0)
}

/// How long cached corpus statistics are trusted: they steer which terms and entities are
/// worth searching, where a few minutes' drift changes nothing.
const STATS_TTL: Duration = Duration::from_secs(120);
/// Most cached term frequencies; the cache starts over beyond this.
const STATS_MAX_TERMS: usize = 20_000;
/// Matches worth ranking in one query; a query matching more is narrowed first (see
/// [`MemoryStore::search_fts`]).
const RANK_BUDGET: i64 = 2_000;
/// The newest links of an entity read when looking for memories that also name another of
/// the query's entities (see [`MemoryStore::search_entities`]).
const CO_MENTION_SCAN: i64 = 4_096;

/// The stored form of a session's chat: '' for a personal conversation, so that the session
/// table's key holds no NULL (chat ids are never empty).
fn chat_key(chat_id: Option<&str>) -> &str {
    chat_id.unwrap_or("")
}

/// Closes the user's other open sessions in the same chat (or personal conversation) as
/// `session`; returns the ids of those not consolidated yet.
async fn close_other_sessions(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    session: &SessionKey,
    at: DateTime<Utc>,
) -> Result<Vec<String>> {
    let closed: Vec<(String, Option<i64>)> = sqlx::query_as(
        "UPDATE sessions_consolidations SET closed_at = ? \
         WHERE user_id = ? AND chat_id = ? AND closed_at IS NULL AND session_id != ? \
         RETURNING session_id, consolidated_at",
    )
    .bind(ts(at))
    .bind(&session.user_id)
    .bind(chat_key(session.chat_id.as_deref()))
    .bind(&session.session_id)
    .fetch_all(&mut **tx)
    .await?;
    let mut pending: Vec<String> = closed
        .into_iter()
        .filter(|(_, consolidated_at)| consolidated_at.is_none())
        .map(|(id, _)| id)
        .collect();
    pending.sort();
    Ok(pending)
}

/// What ranking a search candidate needs: see [`MemoryStore::rank_keys`].
#[derive(Debug, Clone, PartialEq)]
pub struct RankKey {
    /// The memory's confidence.
    pub confidence: f64,
    /// Its event time, in seconds.
    pub event_time: i64,
    /// The turn before it in its session (episodes only, when asked for).
    pub previous: Option<String>,
    /// The turn after it in its session (episodes only, when asked for).
    pub next: Option<String>,
}

/// Corpus statistics cached between searches.
#[derive(Debug, Default)]
struct TermStats {
    documents: Option<(i64, std::time::Instant)>,
    linked_memories: Option<(i64, std::time::Instant)>,
    frequencies: HashMap<String, (i64, std::time::Instant)>,
    /// Memories linked to each entity, by entity id.
    entity_links: HashMap<String, (i64, std::time::Instant)>,
}

fn fresh(entry: Option<&(i64, std::time::Instant)>) -> Option<i64> {
    entry
        .filter(|(_, at)| at.elapsed() < STATS_TTL)
        .map(|(value, _)| *value)
}

/// Registers sqlite-vec with every connection SQLite opens from now on.
#[allow(unsafe_code)]
fn register_sqlite_vec() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        type EntryPoint = unsafe extern "C" fn(
            *mut libsqlite3_sys::sqlite3,
            *mut *mut std::os::raw::c_char,
            *const libsqlite3_sys::sqlite3_api_routines,
        ) -> std::os::raw::c_int;
        // SAFETY: `sqlite3_vec_init` is sqlite-vec's extension entry point, whose real C signature
        // is the `EntryPoint` SQLite expects; the crate merely declares it without arguments.
        // It is registered once, before any connection of the pool is opened.
        unsafe {
            let entry: EntryPoint = std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ());
            libsqlite3_sys::sqlite3_auto_extension(Some(entry));
        }
    });
}

/// Whether a connection given back to the pool may be used again: only if it is outside any
/// transaction. A COMMIT that fails on a full disk or an I/O error can leave the connection
/// inside a transaction that sqlx no longer tracks correctly (its next `begin` becomes a
/// SAVEPOINT nested in the dead transaction); every later "commit" on it would then succeed
/// into a transaction that is never committed, and is lost when the connection closes. Such a
/// connection is closed instead (which rolls it back), and the pool opens a fresh one.
#[allow(unsafe_code)]
async fn leaves_no_open_transaction(connection: &mut SqliteConnection) -> sqlx::Result<bool> {
    use sqlx::Connection as _;
    // Taking the handle goes through the connection's worker, after any rollback queued when a
    // transaction was dropped.
    let mut handle = connection.lock_handle().await?;
    // SAFETY: the handle is a live `sqlite3*` owned by the locked connection for this call.
    let autocommit =
        unsafe { libsqlite3_sys::sqlite3_get_autocommit(handle.as_raw_handle().as_ptr()) } != 0;
    drop(handle);
    let depth = connection.is_in_transaction();
    if !autocommit || depth {
        tracing::warn!(
            autocommit,
            sqlx_in_transaction = depth,
            "a database connection came back inside a transaction; closing it"
        );
        return Ok(false);
    }
    Ok(true)
}

/// Whether SQLite opened the main database read-only: the file is not writable by this
/// process. (A read-only directory usually fails the open itself, since the log files cannot be
/// made.)
#[allow(unsafe_code)]
async fn opened_read_only(pool: &SqlitePool) -> Result<bool> {
    let mut connection = pool.acquire().await?;
    let mut handle = connection.lock_handle().await?;
    // SAFETY: the handle is a live `sqlite3*` owned by the locked connection for this call, and
    // the schema name is a NUL-terminated literal.
    let state = unsafe {
        libsqlite3_sys::sqlite3_db_readonly(handle.as_raw_handle().as_ptr(), c"main".as_ptr())
    };
    Ok(state == 1)
}

/// Takes the exclusive lock on `<database>.lock` that serialises opening (and migrating) the
/// store across processes; it is released when the returned file is dropped, or when the
/// process dies. The file itself stays: removing it would let a third process lock a new one.
///
/// A lock file this process may not write (another user made it) is locked through a read-only
/// handle, which `flock` allows. When there is no lock file and none can be made (a read-only
/// directory), there is nothing to race with either: `None`, and the open goes on to report
/// what is read-only by name.
async fn lock_for_opening(database: &Path) -> Result<Option<std::fs::File>> {
    let mut name = database.as_os_str().to_owned();
    name.push(".lock");
    let path = std::path::PathBuf::from(name);
    let locked = tokio::task::spawn_blocking(move || {
        use std::io::ErrorKind;
        let mut options = std::fs::OpenOptions::new();
        let file = match options.create(true).truncate(false).write(true).open(&path) {
            Ok(file) => Ok(file),
            Err(_) => std::fs::File::open(&path),
        };
        match file.and_then(|file| file.lock().map(|()| file)) {
            Ok(file) => Ok(Some(file)),
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                Ok(None)
            }
            Err(source) => Err(MemoryError::OpeningLock {
                path: path.display().to_string(),
                source,
            }),
        }
    })
    .await;
    locked.unwrap_or_else(|error| {
        Err(MemoryError::Invalid(format!(
            "the task locking the store for opening failed: {error}"
        )))
    })
}

fn ts(time: DateTime<Utc>) -> i64 {
    time.timestamp()
}

fn from_ts(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).unwrap_or_default()
}

fn json_list(text: &str, column: &str) -> Result<Vec<String>> {
    serde_json::from_str(text).map_err(|err| MemoryError::Corrupt(format!("{column}: {err}")))
}

pub(crate) fn memory_from_row(row: &SqliteRow) -> Result<Memory> {
    let kind: String = row.try_get("kind")?;
    let attributes: String = row.try_get("attributes")?;
    Ok(Memory {
        id: row.try_get("id")?,
        kind: MemoryKind::parse(&kind)
            .ok_or_else(|| MemoryError::Corrupt(format!("unknown kind `{kind}`")))?,
        content: row.try_get("content")?,
        session_id: row.try_get("session_id")?,
        user_id: row.try_get("user_id")?,
        chat_id: row.try_get("chat_id")?,
        event_time: from_ts(row.try_get("event_time")?),
        created_at: from_ts(row.try_get("created_at")?),
        valid_until: row.try_get::<Option<i64>, _>("valid_until")?.map(from_ts),
        confidence: row.try_get("confidence")?,
        access_count: row.try_get("access_count")?,
        last_accessed: row.try_get::<Option<i64>, _>("last_accessed")?.map(from_ts),
        decay_rate: row.try_get("decay_rate")?,
        source_ids: json_list(&row.try_get::<String, _>("source_ids")?, "source_ids")?,
        source_role: row.try_get("source_role")?,
        entity_ids: json_list(&row.try_get::<String, _>("entity_ids")?, "entity_ids")?,
        tags: json_list(&row.try_get::<String, _>("tags")?, "tags")?,
        attributes: serde_json::from_str(&attributes)
            .map_err(|err| MemoryError::Corrupt(format!("attributes: {err}")))?,
        memory_type: row.try_get("memory_type")?,
        expires_at: row.try_get::<Option<i64>, _>("expires_at")?.map(from_ts),
        shared: row.try_get::<i64, _>("shared")? != 0,
        superseded_at: row.try_get::<Option<i64>, _>("superseded_at")?.map(from_ts),
        superseded_by_id: row.try_get("superseded_by_id")?,
        subject_ids: json_list(&row.try_get::<String, _>("subject_ids")?, "subject_ids")?,
    })
}

/// A new id: `<prefix>_<16 hex>`, unique across processes and restarts.
pub(crate) fn new_id(prefix: &str) -> String {
    use sha2::Digest;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let digest = sha2::Sha256::digest(format!("{nanos}:{count}:{}", std::process::id()));
    let hex: String = digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{prefix}_{hex}")
}

/// Hex SHA-256 of a text, the embedding cache key.
pub(crate) fn content_hash(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn vector_blob(vector: &[f32]) -> Vec<u8> {
    vector
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

fn blob_vector(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        .collect()
}

/// Appends the visibility rule for alias `m`: a user sees their personal memories (no chat); in
/// a chat, also their own memories of that chat and the chat's shared memories; never another
/// user's personal memories or another chat's.
///
/// The columns carry a unary `+` so that SQLite never drives a query by the owner or chat index:
/// every caller has a far narrower starting point (an id list, FTS matches, entity links), and
/// scanning all of a user's memories instead made searches grow with the store.
fn push_scope(
    builder: &mut QueryBuilder<'_, Sqlite>,
    user_id: Option<&str>,
    chat_id: Option<&str>,
) {
    match (user_id, chat_id) {
        (Some(user), Some(chat)) => {
            builder
                .push(" AND ((+m.user_id = ")
                .push_bind(user.to_owned())
                .push(" AND (+m.chat_id IS NULL OR +m.chat_id = ")
                .push_bind(chat.to_owned())
                .push(")) OR (m.shared = 1 AND +m.chat_id = ")
                .push_bind(chat.to_owned())
                .push("))");
        }
        (Some(user), None) => {
            builder
                .push(" AND +m.user_id = ")
                .push_bind(user.to_owned())
                .push(" AND +m.chat_id IS NULL");
        }
        (None, Some(chat)) => {
            builder
                .push(" AND +m.chat_id = ")
                .push_bind(chat.to_owned());
        }
        (None, None) => {}
    }
}

/// Appends the filters of `request` (owner, kinds, session, time, tags, deleted) for alias `m`.
fn push_filters(builder: &mut QueryBuilder<'_, Sqlite>, request: &SearchRequest) {
    if !request.include_deleted {
        builder.push(" AND m.valid_until IS NULL");
    }
    if !request.include_superseded {
        builder.push(" AND m.superseded_at IS NULL");
    }
    if let Some(at) = request.at {
        builder
            .push(" AND (m.expires_at IS NULL OR m.expires_at > ")
            .push_bind(ts(at))
            .push(")");
    }
    push_scope(
        builder,
        request.user_id.as_deref(),
        request.chat_id.as_deref(),
    );
    if let Some(memory_type) = &request.memory_type {
        builder
            .push(
                " AND COALESCE(m.memory_type, CASE m.kind WHEN 'episode' THEN 'conversation' ELSE m.kind END) = ",
            )
            .push_bind(memory_type.clone());
    }
    if !request.about.is_empty() {
        builder.push(
            " AND EXISTS (SELECT 1 FROM memory_entities about WHERE about.memory_id = m.id AND about.entity_id IN (",
        );
        let mut separated = builder.separated(", ");
        for entity_id in &request.about {
            separated.push_bind(entity_id.clone());
        }
        builder.push("))");
    }
    if !request.kinds.is_empty() {
        builder.push(" AND +m.kind IN (");
        let mut separated = builder.separated(", ");
        for kind in &request.kinds {
            separated.push_bind(kind.as_str());
        }
        builder.push(")");
    }
    if let Some(session) = &request.exclude_session {
        builder
            .push(" AND (m.session_id IS NULL OR m.session_id != ")
            .push_bind(session.clone())
            .push(")");
    }
    if let Some(since) = request.since {
        builder.push(" AND m.event_time >= ").push_bind(ts(since));
    }
    if let Some(until) = request.until {
        builder.push(" AND m.event_time < ").push_bind(ts(until));
    }
    for tag in &request.tags {
        builder
            .push(" AND EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value = ")
            .push_bind(tag.clone())
            .push(")");
    }
}

/// The stored `vector_generation` (0 before the first change to `vec_memories`).
async fn vector_generation<'e, E>(executor: E) -> Result<i64>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    let value: Option<String> =
        sqlx::query_scalar("SELECT value FROM memory_metadata WHERE key = 'vector_generation'")
            .fetch_optional(executor)
            .await?;
    Ok(value.and_then(|value| value.parse().ok()).unwrap_or(0))
}

/// The statement creating `vec_memories` for vectors of `dimensions` floats.
fn create_vector_table(dimensions: usize) -> String {
    format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS vec_memories USING vec0(\
         memory_id text primary key, embedding float[{dimensions}], user_id text, kind text)"
    )
}

/// What every removal of memories ends with, inside its transaction: the full-text index is
/// merged, and the vector generation moved on if there are vectors (returned).
///
/// A delete leaves the row's terms and positions in older FTS5 segments, beside a delete marker,
/// until a merge drops them: enough to rebuild the text. Merging the index into one segment now
/// drops them (0.1-0.2 s at 100k memories). FTS5's own `secure-delete` option would do this per
/// row, but the bundled SQLite (3.46.0) reports its index as malformed afterwards.
async fn after_removal(tx: &mut Transaction<'_, Sqlite>, vectors: bool) -> Result<Option<i64>> {
    sqlx::query("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
        .execute(&mut **tx)
        .await?;
    if vectors {
        Ok(Some(bump_vector_generation(tx).await?))
    } else {
        Ok(None)
    }
}

/// Moves `vector_generation` on by one inside `tx`; returns the new value.
async fn bump_vector_generation(tx: &mut Transaction<'_, Sqlite>) -> Result<i64> {
    let after = vector_generation(&mut **tx).await? + 1;
    sqlx::query(
        "INSERT OR REPLACE INTO memory_metadata (key, value) VALUES ('vector_generation', ?)",
    )
    .bind(after.to_string())
    .execute(&mut **tx)
    .await?;
    Ok(after)
}

impl MemoryStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    ///
    /// # Errors
    /// The file cannot be opened or migrated.
    pub async fn open(path: &Path, options: &StoreOptions) -> Result<Self> {
        register_sqlite_vec();
        let synchronous = SqliteSynchronous::from_str(&options.synchronous).map_err(|_| {
            MemoryError::Invalid(format!(
                "synchronous must be off, normal, full or extra, not `{}`",
                options.synchronous
            ))
        })?;
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(true)
            // Checkpoints run in the background (see `checkpoint_loop`), never in a writer's
            // commit, where they made one insert in a few hundred take ten times as long.
            .pragma("wal_autocheckpoint", "0")
            // A restarted log is trimmed to this size (bytes) instead of keeping its peak.
            .pragma(
                "journal_size_limit",
                (options.wal_truncate_frames.max(1) * 4096).to_string(),
            )
            // 32 MB of page cache per connection (SQLite's default is 2 MB): at 100k memories
            // the FTS and index pages a search reads then stay in the process.
            .pragma("cache_size", "-32768")
            // A removed memory's text is overwritten in the file, not left in a free page.
            .pragma("secure_delete", "on");
        // Two processes opening a fresh store at once would both switch it to WAL and both
        // run the same migrations (SQLite has no migration lock): one of them failed with
        // "table memories already exists" or "database is locked". Opening holds an exclusive
        // lock on a file beside the database until the schema is current.
        let _opening = lock_for_opening(path).await?;
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .after_release(|connection, _| Box::pin(leaves_no_open_transaction(connection)))
            .connect_with(connect)
            .await?;
        // SQLite opens a file it may not write read-only, without an error; every write would
        // then fail later. Refuse now, before anything runs against it.
        if opened_read_only(&pool).await? {
            pool.close().await;
            return Err(MemoryError::ReadOnly);
        }
        if let Err(error) = sqlx::migrate!("./migrations").run(&pool).await {
            pool.close().await;
            return Err(error.into());
        }
        drop(_opening);
        let write_lock = Arc::new(tokio::sync::Mutex::new(()));
        Ok(Self {
            checkpointer: tokio::spawn(checkpoint_loop(
                pool.clone(),
                Arc::clone(&write_lock),
                options.busy_timeout,
                options.wal_truncate_frames.max(1),
            )),
            write_lock,
            vector: RwLock::new(VectorStatus::Disabled {
                reason: "no embedding provider".to_owned(),
            }),
            mirror: RwLock::new(QuantizedIndex::default()),
            reload_lock: tokio::sync::Mutex::new(()),
            vector_oversample: options.vector_oversample,
            stats: std::sync::Mutex::new(TermStats::default()),
            pool,
        })
    }

    /// Starts a write transaction that holds SQLite's write lock from its first statement
    /// (`BEGIN IMMEDIATE`). A deferred transaction that reads first and writes later cannot wait
    /// for the lock: when another process committed since its read, SQLite answers BUSY at once
    /// (`SQLITE_BUSY_SNAPSHOT`), whatever `busy_timeout` says. Taking the lock at `BEGIN` makes
    /// every writer, in this process or another, wait its turn for up to `busy_timeout`.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Waits for the writer in progress, empties the write-ahead log into the database file
    /// and closes the pool, waiting for connections to finish. The next open then finds a
    /// short log, whatever was written before.
    pub async fn close(&self) {
        self.checkpointer.abort();
        let _write = self.write_lock.lock().await;
        match checkpoint(&self.pool, "TRUNCATE").await {
            Ok((false, _)) => {}
            Ok((true, log_frames)) => {
                tracing::info!(
                    log_frames,
                    "readers kept the wal at close; the next open checkpoints it"
                );
            }
            Err(error) => {
                tracing::warn!(%error, "closing checkpoint failed; the next open recovers the log");
            }
        }
        self.pool.close().await;
    }

    /// Checks the database file, the full-text index against `memories`, and the vector index
    /// and indexer queue against the active memories. Holds the write lock (the FTS5 check is
    /// a write statement that changes nothing), so writers wait for it: seconds at 100k
    /// memories.
    ///
    /// # Errors
    /// The database cannot be read at all.
    pub async fn check_integrity(&self) -> Result<IntegrityReport> {
        let _write = self.write_lock.lock().await;
        let mut connection = self.pool.acquire().await?;
        // With rank 1, FTS5 also compares the index with the content table. It runs first: it
        // reloads the connection's cached index structure, which `PRAGMA integrity_check` does
        // not, and which is stale on this connection when another one merged the index (as a
        // purge does): the pragma then reports a sound index as malformed.
        let full_text = sqlx::query(
            "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)",
        )
        .execute(&mut *connection)
        .await
        .err()
        .map(|error| error.to_string());
        let database: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_all(&mut *connection)
            .await?
            .into_iter()
            .filter(|finding: &String| finding != "ok")
            .collect();
        let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
        let memories = count("SELECT COUNT(*) FROM memories")
            .fetch_one(&mut *connection)
            .await?;
        let active = count("SELECT COUNT(*) FROM memories WHERE valid_until IS NULL")
            .fetch_one(&mut *connection)
            .await?;
        let has_vectors = self.vector_table_exists(&mut connection).await?;
        let queued = count(
            "SELECT COUNT(*) FROM embedding_queue q JOIN memories m ON m.id = q.memory_id \
             WHERE m.valid_until IS NULL",
        )
        .fetch_one(&mut *connection)
        .await?;
        let (vectors, orphan_vectors, unindexed) = if has_vectors {
            let vectors = count("SELECT COUNT(*) FROM vec_memories")
                .fetch_one(&mut *connection)
                .await?;
            let orphans = count(
                "SELECT COUNT(*) FROM vec_memories v WHERE NOT EXISTS \
                 (SELECT 1 FROM memories m WHERE m.id = v.memory_id AND m.valid_until IS NULL)",
            )
            .fetch_one(&mut *connection)
            .await?;
            let unindexed = count(
                "SELECT COUNT(*) FROM memories m WHERE m.valid_until IS NULL \
                 AND NOT EXISTS (SELECT 1 FROM vec_memories v WHERE v.memory_id = m.id) \
                 AND NOT EXISTS (SELECT 1 FROM embedding_queue q WHERE q.memory_id = m.id)",
            )
            .fetch_one(&mut *connection)
            .await?;
            (Some(vectors), orphans, unindexed)
        } else {
            (None, 0, 0)
        };
        let forgotten_events = count(
            "SELECT COUNT(*) FROM ingested_events e WHERE NOT EXISTS \
             (SELECT 1 FROM memories m WHERE m.id = e.memory_id)",
        )
        .fetch_one(&mut *connection)
        .await?;
        Ok(IntegrityReport {
            database,
            full_text,
            memories,
            active,
            vectors,
            orphan_vectors,
            unindexed,
            queued,
            forgotten_events,
        })
    }

    /// The current vector status.
    pub fn vector_status(&self) -> VectorStatus {
        self.vector
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn set_vector_status(&self, status: VectorStatus) {
        *self
            .vector
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = status;
    }

    async fn metadata(&self, key: &str) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT value FROM memory_metadata WHERE key = ?")
                .bind(key)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Creates `vec_memories` for `dimensions` on first use, or checks that the existing table
    /// matches the provider. A mismatch turns vector search off; nothing is deleted.
    ///
    /// # Errors
    /// The database fails.
    pub async fn ensure_vector_index(
        &self,
        dimensions: usize,
        model_id: &str,
    ) -> Result<VectorStatus> {
        let _write = self.write_lock.lock().await;
        let stored_dimensions = self.metadata("embedding_dimensions").await?;
        let stored_model = self.metadata("embedding_model").await?;
        let status = match (stored_dimensions, stored_model) {
            (None, _) => {
                let mut tx = self.begin_write().await?;
                sqlx::query(&create_vector_table(dimensions))
                    .execute(&mut *tx)
                    .await?;
                for (key, value) in [
                    ("embedding_dimensions", dimensions.to_string()),
                    ("embedding_model", model_id.to_owned()),
                ] {
                    sqlx::query(
                        "INSERT OR REPLACE INTO memory_metadata (key, value) VALUES (?, ?)",
                    )
                    .bind(key)
                    .bind(value)
                    .execute(&mut *tx)
                    .await?;
                }
                bump_vector_generation(&mut tx).await?;
                tx.commit().await?;
                self.mirror_mut().invalidate();
                VectorStatus::Enabled {
                    dimensions,
                    model_id: model_id.to_owned(),
                }
            }
            (Some(stored), model) => {
                let stored_dims: usize = stored.parse().unwrap_or(0);
                let model = model.unwrap_or_default();
                if stored_dims == dimensions && model == model_id {
                    VectorStatus::Enabled {
                        dimensions,
                        model_id: model_id.to_owned(),
                    }
                } else {
                    VectorStatus::Disabled {
                        reason: format!(
                            "vec_memories holds {stored_dims}-dimension vectors of `{model}`, but the \
                             embedding provider gives {dimensions}-dimension vectors of `{model_id}`; \
                             vector search is off and search uses FTS5 + entities. Nothing is lost: \
                             run `mnemo reindex` to rebuild the vector index for the new model"
                        ),
                    }
                }
            }
        };
        self.set_vector_status(status.clone());
        Ok(status)
    }

    /// Rebuilds `vec_memories` for a new provider: drops the old vectors, creates the table for
    /// `dimensions`, records the provider, and queues every active memory for the indexer, in
    /// one transaction. Memories themselves are untouched.
    ///
    /// # Errors
    /// The database fails; nothing changes then.
    pub async fn reset_vector_index(&self, dimensions: usize, model_id: &str) -> Result<u64> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        sqlx::query("DROP TABLE IF EXISTS vec_memories")
            .execute(&mut *tx)
            .await?;
        sqlx::query(&create_vector_table(dimensions))
            .execute(&mut *tx)
            .await?;
        for (key, value) in [
            ("embedding_dimensions", dimensions.to_string()),
            ("embedding_model", model_id.to_owned()),
        ] {
            sqlx::query("INSERT OR REPLACE INTO memory_metadata (key, value) VALUES (?, ?)")
                .bind(key)
                .bind(value)
                .execute(&mut *tx)
                .await?;
        }
        let queued = sqlx::query(
            "INSERT OR IGNORE INTO embedding_queue (memory_id, enqueued_at) \
             SELECT id, created_at FROM memories WHERE valid_until IS NULL",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        bump_vector_generation(&mut tx).await?;
        tx.commit().await?;
        self.mirror_mut().invalidate();
        self.set_vector_status(VectorStatus::Enabled {
            dimensions,
            model_id: model_id.to_owned(),
        });
        Ok(queued)
    }

    /// Inserts a memory, queues it for a vector, and links its entities, in one transaction.
    ///
    /// # Errors
    /// The database fails; nothing is written then.
    pub async fn insert_memory(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let id = insert_in_tx(&mut tx, memory, entities).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Stores a conversation turn on the hot path, in one transaction (one fsync): the memory
    /// with its entity links and index-queue row; the event id, so that a replayed event is
    /// stored once (`None` memory id then); and, with `record_session`, the session's
    /// consolidation row (`new_session` is true when this turn opened it, and the user's other
    /// open sessions are closed then).
    ///
    /// # Errors
    /// The database fails; nothing is written then.
    pub async fn insert_turn(
        &self,
        memory: &NewMemory,
        entities: &[ExtractedEntity],
        event_id: Option<&str>,
        record_session: bool,
    ) -> Result<StoredTurn> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        if let Some(event_id) = event_id {
            let known: Option<String> =
                sqlx::query_scalar("SELECT memory_id FROM ingested_events WHERE event_id = ?")
                    .bind(event_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            if known.is_some() {
                return Ok(StoredTurn::default());
            }
        }
        let mut new_session = false;
        let mut closed_sessions = Vec::new();
        if let (true, Some(session)) = (record_session, memory.session_key()) {
            new_session = sqlx::query(
                "INSERT OR IGNORE INTO sessions_consolidations \
                 (user_id, chat_id, session_id, first_seen_at) VALUES (?, ?, ?, ?)",
            )
            .bind(&session.user_id)
            .bind(chat_key(session.chat_id.as_deref()))
            .bind(&session.session_id)
            .bind(ts(memory.event_time))
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if new_session {
                closed_sessions = close_other_sessions(&mut tx, &session, memory.created_at)
                    .await?
                    .into_iter()
                    .map(|session_id| SessionKey {
                        session_id,
                        ..session.clone()
                    })
                    .collect();
            } else {
                // A turn after the session was consolidated makes it pending again: the next
                // consolidation reads the episodes it has not read yet.
                sqlx::query(
                    "UPDATE sessions_consolidations SET consolidated_at = NULL, attempts = 0 \
                     WHERE user_id = ? AND chat_id = ? AND session_id = ? \
                     AND consolidated_at IS NOT NULL",
                )
                .bind(&session.user_id)
                .bind(chat_key(session.chat_id.as_deref()))
                .bind(&session.session_id)
                .execute(&mut *tx)
                .await?;
            }
        }
        let id = insert_in_tx(&mut tx, memory, entities).await?;
        if let Some(event_id) = event_id {
            sqlx::query("INSERT INTO ingested_events (event_id, memory_id) VALUES (?, ?)")
                .bind(event_id)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(StoredTurn {
            memory_id: Some(id),
            new_session,
            closed_sessions,
        })
    }

    /// Links more entities to an existing memory; returns how many links it now has.
    ///
    /// # Errors
    /// The memory does not exist, or the database fails.
    pub async fn add_entities(
        &self,
        memory_id: &str,
        entities: &[ExtractedEntity],
        enriched_at: Option<DateTime<Utc>>,
    ) -> Result<usize> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let owner: Option<Option<String>> =
            sqlx::query_scalar("SELECT user_id FROM memories WHERE id = ?")
                .bind(memory_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(owner) = owner else {
            return Err(MemoryError::NotFound(format!("no memory `{memory_id}`")));
        };
        let count = link_entities(
            &mut tx,
            memory_id,
            &owner.unwrap_or_default(),
            entities,
            None,
        )
        .await?;
        if let Some(at) = enriched_at {
            sqlx::query(
                "UPDATE memories SET attributes = json_set(attributes, '$.enriched_at', ?) WHERE id = ?",
            )
            .bind(ts(at))
            .bind(memory_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(count)
    }

    /// One memory by id, active or not.
    ///
    /// # Errors
    /// The database fails.
    pub async fn get(&self, id: &str) -> Result<Option<Memory>> {
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(memory_from_row).transpose()
    }

    /// Memories by id that pass the request's filters, keyed by id.
    ///
    /// # Errors
    /// The database fails.
    pub async fn load_filtered(
        &self,
        ids: &[String],
        request: &SearchRequest,
    ) -> Result<HashMap<String, Memory>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut builder = QueryBuilder::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ("
        ));
        let mut separated = builder.separated(", ");
        for id in ids {
            separated.push_bind(id.clone());
        }
        builder.push(")");
        push_filters(&mut builder, request);
        let rows = builder.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| memory_from_row(row).map(|memory| (memory.id.clone(), memory)))
            .collect()
    }

    /// Which of `ids` pass the request's filters, with what ranking needs and without reading
    /// their text: confidence, event time and, with `neighbours`, an episode's previous and
    /// next turn in its session.
    ///
    /// # Errors
    /// The database fails.
    pub async fn rank_keys(
        &self,
        ids: &[String],
        request: &SearchRequest,
        neighbours: bool,
    ) -> Result<HashMap<String, RankKey>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut builder = QueryBuilder::new("SELECT m.id, m.confidence, m.event_time, ");
        if neighbours {
            // The session index finds each turn's neighbours in the same user's session (`+kind`
            // and `+chat_id` keep SQLite on it).
            builder.push(
                "CASE WHEN m.kind = 'episode' AND m.session_id IS NOT NULL THEN \
                 (SELECT p.id FROM memories p WHERE p.session_id = m.session_id \
                  AND p.user_id = m.user_id AND +p.chat_id IS m.chat_id AND +p.kind = 'episode' AND (p.event_time < m.event_time \
                  OR (p.event_time = m.event_time AND p.rowid < m.rowid)) \
                  ORDER BY p.event_time DESC, p.rowid DESC LIMIT 1) END, \
                 CASE WHEN m.kind = 'episode' AND m.session_id IS NOT NULL THEN \
                 (SELECT n.id FROM memories n WHERE n.session_id = m.session_id \
                  AND n.user_id = m.user_id AND +n.chat_id IS m.chat_id AND +n.kind = 'episode' AND (n.event_time > m.event_time \
                  OR (n.event_time = m.event_time AND n.rowid > m.rowid)) \
                  ORDER BY n.event_time, n.rowid LIMIT 1) END",
            );
        } else {
            builder.push("NULL, NULL");
        }
        builder.push(" FROM memories m WHERE m.id IN (");
        let mut separated = builder.separated(", ");
        for id in ids {
            separated.push_bind(id.clone());
        }
        builder.push(")");
        push_filters(&mut builder, request);
        type Row = (String, f64, i64, Option<String>, Option<String>);
        Ok(builder
            .build_query_as::<Row>()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|(id, confidence, event_time, previous, next)| {
                (
                    id,
                    RankKey {
                        confidence,
                        event_time,
                        previous,
                        next,
                    },
                )
            })
            .collect())
    }

    /// Ids ranked by BM25 for `request.query`, best first, each with its BM25 relevance
    /// (FTS5's `bm25()` negated, so higher is better and every match is above 0).
    ///
    /// Ranking costs about a microsecond per matching memory, so when the query's words
    /// match more than twice [`RANK_BUDGET`] memories, a first pass ranks only the memories
    /// that have a rare word (in at most `RANK_BUDGET` memories) or all the common words
    /// together: a memory with a single common word has the least BM25 weight anyway. Only if
    /// that finds fewer than `limit` does the plain "any word" query run.
    ///
    /// FTS5 ranks its best matches before the request's filters join `memories`; only when too
    /// few pass are all matches ranked with the filters.
    ///
    /// # Errors
    /// The database fails (a user's query text never causes one: it is quoted term by term).
    pub async fn search_fts(
        &self,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let terms = query_terms(&request.query);
        let Some(any_word) = match_any(&terms) else {
            return Ok(Vec::new());
        };
        if terms.len() > 1 && self.document_count().await? > RANK_BUDGET {
            let mut rare = Vec::new();
            let mut common = Vec::new();
            let mut matches = 0;
            for term in &terms {
                let frequency = self.term_frequency(term).await?;
                matches += frequency;
                if frequency <= RANK_BUDGET {
                    rare.push(term.clone());
                } else {
                    common.push(term.clone());
                }
            }
            if matches > 2 * RANK_BUDGET {
                if let Some(narrow) = match_rare_or_all_common(&rare, &common) {
                    let ids = self.ranked_fts(&narrow, request, limit).await?;
                    if ids.len() >= limit {
                        return Ok(ids);
                    }
                }
            }
        }
        let ids = self.ranked_fts(&any_word, request, limit).await?;
        if ids.len() >= limit {
            return Ok(ids);
        }
        let mut builder = QueryBuilder::new(
            "SELECT m.id, -bm25(memories_fts) FROM memories_fts CROSS JOIN memories m \
             ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ",
        );
        builder.push_bind(any_word);
        push_filters(&mut builder, request);
        builder
            .push(" ORDER BY bm25(memories_fts), m.event_time DESC LIMIT ")
            .push_bind(limit as i64);
        Ok(builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?)
    }

    /// The FTS5 query's best matches (a few times `limit`), then the request's filters.
    async fn ranked_fts(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let depth = (limit * 4).max(64);
        let mut builder = QueryBuilder::new(
            "SELECT m.id, -best.score FROM (SELECT rowid AS fts_row, bm25(memories_fts) AS score \
             FROM memories_fts WHERE memories_fts MATCH ",
        );
        builder.push_bind(query.to_owned());
        builder
            .push(" ORDER BY score LIMIT ")
            .push_bind(depth as i64);
        builder.push(") best CROSS JOIN memories m ON m.rowid = best.fts_row WHERE 1 = 1");
        push_filters(&mut builder, request);
        builder
            .push(" ORDER BY best.score, m.event_time DESC LIMIT ")
            .push_bind(limit as i64);
        Ok(builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?)
    }

    fn cached_stats(&self) -> std::sync::MutexGuard<'_, TermStats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rows in the full-text index (cached).
    async fn document_count(&self) -> Result<i64> {
        if let Some(count) = fresh(self.cached_stats().documents.as_ref()) {
            return Ok(count);
        }
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories_fts")
            .fetch_one(&self.pool)
            .await?;
        self.cached_stats().documents = Some((count, std::time::Instant::now()));
        Ok(count)
    }

    /// Memories whose text contains `term` (cached).
    async fn term_frequency(&self, term: &str) -> Result<i64> {
        if let Some(count) = fresh(self.cached_stats().frequencies.get(term)) {
            return Ok(count);
        }
        let Some(query) = match_any(&[term.to_owned()]) else {
            return Ok(0);
        };
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?")
                .bind(query)
                .fetch_one(&self.pool)
                .await?;
        let mut stats = self.cached_stats();
        if stats.frequencies.len() >= STATS_MAX_TERMS {
            stats.frequencies.clear();
        }
        stats
            .frequencies
            .insert(term.to_owned(), (count, std::time::Instant::now()));
        Ok(count)
    }

    /// Ids nearest to `vector`, best first, each with its cosine similarity, after the request's
    /// filters, leaving out neighbours whose cosine similarity is below `min_similarity`. Uses
    /// the quantised mirror unless `vector_oversample` is 0, then `vec_memories` by brute force.
    ///
    /// # Errors
    /// The database fails.
    pub async fn search_vector(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>> {
        if !matches!(self.vector_status(), VectorStatus::Enabled { .. }) {
            return Ok(Vec::new());
        }
        // Filter by owner (and a single kind) inside the KNN, the rest afterwards; ask for extra
        // neighbours so that post-filtering still leaves `limit`. In a chat, other users'
        // shared memories qualify too: the owner is then checked after.
        let k = (limit * 3).clamp(limit, 4096);
        let owner = match (&request.user_id, &request.chat_id) {
            (Some(user_id), None) => Some(user_id.as_str()),
            _ => None,
        };
        let kind = match request.kinds.as_slice() {
            [kind] => Some(kind.as_str()),
            _ => None,
        };
        let nearest = if self.vector_oversample == 0 {
            self.nearest_exact(vector, owner, kind, k).await?
        } else {
            self.nearest_quantized(vector, owner, kind, k).await?
        };
        let nearest: Vec<(String, f32)> = nearest
            .into_iter()
            .filter(|(_, similarity)| *similarity >= min_similarity)
            .collect();
        let ids: Vec<String> = nearest.iter().map(|(id, _)| id.clone()).collect();
        let allowed = self.rank_keys(&ids, request, false).await?;
        Ok(nearest
            .into_iter()
            .filter(|(id, _)| allowed.contains_key(id))
            .take(limit)
            .collect())
    }

    /// The `k` stored vectors nearest to `vector` with their cosine similarity, by brute force
    /// over `vec_memories` (vectors are unit length, so cosine = 1 - distance² / 2).
    ///
    /// # Errors
    /// The database fails.
    pub async fn nearest_exact(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        let mut builder = QueryBuilder::new(
            "SELECT memory_id, distance FROM vec_memories WHERE embedding MATCH ",
        );
        builder.push_bind(vector_blob(vector));
        builder.push(" AND k = ").push_bind(k as i64);
        if let Some(owner) = owner {
            builder.push(" AND user_id = ").push_bind(owner.to_owned());
        }
        if let Some(kind) = kind {
            builder.push(" AND kind = ").push_bind(kind.to_owned());
        }
        builder.push(" ORDER BY distance");
        Ok(builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|(id, distance)| (id, (1.0 - distance * distance / 2.0) as f32))
            .collect())
    }

    /// The `k` stored vectors nearest to `vector` with their (re-scored) cosine similarity,
    /// from the quantised mirror, reloading it first if `vec_memories` moved on.
    ///
    /// # Errors
    /// The database fails.
    pub async fn nearest_quantized(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        self.refresh_mirror().await?;
        let filter = VectorFilter {
            user_id: owner,
            kind,
        };
        Ok(self
            .mirror()
            .search(vector, filter, k, self.vector_oversample))
    }

    /// Rows and approximate heap bytes of the quantised mirror (loading it if needed).
    ///
    /// # Errors
    /// The database fails.
    pub async fn mirror_size(&self) -> Result<(usize, usize)> {
        self.refresh_mirror().await?;
        let mirror = self.mirror();
        Ok((mirror.len(), mirror.heap_bytes()))
    }

    fn mirror(&self) -> std::sync::RwLockReadGuard<'_, QuantizedIndex> {
        self.mirror.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn mirror_mut(&self) -> std::sync::RwLockWriteGuard<'_, QuantizedIndex> {
        self.mirror.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reloads the mirror from `vec_memories` when the stored generation is not the mirror's,
    /// reading both in one snapshot.
    async fn refresh_mirror(&self) -> Result<()> {
        let VectorStatus::Enabled { dimensions, .. } = self.vector_status() else {
            return Ok(());
        };
        let stored = vector_generation(&self.pool).await?;
        if self.mirror().generation() == Some(stored) {
            return Ok(());
        }
        let _reload = self.reload_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let stored = vector_generation(&mut *tx).await?;
        if self.mirror().generation() == Some(stored) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        // Streamed row by row: the mirror holds a fifth of the float vectors' size, and the
        // float vectors are never all in memory at once.
        let mut fresh = QuantizedIndex::empty(dimensions);
        {
            let mut rows =
                sqlx::query("SELECT memory_id, embedding, user_id, kind FROM vec_memories")
                    .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                fresh.push(VectorRow {
                    memory_id: row.try_get("memory_id")?,
                    vector: blob_vector(&row.try_get::<Vec<u8>, _>("embedding")?),
                    user_id: row.try_get("user_id")?,
                    kind: row.try_get("kind")?,
                });
            }
        }
        tx.commit().await?;
        let count = fresh.len();
        *self.mirror_mut() = fresh.loaded_at(stored);
        tracing::debug!(
            rows = count,
            generation = stored,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "vector mirror loaded"
        );
        Ok(())
    }

    /// Memories linked to entities named (canonically or by alias) by any of `names`, with how
    /// many of those entities each is linked to: memories linked to several first, then the
    /// most recently linked mentions of each entity.
    ///
    /// Only the newest links are read (a few times `limit` per entity, through the link
    /// index), so the cost does not grow with how often an entity was mentioned.
    ///
    /// # Errors
    /// The database fails.
    pub async fn search_entities(
        &self,
        request: &SearchRequest,
        names: &[String],
        limit: usize,
    ) -> Result<Vec<(String, i64)>> {
        let entity_ids = self
            .entities_named(request.user_id.as_deref(), names)
            .await?;
        let entity_ids = self.specific_entities(entity_ids).await?;
        if entity_ids.is_empty() {
            return Ok(Vec::new());
        }
        let depth = (limit * 2).max(20) as i64;
        // (memory, entities matched, newest link)
        let mut candidates: HashMap<String, (i64, i64)> = HashMap::new();
        // Co-mentions: each entity but the last (rarest first) walks its newest links and counts
        // the later entities each linked memory names too. A memory's rarest entity finds it
        // with the full count; the walk stops after `limit` co-mentions (they fill the list) or
        // CO_MENTION_SCAN links, so its cost does not grow with the store.
        for (index, driver) in entity_ids.iter().enumerate() {
            let others = &entity_ids[index + 1..];
            if others.is_empty() {
                break;
            }
            let push_others = |builder: &mut QueryBuilder<'_, Sqlite>| {
                let mut separated = builder.separated(", ");
                for other in others {
                    separated.push_bind(other.clone());
                }
            };
            let mut builder = QueryBuilder::new(
                "SELECT a.memory_id, a.rowid, 1 + (SELECT COUNT(*) FROM memory_entities b \
                 WHERE b.memory_id = a.memory_id AND b.entity_id IN (",
            );
            push_others(&mut builder);
            builder
                .push(")) FROM memory_entities a WHERE a.entity_id = ")
                .push_bind(driver.clone())
                .push(
                    " AND a.rowid >= COALESCE((SELECT rowid FROM memory_entities \
                     WHERE entity_id = ",
                )
                .push_bind(driver.clone())
                .push(" ORDER BY rowid DESC LIMIT 1 OFFSET ")
                .push_bind(CO_MENTION_SCAN - 1)
                .push(
                    "), 0) AND EXISTS (SELECT 1 FROM memory_entities c \
                     WHERE c.memory_id = a.memory_id AND c.entity_id IN (",
                );
            push_others(&mut builder);
            builder
                .push(")) ORDER BY a.rowid DESC LIMIT ")
                .push_bind(limit as i64);
            for (memory_id, link, matched) in builder
                .build_query_as::<(String, i64, i64)>()
                .fetch_all(&self.pool)
                .await?
            {
                let entry = candidates.entry(memory_id).or_insert((matched, link));
                entry.0 = entry.0.max(matched);
            }
        }
        for entity_id in &entity_ids {
            let newest: Vec<(String, i64)> = sqlx::query_as(
                "SELECT memory_id, rowid FROM memory_entities WHERE entity_id = ? \
                 ORDER BY rowid DESC LIMIT ?",
            )
            .bind(entity_id)
            .bind(depth)
            .fetch_all(&self.pool)
            .await?;
            for (memory_id, link) in newest {
                candidates.entry(memory_id).or_insert((1, link));
            }
        }
        let mut ranked: Vec<(String, (i64, i64))> = candidates.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let ids: Vec<String> = ranked.iter().map(|(id, _)| id.clone()).collect();
        let allowed = self.rank_keys(&ids, request, false).await?;
        Ok(ranked
            .into_iter()
            .filter(|(id, _)| allowed.contains_key(id))
            .map(|(id, (matched, _))| (id, matched))
            .take(limit)
            .collect())
    }

    /// Leaves out entities linked to so many memories that naming them says little (a speaker
    /// named in every turn): more than a fifth of the memories that have any entity, and more
    /// than 50. Like inverse document frequency, an entity matters when it is specific.
    /// Returns each kept entity once, the rarest first; link counts are cached.
    async fn specific_entities(&self, entity_ids: Vec<String>) -> Result<Vec<String>> {
        if entity_ids.is_empty() {
            return Ok(entity_ids);
        }
        let mut counts: HashMap<String, i64> = HashMap::new();
        let mut missing = Vec::new();
        {
            let stats = self.cached_stats();
            for id in &entity_ids {
                match fresh(stats.entity_links.get(id)) {
                    Some(count) => {
                        counts.insert(id.clone(), count);
                    }
                    None => missing.push(id.clone()),
                }
            }
        }
        if !missing.is_empty() {
            let mut builder = QueryBuilder::new(
                "SELECT entity_id, COUNT(*) FROM memory_entities WHERE entity_id IN (",
            );
            let mut separated = builder.separated(", ");
            for id in &missing {
                separated.push_bind(id.clone());
            }
            builder.push(") GROUP BY entity_id");
            let found: HashMap<String, i64> = builder
                .build_query_as::<(String, i64)>()
                .fetch_all(&self.pool)
                .await?
                .into_iter()
                .collect();
            let now = std::time::Instant::now();
            let mut stats = self.cached_stats();
            if stats.entity_links.len() >= STATS_MAX_TERMS {
                stats.entity_links.clear();
            }
            for id in missing {
                let count = found.get(&id).copied().unwrap_or(0);
                stats.entity_links.insert(id.clone(), (count, now));
                counts.insert(id, count);
            }
        }
        let limit = (self.linked_memory_count().await? / 5).max(50);
        let mut seen = std::collections::HashSet::new();
        let mut specific: Vec<String> = entity_ids
            .into_iter()
            .filter(|id| counts.get(id).copied().unwrap_or(0) <= limit)
            .filter(|id| seen.insert(id.clone()))
            .collect();
        specific.sort_by_key(|id| counts.get(id).copied().unwrap_or(0));
        Ok(specific)
    }

    /// Memories with at least one entity link (cached).
    async fn linked_memory_count(&self) -> Result<i64> {
        if let Some(count) = fresh(self.cached_stats().linked_memories.as_ref()) {
            return Ok(count);
        }
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(DISTINCT memory_id) FROM memory_entities")
                .fetch_one(&self.pool)
                .await?;
        self.cached_stats().linked_memories = Some((count, std::time::Instant::now()));
        Ok(count)
    }

    /// Entities of `owner` whose canonical name or an alias equals one of `names` (case-insensitive).
    async fn entities_named(&self, owner: Option<&str>, names: &[String]) -> Result<Vec<String>> {
        let names: Vec<String> = names
            .iter()
            .map(|name| name.trim().to_lowercase())
            .filter(|name| !name.is_empty())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut builder =
            QueryBuilder::new("SELECT e.id FROM entities e WHERE (lower(e.canonical_name) IN (");
        let mut separated = builder.separated(", ");
        for name in &names {
            separated.push_bind(name.clone());
        }
        builder.push(
            ") OR EXISTS (SELECT 1 FROM json_each(e.aliases) WHERE lower(json_each.value) IN (",
        );
        let mut separated = builder.separated(", ");
        for name in &names {
            separated.push_bind(name.clone());
        }
        builder.push(")))");
        if let Some(owner) = owner {
            builder
                .push(" AND e.owner_id = ")
                .push_bind(owner.to_owned());
        }
        Ok(builder
            .build_query_scalar::<String>()
            .fetch_all(&self.pool)
            .await?)
    }

    /// Counts the memories as accessed now.
    ///
    /// # Errors
    /// The database fails.
    pub async fn touch(&self, ids: &[String], at: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let _write = self.write_lock.lock().await;
        let mut builder = QueryBuilder::new(
            "UPDATE memories SET access_count = access_count + 1, last_accessed = ",
        );
        builder.push_bind(ts(at)).push(" WHERE id IN (");
        let mut separated = builder.separated(", ");
        for id in ids {
            separated.push_bind(id.clone());
        }
        builder.push(")");
        builder.build().execute(&self.pool).await?;
        Ok(())
    }

    /// Soft-deletes an active memory and drops its vector; returns false if it was not active.
    ///
    /// # Errors
    /// The database fails.
    pub async fn soft_delete(&self, id: &str, at: DateTime<Utc>) -> Result<bool> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let changed =
            sqlx::query("UPDATE memories SET valid_until = ? WHERE id = ? AND valid_until IS NULL")
                .bind(ts(at))
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if changed == 1 {
            self.drop_vector(&mut tx, id).await?;
        }
        tx.commit().await?;
        self.mirror_mut().remove_all(&[id.to_owned()]);
        Ok(changed == 1)
    }

    /// Removes memories for good, in one transaction: the rows (and through the trigger their
    /// full-text entries), their vectors, queue entries, entity links and the embedding cache's
    /// vectors of their texts. The event ids they were stored from stay recorded (ids, no
    /// content), so replaying the same events does not bring a forgotten memory back. Returns
    /// what was removed, for the `memory.forgotten` announcements; unknown ids are skipped.
    ///
    /// # Errors
    /// The database fails; nothing is removed then.
    pub async fn purge(&self, ids: &[String]) -> Result<Vec<MemoryForgotten>> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let (removed, generation) = self.purge_in_tx(&mut tx, ids).await?;
        tx.commit().await?;
        self.forget_in_mirror(ids, generation);
        Ok(removed)
    }

    async fn purge_in_tx(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        ids: &[String],
    ) -> Result<(Vec<MemoryForgotten>, Option<i64>)> {
        let vectors = self.vector_table_exists(tx).await?;
        let mut removed = Vec::new();
        for id in ids {
            let row = sqlx::query(
                "SELECT kind, content, user_id, chat_id, session_id FROM memories WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else { continue };
            let kind: String = row.try_get("kind")?;
            let content: String = row.try_get("content")?;
            for statement in [
                "DELETE FROM memory_entities WHERE memory_id = ?",
                "DELETE FROM embedding_queue WHERE memory_id = ?",
            ] {
                sqlx::query(statement).bind(id).execute(&mut **tx).await?;
            }
            if vectors {
                sqlx::query("DELETE FROM vec_memories WHERE memory_id = ?")
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            // Another memory with the same text only loses a cached vector: it is re-embedded
            // if it is ever indexed again.
            sqlx::query("DELETE FROM embedding_cache WHERE content_hash = ?")
                .bind(content_hash(&content))
                .execute(&mut **tx)
                .await?;
            sqlx::query("DELETE FROM memories WHERE id = ?")
                .bind(id)
                .execute(&mut **tx)
                .await?;
            removed.push(MemoryForgotten {
                memory_id: id.clone(),
                // A row of an unknown kind is removed all the same; it is announced as an episode.
                kind: MemoryKind::parse(&kind).unwrap_or(MemoryKind::Episode),
                content,
                user_id: row.try_get("user_id")?,
                chat_id: row.try_get("chat_id")?,
                session_id: row.try_get("session_id")?,
            });
        }
        let generation = if removed.is_empty() {
            None
        } else {
            after_removal(tx, vectors).await?
        };
        Ok((removed, generation))
    }

    /// Removes everything stored about `user_id`, in one transaction: every memory they own
    /// (active or soft-deleted, in any chat, as [`Self::purge`] does), the event ids they were
    /// stored from, their entities and people, and their sessions' consolidation records.
    /// Returns what was removed, for the `memory.user_erased` announcement.
    ///
    /// # Errors
    /// The database fails; nothing is removed then.
    pub async fn erase_user(&self, user_id: &str) -> Result<UserErased> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM memories WHERE user_id = ?")
            .bind(user_id)
            .fetch_all(&mut *tx)
            .await?;
        let session_ids: Vec<String> = sqlx::query_scalar(
            "SELECT session_id FROM memories WHERE user_id = ? AND session_id IS NOT NULL \
             UNION SELECT session_id FROM sessions_consolidations WHERE user_id = ? \
             ORDER BY 1",
        )
        .bind(user_id)
        .bind(user_id)
        .fetch_all(&mut *tx)
        .await?;
        // The cached vectors of the user's texts, by content hash.
        let contents: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT content FROM memories WHERE user_id = ?")
                .bind(user_id)
                .fetch_all(&mut *tx)
                .await?;
        let hashes: Vec<String> = contents.iter().map(|text| content_hash(text)).collect();
        for chunk in hashes.chunks(500) {
            let mut builder =
                QueryBuilder::new("DELETE FROM embedding_cache WHERE content_hash IN (");
            let mut separated = builder.separated(", ");
            for hash in chunk {
                separated.push_bind(hash);
            }
            separated.push_unseparated(")");
            builder.build().execute(&mut *tx).await?;
        }
        // Set-based, not a few statements per memory: a user with 100k memories is erased in
        // seconds rather than a minute of held writers.
        let mut statements = vec![
            "DELETE FROM ingested_events WHERE memory_id IN (SELECT id FROM memories WHERE user_id = ?1)",
            "DELETE FROM memory_entities WHERE memory_id IN (SELECT id FROM memories WHERE user_id = ?1)",
            "DELETE FROM embedding_queue WHERE memory_id IN (SELECT id FROM memories WHERE user_id = ?1)",
        ];
        let vectors = self.vector_table_exists(&mut tx).await?;
        if vectors {
            self.erase_vectors(&mut tx, user_id, ids.len()).await?;
        }
        statements.extend([
            "DELETE FROM memories WHERE user_id = ?1",
            "DELETE FROM memory_entities WHERE entity_id IN (SELECT id FROM entities WHERE owner_id = ?1)",
            "DELETE FROM entities WHERE owner_id = ?1",
            "DELETE FROM sessions_consolidations WHERE user_id = ?1",
        ]);
        for statement in statements {
            sqlx::query(statement)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        let removed = ids.len() as u64;
        let generation = if removed == 0 {
            None
        } else {
            after_removal(&mut tx, vectors).await?
        };
        tx.commit().await?;
        self.forget_in_mirror(&ids, generation);
        Ok(UserErased {
            user_id: user_id.to_owned(),
            session_ids,
            memories_removed: removed,
        })
    }

    /// After a committed removal: drops the rows from the in-memory mirror and, if the removal
    /// moved the vector generation (to `generation`, inside its transaction), moves the mirror
    /// along, so that the next search does not reload every vector (0.5 s per 100k). A mirror at
    /// any other generation is reloaded as usual.
    fn forget_in_mirror(&self, ids: &[String], generation: Option<i64>) {
        let mut mirror = self.mirror_mut();
        mirror.remove_all(ids);
        if let Some(after) = generation {
            mirror.apply(after - 1, after, Vec::new());
        }
        drop(mirror);
        *self.cached_stats() = TermStats::default();
    }

    /// Removes the vectors of `user_id`, who owns `theirs` memories. sqlite-vec deletes a row
    /// at about 0.4 ms (it rewrites the row's place in a 1.5 MB chunk), 40 s for a user with
    /// 100k memories; when the user owns at least half the memories, the table is rebuilt from
    /// the other users' vectors instead, which costs what is kept rather than what goes.
    async fn erase_vectors(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        user_id: &str,
        theirs: usize,
    ) -> Result<()> {
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories")
            .fetch_one(&mut **tx)
            .await?;
        let dimensions: Option<String> = sqlx::query_scalar(
            "SELECT value FROM memory_metadata WHERE key = 'embedding_dimensions'",
        )
        .fetch_optional(&mut **tx)
        .await?;
        let dimensions = dimensions.and_then(|value| value.parse::<usize>().ok());
        let Some(dimensions) = dimensions.filter(|_| theirs as i64 * 2 >= total) else {
            sqlx::query("DELETE FROM vec_memories WHERE user_id = ?")
                .bind(user_id)
                .execute(&mut **tx)
                .await?;
            return Ok(());
        };
        for statement in [
            "CREATE TEMP TABLE vec_kept AS SELECT memory_id, embedding, user_id, kind \
             FROM vec_memories WHERE user_id IS NOT ?1",
            "DROP TABLE vec_memories",
        ] {
            sqlx::query(statement)
                .bind(user_id)
                .execute(&mut **tx)
                .await?;
        }
        sqlx::query(&create_vector_table(dimensions))
            .execute(&mut **tx)
            .await?;
        for statement in [
            "INSERT INTO vec_memories (memory_id, embedding, user_id, kind) \
             SELECT memory_id, embedding, user_id, kind FROM vec_kept",
            "DROP TABLE temp.vec_kept",
        ] {
            sqlx::query(statement).execute(&mut **tx).await?;
        }
        Ok(())
    }

    async fn drop_vector(&self, tx: &mut Transaction<'_, Sqlite>, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM embedding_queue WHERE memory_id = ?")
            .bind(id)
            .execute(&mut **tx)
            .await?;
        if self.vector_table_exists(tx).await? {
            sqlx::query("DELETE FROM vec_memories WHERE memory_id = ?")
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    async fn vector_table_exists(&self, connection: &mut SqliteConnection) -> Result<bool> {
        let found: Option<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'vec_memories'",
        )
        .fetch_optional(connection)
        .await?;
        Ok(found.is_some())
    }

    /// Replaces an active fact in one transaction: soft-deletes `old_id` and inserts the
    /// correction with the old id in its provenance; returns the new id.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] if `old_id` is not an active fact of `user_id`.
    pub async fn correct(
        &self,
        old_id: &str,
        user_id: Option<&str>,
        replacement: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        let old = self.active_fact_of(old_id, user_id).await?;
        let mut replacement = replacement.clone();
        if !replacement.source_ids.contains(&old.id) {
            replacement.source_ids.push(old.id.clone());
        }
        replacement
            .attributes
            .insert("corrects".to_owned(), Value::String(old.id.clone()));
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        // Retire the old fact only if it is still active: a concurrent correction wins once.
        let retired =
            sqlx::query("UPDATE memories SET valid_until = ? WHERE id = ? AND valid_until IS NULL")
                .bind(ts(replacement.created_at))
                .bind(&old.id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if retired != 1 {
            return Err(MemoryError::NotFound(format!("no active fact `{old_id}`")));
        }
        self.drop_vector(&mut tx, &old.id).await?;
        let new_id = insert_in_tx(&mut tx, &replacement, entities).await?;
        tx.commit().await?;
        self.mirror_mut().remove_all(std::slice::from_ref(&old.id));
        Ok(new_id)
    }

    async fn active_fact_of(&self, id: &str, user_id: Option<&str>) -> Result<Memory> {
        match self.get(id).await? {
            Some(memory)
                if memory.kind == MemoryKind::Fact
                    && memory.valid_until.is_none()
                    && (user_id.is_none() || memory.user_id.as_deref() == user_id) =>
            {
                Ok(memory)
            }
            _ => Err(MemoryError::NotFound(format!("no active fact `{id}`"))),
        }
    }

    /// Protects a fact: decay rate 0, confidence 1.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] if it is not an active fact of `user_id`.
    pub async fn confirm(&self, id: &str, user_id: Option<&str>) -> Result<()> {
        self.active_fact_of(id, user_id).await?;
        let _write = self.write_lock.lock().await;
        sqlx::query("UPDATE memories SET decay_rate = 0.0, confidence = 1.0 WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Lowers the old fact's confidence to 0.3 and records `supersedes` on the new one.
    ///
    /// # Errors
    /// Either fact is missing.
    pub async fn resolve_conflict(&self, old_id: &str, new_id: &str) -> Result<()> {
        if self.get(old_id).await?.is_none() || self.get(new_id).await?.is_none() {
            return Err(MemoryError::NotFound(format!(
                "resolve_conflict needs both `{old_id}` and `{new_id}`"
            )));
        }
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE memories SET confidence = 0.3 WHERE id = ?")
            .bind(old_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE memories SET attributes = json_set(attributes, '$.supersedes', ?) WHERE id = ?",
        )
        .bind(old_id)
        .bind(new_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Sessions not consolidated yet, oldest first, except `exclude`; only `user_id`'s if given.
    ///
    /// # Errors
    /// The database fails.
    pub async fn pending_consolidations(
        &self,
        user_id: Option<&str>,
    ) -> Result<Vec<PendingSession>> {
        let mut builder = QueryBuilder::new(
            "SELECT user_id, chat_id, session_id, first_seen_at, attempts \
             FROM sessions_consolidations WHERE consolidated_at IS NULL",
        );
        if let Some(user_id) = user_id {
            builder
                .push(" AND user_id = ")
                .push_bind(user_id.to_owned());
        }
        builder.push(" ORDER BY first_seen_at, user_id, chat_id, session_id");
        let rows = builder.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                let chat_id: String = row.try_get("chat_id")?;
                Ok(PendingSession {
                    session: SessionKey {
                        user_id: row.try_get("user_id")?,
                        chat_id: (!chat_id.is_empty()).then_some(chat_id),
                        session_id: row.try_get("session_id")?,
                    },
                    first_seen_at: from_ts(row.try_get("first_seen_at")?),
                    attempts: row.try_get("attempts")?,
                })
            })
            .collect()
    }

    /// True once the session was consolidated.
    ///
    /// # Errors
    /// The database fails.
    pub async fn is_session_consolidated(&self, session: &SessionKey) -> Result<bool> {
        let at: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT consolidated_at FROM sessions_consolidations \
             WHERE user_id = ? AND chat_id = ? AND session_id = ?",
        )
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(matches!(at, Some(Some(_))))
    }

    /// Records that the consolidation of `session` read `episode_ids`, in one transaction: they
    /// are marked, and the session counts as consolidated unless a user turn it has not read
    /// arrived meanwhile (then it stays pending for the next run).
    ///
    /// # Errors
    /// The database fails; nothing is marked then.
    pub async fn mark_session_consolidated(
        &self,
        session: &SessionKey,
        episode_ids: &[String],
        at: DateTime<Utc>,
    ) -> Result<()> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        for chunk in episode_ids.chunks(500) {
            let mut builder = QueryBuilder::new("UPDATE memories SET consolidated_at = ");
            builder.push_bind(ts(at)).push(" WHERE id IN (");
            let mut separated = builder.separated(", ");
            for id in chunk {
                separated.push_bind(id.clone());
            }
            builder.push(")");
            builder.build().execute(&mut *tx).await?;
        }
        let unread: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM memories m WHERE m.session_id = ? AND m.user_id = ? \
             AND m.chat_id IS ? AND m.kind = 'episode' AND m.valid_until IS NULL \
             AND m.consolidated_at IS NULL AND m.source_role = 'user')",
        )
        .bind(&session.session_id)
        .bind(&session.user_id)
        .bind(&session.chat_id)
        .fetch_one(&mut *tx)
        .await?;
        let consolidated_at = (!unread).then(|| ts(at));
        sqlx::query(
            "INSERT INTO sessions_consolidations \
             (user_id, chat_id, session_id, first_seen_at, consolidated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT(user_id, chat_id, session_id) DO UPDATE SET consolidated_at = ?5, \
             attempts = CASE WHEN ?5 IS NULL THEN attempts ELSE 0 END",
        )
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .bind(ts(at))
        .bind(consolidated_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Counts a failed entity enrichment of a memory (`enrichment_attempts` in its attributes).
    ///
    /// # Errors
    /// The database fails.
    pub async fn record_enrichment_failure(&self, memory_id: &str) -> Result<()> {
        let _write = self.write_lock.lock().await;
        sqlx::query(
            "UPDATE memories SET attributes = json_set(attributes, '$.enrichment_attempts', \
             COALESCE(json_extract(attributes, '$.enrichment_attempts'), 0) + 1) WHERE id = ?",
        )
        .bind(memory_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Gives every session and memory whose jobs gave up after repeated failures (a model
    /// outage used up `max_consolidation_attempts` or the enrichment attempts) a fresh start;
    /// returns how many sessions and memories that was.
    ///
    /// # Errors
    /// The database fails; nothing is changed then.
    pub async fn reset_failed_attempts(&self) -> Result<(u64, u64)> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let sessions = sqlx::query(
            "UPDATE sessions_consolidations SET attempts = 0 \
             WHERE consolidated_at IS NULL AND attempts > 0",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let memories = sqlx::query(
            "UPDATE memories SET attributes = json_remove(attributes, '$.enrichment_attempts') \
             WHERE json_extract(attributes, '$.enrichment_attempts') IS NOT NULL",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok((sessions, memories))
    }

    /// Records a failed consolidation attempt; returns the number of attempts so far.
    ///
    /// # Errors
    /// The database fails.
    pub async fn record_consolidation_failure(
        &self,
        session: &SessionKey,
        error: &str,
    ) -> Result<i64> {
        let _write = self.write_lock.lock().await;
        let attempts: Option<i64> = sqlx::query_scalar(
            "UPDATE sessions_consolidations SET attempts = attempts + 1, last_error = ? \
             WHERE user_id = ? AND chat_id = ? AND session_id = ? RETURNING attempts",
        )
        .bind(error)
        .bind(&session.user_id)
        .bind(chat_key(session.chat_id.as_deref()))
        .bind(&session.session_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(attempts.unwrap_or(0))
    }

    /// A page of the session's active episodes that no consolidation has read yet, oldest
    /// first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn episodes_for_session(
        &self,
        session: &SessionKey,
        offset: usize,
        limit: usize,
    ) -> Result<EpisodePage> {
        let rows = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.session_id = ? AND m.user_id = ? \
             AND m.chat_id IS ? AND m.kind = 'episode' AND m.valid_until IS NULL \
             AND m.consolidated_at IS NULL ORDER BY m.event_time, m.rowid LIMIT ? OFFSET ?"
        ))
        .bind(&session.session_id)
        .bind(&session.user_id)
        .bind(&session.chat_id)
        .bind(limit as i64 + 1)
        .bind(offset as i64)
        .fetch_all(&self.pool)
        .await?;
        let mut episodes = rows
            .iter()
            .map(memory_from_row)
            .collect::<Result<Vec<_>>>()?;
        let next_offset = (episodes.len() > limit).then_some(offset + limit);
        episodes.truncate(limit);
        Ok(EpisodePage {
            episodes,
            next_offset,
        })
    }

    /// Active facts visible in `session`'s scope (its user's, in its chat) sharing words with
    /// `content`, best BM25 first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn similar_facts(
        &self,
        session: &SessionKey,
        content: &str,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let request = SearchRequest {
            query: content.to_owned(),
            user_id: Some(session.user_id.clone()),
            chat_id: session.chat_id.clone(),
            kinds: vec![MemoryKind::Fact],
            limit,
            ..SearchRequest::default()
        };
        let ids: Vec<String> = self
            .search_fts(&request, limit)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let mut found = self.load_filtered(&ids, &request).await?;
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    /// Counts of active memories, entities and the index queue; only `user_id`'s if given.
    ///
    /// # Errors
    /// The database fails.
    pub async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats> {
        let mut builder = QueryBuilder::new(
            "SELECT m.kind, COUNT(*), MAX(m.event_time) FROM memories m \
             WHERE m.valid_until IS NULL AND m.superseded_at IS NULL",
        );
        if let Some(user_id) = user_id {
            builder
                .push(" AND m.user_id = ")
                .push_bind(user_id.to_owned());
        }
        builder.push(" GROUP BY m.kind");
        let rows = builder.build().fetch_all(&self.pool).await?;
        let mut stats = MemoryStats::default();
        for row in rows {
            let kind: String = row.try_get(0)?;
            let count: i64 = row.try_get(1)?;
            let latest: Option<i64> = row.try_get(2)?;
            match kind.as_str() {
                "episode" => stats.episodes = count,
                "fact" => stats.facts = count,
                "reflection" => stats.reflections = count,
                _ => {}
            }
            if let Some(latest) = latest.map(from_ts) {
                stats.latest = Some(stats.latest.map_or(latest, |known| known.max(latest)));
            }
        }
        let mut builder = QueryBuilder::new("SELECT COUNT(*) FROM entities e WHERE 1 = 1");
        if let Some(user_id) = user_id {
            builder
                .push(" AND e.owner_id = ")
                .push_bind(user_id.to_owned());
        }
        stats.entities = builder.build_query_scalar().fetch_one(&self.pool).await?;
        let mut builder = QueryBuilder::new("SELECT COUNT(*) FROM embedding_queue q");
        if let Some(user_id) = user_id {
            builder
                .push(" JOIN memories m ON m.id = q.memory_id WHERE m.user_id = ")
                .push_bind(user_id.to_owned());
        }
        stats.pending_index = builder.build_query_scalar().fetch_one(&self.pool).await?;
        Ok(stats)
    }

    /// An entity of `owner` by canonical name or alias, with its active memories (newest first).
    ///
    /// # Errors
    /// The database fails.
    pub async fn entity_info(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        name: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>> {
        let ids = self.entities_named(owner, &[name.to_owned()]).await?;
        let Some(id) = ids.first() else {
            return Ok(None);
        };
        self.entity_info_by_id(owner, chat_id, id, memory_limit)
            .await
    }

    /// An entity by id, with its active memories (newest first); `None` if there is none, or
    /// `owner` is given and it is not theirs.
    ///
    /// # Errors
    /// The database fails.
    pub async fn entity_info_by_id(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        id: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>> {
        let Some(row) = sqlx::query(
            "SELECT id, canonical_name, type, aliases, mention_count, summary FROM entities \
             WHERE id = ?1 AND (?2 IS NULL OR owner_id = ?2)",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let mut builder = QueryBuilder::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memory_entities me CROSS JOIN memories m ON m.id = me.memory_id \
             WHERE me.entity_id = "
        ));
        builder
            .push_bind(id.to_owned())
            .push(" AND m.valid_until IS NULL AND m.superseded_at IS NULL");
        push_scope(&mut builder, owner, chat_id);
        builder
            .push(" ORDER BY m.event_time DESC LIMIT ")
            .push_bind(memory_limit as i64);
        let memories = builder
            .build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(memory_from_row)
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(EntityInfo {
            id: row.try_get("id")?,
            name: row.try_get("canonical_name")?,
            entity_type: row.try_get("type")?,
            aliases: json_list(&row.try_get::<String, _>("aliases")?, "aliases")?,
            mention_count: row.try_get("mention_count")?,
            summary: row.try_get("summary")?,
            memories,
        }))
    }

    /// Ebbinghaus decay of active facts: confidence × exp(−rate × days since the later of the
    /// last access and the last decay), so no elapsed day is counted twice. Facts below
    /// `threshold` are soft-deleted and lose their vector and entity links. Protected facts
    /// (rate 0) are untouched.
    ///
    /// # Errors
    /// The database fails; the run is one transaction, so nothing is half-applied.
    pub async fn decay_and_prune(&self, threshold: f64, now: DateTime<Utc>) -> Result<DecayReport> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query(
            "SELECT id, confidence, decay_rate, created_at, last_accessed, decayed_at FROM memories \
             WHERE kind = 'fact' AND valid_until IS NULL AND decay_rate > 0",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut report = DecayReport::default();
        let mut pruned = Vec::new();
        let now_ts = ts(now);
        for row in rows {
            let id: String = row.try_get("id")?;
            let confidence: f64 = row.try_get("confidence")?;
            let rate: f64 = row.try_get("decay_rate")?;
            let created: i64 = row.try_get("created_at")?;
            let accessed: Option<i64> = row.try_get("last_accessed")?;
            let decayed: Option<i64> = row.try_get("decayed_at")?;
            let from = [Some(created), accessed, decayed]
                .into_iter()
                .flatten()
                .max()
                .unwrap_or(created);
            let days = (now_ts - from).max(0) as f64 / 86_400.0;
            if days <= 0.0 {
                continue;
            }
            let decayed_confidence = confidence * (-rate * days).exp();
            if decayed_confidence < threshold {
                sqlx::query("UPDATE memories SET confidence = ?, valid_until = ?, decayed_at = ? WHERE id = ?")
                    .bind(decayed_confidence)
                    .bind(now_ts)
                    .bind(now_ts)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM memory_entities WHERE memory_id = ?")
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                self.drop_vector(&mut tx, &id).await?;
                pruned.push(id);
                report.pruned += 1;
            } else {
                sqlx::query("UPDATE memories SET confidence = ?, decayed_at = ? WHERE id = ?")
                    .bind(decayed_confidence)
                    .bind(now_ts)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                report.decayed += 1;
            }
        }
        tx.commit().await?;
        self.mirror_mut().remove_all(&pruned);
        Ok(report)
    }

    /// Active memories of `kinds` not yet enriched and with at most `max_entities` entity links.
    ///
    /// # Errors
    /// The database fails.
    pub async fn memories_for_enrichment(
        &self,
        kinds: &[MemoryKind],
        max_entities: usize,
        max_attempts: i64,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let mut builder = QueryBuilder::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.valid_until IS NULL \
             AND json_extract(m.attributes, '$.enriched_at') IS NULL \
             AND COALESCE(json_extract(m.attributes, '$.enrichment_attempts'), 0) < "
        ));
        builder.push_bind(max_attempts);
        builder
            .push(" AND (SELECT COUNT(*) FROM memory_entities me WHERE me.memory_id = m.id) <= ");
        builder.push_bind(max_entities as i64);
        if !kinds.is_empty() {
            builder.push(" AND m.kind IN (");
            let mut separated = builder.separated(", ");
            for kind in kinds {
                separated.push_bind(kind.as_str());
            }
            builder.push(")");
        }
        builder
            .push(" ORDER BY m.event_time DESC LIMIT ")
            .push_bind(limit as i64);
        builder
            .build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(memory_from_row)
            .collect()
    }

    /// The newest active reflection for `user_id` (or one without an owner) in exactly the
    /// scope of `chat_id`: personal without it, that chat's with it.
    ///
    /// # Errors
    /// The database fails.
    pub async fn latest_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>> {
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.kind = 'reflection' AND m.valid_until IS NULL \
             AND (m.user_id IS ?1 OR m.user_id IS NULL) AND m.chat_id IS ?2 \
             ORDER BY m.event_time DESC, m.rowid DESC LIMIT 1"
        ))
        .bind(user_id)
        .bind(chat_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(memory_from_row).transpose()
    }

    /// Active, not superseded facts and episodes of `user_id` since `since`, newest first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn recent_memories(
        &self,
        user_id: Option<&str>,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let mut builder = QueryBuilder::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.valid_until IS NULL \
             AND m.superseded_at IS NULL AND m.kind IN ('fact', 'episode') AND m.event_time >= "
        ));
        builder.push_bind(ts(since));
        if let Some(user_id) = user_id {
            builder
                .push(" AND m.user_id = ")
                .push_bind(user_id.to_owned());
        }
        builder
            .push(" ORDER BY m.event_time DESC LIMIT ")
            .push_bind(limit as i64);
        builder
            .build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(memory_from_row)
            .collect()
    }

    /// The next memories waiting for a vector, oldest first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn next_index_batch(&self, limit: usize) -> Result<Vec<IndexItem>> {
        let rows = sqlx::query(
            "SELECT q.memory_id, m.content, m.user_id, m.kind, m.valid_until IS NULL AS active \
             FROM embedding_queue q JOIN memories m ON m.id = q.memory_id \
             ORDER BY q.enqueued_at, q.rowid LIMIT ?",
        )
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(IndexItem {
                    memory_id: row.try_get("memory_id")?,
                    content: row.try_get("content")?,
                    user_id: row
                        .try_get::<Option<String>, _>("user_id")?
                        .unwrap_or_default(),
                    kind: row.try_get("kind")?,
                    active: row.try_get("active")?,
                })
            })
            .collect()
    }

    /// Cached vectors of `model_id` by content hash.
    ///
    /// # Errors
    /// The database fails.
    pub async fn cached_vectors(
        &self,
        hashes: &[String],
        model_id: &str,
    ) -> Result<HashMap<String, Vec<f32>>> {
        if hashes.is_empty() {
            return Ok(HashMap::new());
        }
        let mut builder =
            QueryBuilder::new("SELECT content_hash, vector FROM embedding_cache WHERE model_id = ");
        builder
            .push_bind(model_id.to_owned())
            .push(" AND content_hash IN (");
        let mut separated = builder.separated(", ");
        for hash in hashes {
            separated.push_bind(hash.clone());
        }
        builder.push(")");
        let rows = builder.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                let blob: Vec<u8> = row.try_get("vector")?;
                Ok((row.try_get("content_hash")?, blob_vector(&blob)))
            })
            .collect()
    }

    /// Stores fresh vectors in the cache (by content hash).
    ///
    /// # Errors
    /// The database fails.
    pub async fn cache_vectors(
        &self,
        vectors: &[(String, Vec<f32>)],
        model_id: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        if vectors.is_empty() {
            return Ok(());
        }
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        for (hash, vector) in vectors {
            sqlx::query(
                "INSERT OR IGNORE INTO embedding_cache (content_hash, model_id, vector, created_at) VALUES (?, ?, ?, ?)",
            )
            .bind(hash)
            .bind(model_id)
            .bind(vector_blob(vector))
            .bind(ts(at))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Writes vectors to `vec_memories` and takes their memories off the queue, in one
    /// transaction. Items without a vector (deleted before indexing) only leave the queue.
    ///
    /// # Errors
    /// The database fails; the queue is unchanged then.
    pub async fn store_vectors(&self, items: &[(IndexItem, Option<Vec<f32>>)]) -> Result<()> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let mut rows = Vec::new();
        for (item, vector) in items {
            if let Some(vector) = vector {
                rows.push(VectorRow {
                    memory_id: item.memory_id.clone(),
                    user_id: item.user_id.clone(),
                    kind: item.kind.clone(),
                    vector: vector.clone(),
                });
                sqlx::query("DELETE FROM vec_memories WHERE memory_id = ?")
                    .bind(&item.memory_id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO vec_memories (memory_id, embedding, user_id, kind) VALUES (?, ?, ?, ?)",
                )
                .bind(&item.memory_id)
                .bind(vector_blob(vector))
                .bind(&item.user_id)
                .bind(&item.kind)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query("DELETE FROM embedding_queue WHERE memory_id = ?")
                .bind(&item.memory_id)
                .execute(&mut *tx)
                .await?;
        }
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(());
        }
        let after = bump_vector_generation(&mut tx).await?;
        tx.commit().await?;
        self.mirror_mut().apply(after - 1, after, rows);
        Ok(())
    }

    /// Memories waiting for a vector.
    ///
    /// # Errors
    /// The database fails.
    pub async fn pending_index(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM embedding_queue")
            .fetch_one(&self.pool)
            .await?)
    }

    /// The pool, for tests and benchmarks that check the database directly.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// Inserts a memory, queues it for a vector and links its entities, inside `tx`.
async fn insert_in_tx(
    tx: &mut Transaction<'_, Sqlite>,
    memory: &NewMemory,
    entities: &[ExtractedEntity],
) -> Result<String> {
    let id = new_id(memory.kind.prefix());
    sqlx::query(
        "INSERT INTO memories (id, kind, content, session_id, user_id, chat_id, event_time, \
         created_at, confidence, decay_rate, source_ids, source_role, tags, attributes, \
         memory_type, expires_at, shared, subject_ids) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&id)
    .bind(memory.kind.as_str())
    .bind(&memory.content)
    .bind(&memory.session_id)
    .bind(&memory.user_id)
    .bind(&memory.chat_id)
    .bind(ts(memory.event_time))
    .bind(ts(memory.created_at))
    .bind(memory.confidence)
    .bind(memory.decay_rate)
    .bind(Value::from(memory.source_ids.clone()).to_string())
    .bind(&memory.source_role)
    .bind(Value::from(memory.tags.clone()).to_string())
    .bind(Value::Object(memory.attributes.clone()).to_string())
    .bind(&memory.memory_type)
    .bind(memory.expires_at.map(ts))
    .bind(i64::from(memory.shared))
    .bind(Value::from(memory.subject_ids.clone()).to_string())
    .execute(&mut **tx)
    .await?;
    for subject in &memory.subject_ids {
        sqlx::query("INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)")
            .bind(&id)
            .bind(subject)
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query("INSERT INTO embedding_queue (memory_id, enqueued_at) VALUES (?, ?)")
        .bind(&id)
        .bind(ts(memory.created_at))
        .execute(&mut **tx)
        .await?;
    let owner = memory.user_id.clone().unwrap_or_default();
    link_entities(tx, &id, &owner, entities, Some(&memory.content)).await?;
    Ok(id)
}

/// Creates or finds each entity for `owner` and links it to the memory; returns the memory's link count.
async fn link_entities(
    tx: &mut Transaction<'_, Sqlite>,
    memory_id: &str,
    owner: &str,
    entities: &[ExtractedEntity],
    text: Option<&str>,
) -> Result<usize> {
    for entity in entities {
        let canonical = entity.canonical.trim();
        if canonical.is_empty() {
            continue;
        }
        let entity_type = entity.entity_type.as_str();
        let found: Option<(String, String)> = sqlx::query_as(
            "SELECT id, aliases FROM entities WHERE owner_id = ?1 AND type = ?2 AND \
             (canonical_name = ?3 COLLATE NOCASE OR EXISTS \
              (SELECT 1 FROM json_each(aliases) WHERE json_each.value = ?3 COLLATE NOCASE)) LIMIT 1",
        )
        .bind(owner)
        .bind(entity_type)
        .bind(canonical)
        .fetch_optional(&mut **tx)
        .await?;
        let entity_id = match found {
            Some((id, aliases)) => {
                let mut aliases = json_list(&aliases, "aliases")?;
                let surface = entity.surface.trim();
                if !surface.eq_ignore_ascii_case(canonical)
                    && !aliases
                        .iter()
                        .any(|alias| alias.eq_ignore_ascii_case(surface))
                {
                    aliases.push(surface.to_owned());
                }
                sqlx::query(
                    "UPDATE entities SET mention_count = mention_count + 1, aliases = ?, \
                     relation = COALESCE(relation, ?) WHERE id = ?",
                )
                .bind(Value::from(aliases).to_string())
                .bind(&entity.relation)
                .bind(&id)
                .execute(&mut **tx)
                .await?;
                id
            }
            None => {
                let id = new_id("ent");
                let surface = entity.surface.trim();
                let aliases: Vec<&str> = if surface.eq_ignore_ascii_case(canonical) {
                    Vec::new()
                } else {
                    vec![surface]
                };
                sqlx::query(
                    "INSERT INTO entities (id, owner_id, canonical_name, type, aliases, relation) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(&id)
                .bind(owner)
                .bind(canonical)
                .bind(entity_type)
                .bind(serde_json::to_string(&aliases).unwrap_or_else(|_| "[]".to_owned()))
                .bind(&entity.relation)
                .execute(&mut **tx)
                .await?;
                if LINKABLE_TYPES.contains(&entity_type) {
                    link_earlier_mentions(tx, &id, owner, canonical).await?;
                }
                id
            }
        };
        sqlx::query("INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)")
            .bind(memory_id)
            .bind(&entity_id)
            .execute(&mut **tx)
            .await?;
    }
    if let Some(text) = text {
        link_known_entities(tx, memory_id, owner, text).await?;
    }
    let linked: Vec<String> = sqlx::query_scalar(
        "SELECT entity_id FROM memory_entities WHERE memory_id = ? ORDER BY entity_id",
    )
    .bind(memory_id)
    .fetch_all(&mut **tx)
    .await?;
    sqlx::query("UPDATE memories SET entity_ids = ? WHERE id = ?")
        .bind(Value::from(linked.clone()).to_string())
        .bind(memory_id)
        .execute(&mut **tx)
        .await?;
    Ok(linked.len())
}

/// Entity types linked by name wherever they appear (not dates, e-mails or URLs).
const LINKABLE_TYPES: [&str; 4] = ["person", "organization", "location", "project"];

/// Most earlier memories linked to a newly created entity.
const MAX_EARLIER_MENTIONS: i64 = 500;

/// Links a new entity to the owner's earlier active memories that mention its name as a phrase,
/// so that "Sarah is vegetarian", said before Sarah became an entity, is found through her.
async fn link_earlier_mentions(
    tx: &mut Transaction<'_, Sqlite>,
    entity_id: &str,
    owner: &str,
    name: &str,
) -> Result<()> {
    let words = crate::fts::terms(name);
    if words.is_empty()
        || (words.len() == 1
            && (words[0].chars().count() < 3 || crate::fts::is_stopword(&words[0])))
    {
        return Ok(());
    }
    let phrase = format!("\"{}\"", words.join(" ").replace('"', "\"\""));
    let linked = sqlx::query(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) \
         SELECT m.id, ?1 FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid \
         WHERE memories_fts MATCH ?2 AND m.user_id IS ?3 AND m.valid_until IS NULL LIMIT ?4",
    )
    .bind(entity_id)
    .bind(phrase)
    .bind(if owner.is_empty() { None } else { Some(owner) })
    .bind(MAX_EARLIER_MENTIONS)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if linked > 0 {
        sqlx::query("UPDATE entities SET mention_count = mention_count + ? WHERE id = ?")
            .bind(linked as i64)
            .bind(entity_id)
            .execute(&mut **tx)
            .await?;
        sqlx::query(
            "UPDATE memories SET entity_ids = (SELECT json_group_array(entity_id) FROM \
             (SELECT entity_id FROM memory_entities WHERE memory_id = memories.id ORDER BY entity_id)) \
             WHERE id IN (SELECT memory_id FROM memory_entities WHERE entity_id = ?)",
        )
        .bind(entity_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Most word n-grams of one text tried against the owner's known entities.
const MAX_MENTIONS: usize = 256;

/// Links entities the owner already has (people, organisations, places, projects) whose name or
/// alias appears in `text` as a whole word sequence, even where NER missed it ("Sarah is
/// vegetarian", at the start of a sentence).
async fn link_known_entities(
    tx: &mut Transaction<'_, Sqlite>,
    memory_id: &str,
    owner: &str,
    text: &str,
) -> Result<()> {
    let words = crate::fts::terms(text);
    let mut mentions: Vec<String> = Vec::new();
    for size in 1..=3 {
        for window in words.windows(size) {
            if size == 1 && (window[0].chars().count() < 3 || crate::fts::is_stopword(&window[0])) {
                continue;
            }
            let mention = window.join(" ");
            if !mentions.contains(&mention) {
                mentions.push(mention);
            }
        }
    }
    mentions.truncate(MAX_MENTIONS);
    if mentions.is_empty() {
        return Ok(());
    }
    let mut builder = QueryBuilder::new(
        "SELECT e.id FROM entities e WHERE e.type IN ('person', 'organization', 'location', 'project') \
         AND e.owner_id = ",
    );
    builder.push_bind(owner.to_owned());
    builder.push(" AND (lower(e.canonical_name) IN (");
    let mut separated = builder.separated(", ");
    for mention in &mentions {
        separated.push_bind(mention.clone());
    }
    builder
        .push(") OR EXISTS (SELECT 1 FROM json_each(e.aliases) WHERE lower(json_each.value) IN (");
    let mut separated = builder.separated(", ");
    for mention in &mentions {
        separated.push_bind(mention.clone());
    }
    builder.push(")))");
    let known: Vec<String> = builder.build_query_scalar().fetch_all(&mut **tx).await?;
    for entity_id in known {
        let added = sqlx::query(
            "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
        )
        .bind(memory_id)
        .bind(&entity_id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if added == 1 {
            sqlx::query("UPDATE entities SET mention_count = mention_count + 1 WHERE id = ?")
                .bind(&entity_id)
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}

/// A person the owner told us about: an entity of type `person`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Person {
    /// `ent_*`.
    pub id: String,
    /// The user who told us.
    pub owner: String,
    /// Name (the entity's canonical name).
    pub name: String,
    /// How the owner relates to them ("wife", "boss").
    pub relation: Option<String>,
    /// Other names.
    pub aliases: Vec<String>,
    /// Extensible metadata.
    pub metadata: Map<String, Value>,
    /// Stable identity from an outside provider.
    pub external_id: Option<String>,
    /// The provider of `external_id`.
    pub provider: Option<String>,
}

fn person_from_row(row: &SqliteRow) -> Result<Person> {
    let metadata: String = row.try_get("metadata")?;
    Ok(Person {
        id: row.try_get("id")?,
        owner: row.try_get("owner_id")?,
        name: row.try_get("canonical_name")?,
        relation: row.try_get("relation")?,
        aliases: json_list(&row.try_get::<String, _>("aliases")?, "aliases")?,
        metadata: serde_json::from_str(&metadata)
            .map_err(|err| MemoryError::Corrupt(format!("entity metadata: {err}")))?,
        external_id: row.try_get("external_id")?,
        provider: row.try_get("provider")?,
    })
}

const PERSON_COLUMNS: &str =
    "id, owner_id, canonical_name, relation, aliases, metadata, external_id, provider";

impl MemoryStore {
    /// The owner's person whose relation is `relation` (case-insensitive), most mentioned first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn person_by_relation(&self, owner: &str, relation: &str) -> Result<Option<Person>> {
        let row = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = ? AND type = 'person' \
             AND relation = ? COLLATE NOCASE ORDER BY mention_count DESC LIMIT 1"
        ))
        .bind(owner)
        .bind(relation)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(person_from_row).transpose()
    }

    /// The owner's person named `name` (canonical name or alias, case-insensitive).
    ///
    /// # Errors
    /// The database fails.
    pub async fn person_by_name(&self, owner: &str, name: &str) -> Result<Option<Person>> {
        let row = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = ?1 AND type = 'person' AND \
             (canonical_name = ?2 COLLATE NOCASE OR EXISTS \
              (SELECT 1 FROM json_each(aliases) WHERE json_each.value = ?2 COLLATE NOCASE)) \
             ORDER BY mention_count DESC LIMIT 1"
        ))
        .bind(owner)
        .bind(name.trim())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(person_from_row).transpose()
    }

    /// Creates a person, or gives an existing one of that name the relation; returns it.
    ///
    /// # Errors
    /// The database fails.
    pub async fn upsert_person(
        &self,
        owner: &str,
        name: &str,
        relation: Option<&str>,
    ) -> Result<Person> {
        if let Some(mut person) = self.person_by_name(owner, name).await? {
            if let (Some(relation), None) = (relation, &person.relation) {
                let _write = self.write_lock.lock().await;
                sqlx::query("UPDATE entities SET relation = ? WHERE id = ?")
                    .bind(relation)
                    .bind(&person.id)
                    .execute(&self.pool)
                    .await?;
                person.relation = Some(relation.to_owned());
            }
            return Ok(person);
        }
        let id = new_id("ent");
        {
            let _write = self.write_lock.lock().await;
            let mut tx = self.begin_write().await?;
            sqlx::query(
                "INSERT INTO entities (id, owner_id, canonical_name, type, relation) VALUES (?, ?, ?, 'person', ?)",
            )
            .bind(&id)
            .bind(owner)
            .bind(name.trim())
            .bind(relation)
            .execute(&mut *tx)
            .await?;
            link_earlier_mentions(&mut tx, &id, owner, name).await?;
            tx.commit().await?;
        }
        self.person_by_name(owner, name)
            .await?
            .ok_or_else(|| MemoryError::NotFound(format!("person `{name}` vanished")))
    }

    /// Renames a person known only by relation (a placeholder name), keeping the old name as alias.
    ///
    /// # Errors
    /// The database fails.
    pub async fn rename_person(&self, person: &Person, name: &str) -> Result<()> {
        let mut aliases = person.aliases.clone();
        if !aliases
            .iter()
            .any(|alias| alias.eq_ignore_ascii_case(&person.name))
        {
            aliases.push(person.name.clone());
        }
        let _write = self.write_lock.lock().await;
        sqlx::query("UPDATE entities SET canonical_name = ?, aliases = ? WHERE id = ?")
            .bind(name.trim())
            .bind(Value::from(aliases).to_string())
            .bind(&person.id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Every person the owner told us about, by name.
    ///
    /// # Errors
    /// The database fails.
    pub async fn known_people(&self, owner: &str) -> Result<Vec<Person>> {
        let rows = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = ? AND type = 'person' \
             ORDER BY (relation IS NULL), canonical_name COLLATE NOCASE"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(person_from_row).collect()
    }

    /// Names of entities by id (for subject attribution).
    ///
    /// # Errors
    /// The database fails.
    pub async fn entity_names(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut builder =
            QueryBuilder::new("SELECT id, canonical_name FROM entities WHERE id IN (");
        let mut separated = builder.separated(", ");
        for id in ids {
            separated.push_bind(id.clone());
        }
        builder.push(")");
        Ok(builder
            .build_query_as::<(String, String)>()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .collect())
    }

    /// Marks `old_ids` superseded by `new_id` (and records `supersedes` on the new memory).
    ///
    /// # Errors
    /// The database fails.
    pub async fn supersede(
        &self,
        old_ids: &[String],
        new_id: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        if old_ids.is_empty() {
            return Ok(());
        }
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        for old_id in old_ids {
            sqlx::query(
                "UPDATE memories SET superseded_at = ?, superseded_by_id = ? WHERE id = ? AND superseded_at IS NULL",
            )
            .bind(ts(at))
            .bind(new_id)
            .bind(old_id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE memories SET attributes = json_set(attributes, '$.supersedes', ?) WHERE id = ?",
        )
        .bind(old_ids[0].clone())
        .bind(new_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Soft-deletes memories whose expiry has passed; returns how many.
    ///
    /// # Errors
    /// The database fails.
    pub async fn expire(&self, now: DateTime<Utc>) -> Result<u64> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM memories WHERE valid_until IS NULL AND expires_at IS NOT NULL AND expires_at <= ?",
        )
        .bind(ts(now))
        .fetch_all(&mut *tx)
        .await?;
        for id in &ids {
            sqlx::query("UPDATE memories SET valid_until = expires_at WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            self.drop_vector(&mut tx, id).await?;
        }
        tx.commit().await?;
        self.mirror_mut().remove_all(&ids);
        Ok(ids.len() as u64)
    }

    /// The latest active, unexpired `context` memory of `owner` with attribute `key`, set in
    /// `chat_id` (or, failing that, outside any chat).
    ///
    /// # Errors
    /// The database fails.
    pub async fn context_value(
        &self,
        owner: &str,
        chat_id: Option<&str>,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Memory>> {
        // In a chat: the value set in that chat, else the owner's value set outside any chat.
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.user_id = ? AND m.memory_type = 'context' \
             AND (m.chat_id IS NULL OR m.chat_id = ?) \
             AND m.valid_until IS NULL AND m.superseded_at IS NULL \
             AND (m.expires_at IS NULL OR m.expires_at > ?) \
             AND json_extract(m.attributes, '$.key') = ? \
             ORDER BY m.chat_id IS NULL, m.created_at DESC, m.rowid DESC LIMIT 1"
        ))
        .bind(owner)
        .bind(chat_id)
        .bind(ts(now))
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(memory_from_row).transpose()
    }

    /// The last `limit` active episodes of a session, oldest first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn recent_turns(&self, session: &SessionKey, limit: usize) -> Result<Vec<Memory>> {
        let rows = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.session_id = ? AND m.user_id = ? \
             AND m.chat_id IS ? AND m.kind = 'episode' AND m.valid_until IS NULL \
             ORDER BY m.event_time DESC, m.rowid DESC LIMIT ?"
        ))
        .bind(&session.session_id)
        .bind(&session.user_id)
        .bind(&session.chat_id)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        let mut turns = rows
            .iter()
            .map(memory_from_row)
            .collect::<Result<Vec<_>>>()?;
        turns.reverse();
        Ok(turns)
    }
}

/// Tables a full export holds, with the key that orders their rows.
const EXPORT_TABLES: [(&str, &str); 5] = [
    ("memories", "id"),
    ("entities", "id"),
    ("memory_entities", "memory_id, entity_id"),
    ("sessions_consolidations", "user_id, chat_id, session_id"),
    ("ingested_events", "event_id"),
];

fn column_value(row: &SqliteRow, index: usize) -> Result<Value> {
    use sqlx::{TypeInfo, ValueRef};
    let raw = row.try_get_raw(index)?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let kind = raw.type_info().name().to_owned();
    Ok(match kind.as_str() {
        "INTEGER" => Value::from(row.try_get::<i64, _>(index)?),
        "REAL" => Value::from(row.try_get::<f64, _>(index)?),
        "BLOB" => Value::from(
            row.try_get::<Vec<u8>, _>(index)?
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect::<String>(),
        ),
        _ => Value::from(row.try_get::<String, _>(index)?),
    })
}

impl MemoryStore {
    /// Every row of the memory tables as `{"type": table, "row": {column: value}}`, ordered by
    /// key: a lossless export (vectors and caches are rebuilt by the indexer after import).
    /// With `user_id`, only that user's memories, entities, links, sessions and events.
    ///
    /// # Errors
    /// The database fails.
    pub async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>> {
        use sqlx::Column;
        let mut records = Vec::new();
        for (table, key) in EXPORT_TABLES {
            let filter = match (table, user_id.is_some()) {
                (_, false) => "",
                ("memories", true) => " WHERE user_id = ?1",
                ("entities", true) => " WHERE owner_id = ?1",
                ("memory_entities", true) | ("ingested_events", true) => {
                    " WHERE memory_id IN (SELECT id FROM memories WHERE user_id = ?1)"
                }
                ("sessions_consolidations", true) => " WHERE user_id = ?1",
                // A table added to the export without a user filter must not export everyone's
                // rows under one user's name.
                (other, true) => {
                    return Err(MemoryError::Invalid(format!(
                        "the export of one user has no filter for table `{other}`"
                    )))
                }
            };
            let rows = sqlx::query(&format!("SELECT * FROM {table}{filter} ORDER BY {key}"))
                .bind(user_id)
                .fetch_all(&self.pool)
                .await?;
            for row in &rows {
                let mut object = Map::new();
                for (index, column) in row.columns().iter().enumerate() {
                    object.insert(column.name().to_owned(), column_value(row, index)?);
                }
                records.push(serde_json::json!({"type": table, "row": object}));
            }
        }
        Ok(records)
    }

    /// Inserts one exported row unless a row with its key exists; returns whether it was new.
    /// Memories come back on the embedding queue.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for an unknown table or a row that is not an object of plain
    /// values; the database fails.
    pub async fn import_row(&self, table: &str, row: &Value) -> Result<bool> {
        if !EXPORT_TABLES.iter().any(|(known, _)| *known == table) {
            return Err(MemoryError::Invalid(format!(
                "unknown record type `{table}`"
            )));
        }
        let Some(object) = row.as_object() else {
            return Err(MemoryError::Invalid(format!(
                "`{table}` record: `row` must be an object"
            )));
        };
        let columns: Vec<&String> = object.keys().collect();
        if columns.is_empty()
            || columns
                .iter()
                .any(|name| !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(MemoryError::Invalid(format!(
                "`{table}` record: bad column names"
            )));
        }
        let mut builder = QueryBuilder::new(format!(
            "INSERT OR IGNORE INTO {table} ({}) VALUES (",
            columns
                .iter()
                .map(|name| name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let mut separated = builder.separated(", ");
        for name in &columns {
            match &object[name.as_str()] {
                // Exports made before sessions were keyed by user and chat (schema 6) hold NULL
                // where the key now holds ''.
                Value::Null
                    if table == "sessions_consolidations"
                        && matches!(name.as_str(), "user_id" | "chat_id") =>
                {
                    separated.push_bind(String::new());
                }
                Value::Null => {
                    separated.push_bind(None::<String>);
                }
                Value::Number(number) if number.is_i64() => {
                    separated.push_bind(number.as_i64());
                }
                Value::Number(number) => {
                    separated.push_bind(number.as_f64());
                }
                Value::String(text) => {
                    separated.push_bind(text.clone());
                }
                other => {
                    return Err(MemoryError::Invalid(format!(
                        "`{table}` record: column `{name}` holds {other}, not a plain value"
                    )))
                }
            }
        }
        builder.push(")");
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let inserted = builder.build().execute(&mut *tx).await?.rows_affected() == 1;
        if inserted && table == "memories" {
            sqlx::query(
                "INSERT OR IGNORE INTO embedding_queue (memory_id, enqueued_at) \
                 SELECT id, created_at FROM memories WHERE id = ? AND valid_until IS NULL",
            )
            .bind(object.get("id").and_then(Value::as_str))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(inserted)
    }
}
