//! Opening the SQLite database: connection options and pragmas, the cross-process opening
//! lock, migrations, and every call into C but the ranking functions of `scope_rank.rs`
//! (sqlite-vec registration, connection state checks).

use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Once, RwLock};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, SqliteConnection, Transaction};
use tracing::Instrument;

use super::checkpoint::checkpoint_loop;
use super::{MemoryStore, VectorStatus};
use crate::error::{MemoryError, Result};
use crate::vector_index::QuantizedIndex;

/// How the database is opened.
#[derive(Debug, Clone)]
pub(crate) struct StoreOptions {
    /// How long a connection waits for a lock before failing.
    pub(crate) busy_timeout: Duration,
    /// `synchronous` pragma: `full` makes a committed write survive power loss.
    pub(crate) synchronous: String,
    /// Connections in the pool (readers run in parallel with the one writer under WAL).
    pub(crate) max_connections: u32,
    /// Vector search: candidates taken by sign-bit Hamming distance per result, then re-scored
    /// (see [`crate::vector_index`]); 0 searches `vec_memories` exactly by brute force.
    pub(crate) vector_oversample: usize,
    /// Write-ahead log length, in pages, past which it is truncated
    /// ([`DEFAULT_WAL_TRUNCATE_FRAMES`]; see `checkpoint_loop`).
    pub(crate) wal_truncate_frames: i64,
}

/// Registers sqlite-vec with every connection SQLite opens from now on.
#[allow(unsafe_code)]
pub(super) fn register_sqlite_vec() {
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
pub(super) async fn leaves_no_open_transaction(
    connection: &mut SqliteConnection,
) -> sqlx::Result<bool> {
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
pub(super) async fn opened_read_only(pool: &SqlitePool) -> Result<bool> {
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
pub(super) async fn lock_for_opening(database: &Path) -> Result<Option<std::fs::File>> {
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

impl MemoryStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    ///
    /// # Errors
    /// The file cannot be opened or migrated.
    pub(crate) async fn open(path: &Path, options: &StoreOptions) -> Result<Self> {
        register_sqlite_vec();
        super::scope_rank::register_scope_rank();
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
            checkpointer: tokio::spawn(
                checkpoint_loop(
                    pool.clone(),
                    Arc::clone(&write_lock),
                    options.busy_timeout,
                    options.wal_truncate_frames.max(1),
                )
                .instrument(tracing::info_span!("checkpointer", database = %path.display())),
            ),
            write_lock,
            vector: RwLock::new(VectorStatus::Disabled {
                reason: "no embedding provider".to_owned(),
            }),
            mirror: RwLock::new(QuantizedIndex::default()),
            sentence_mirror: RwLock::new(QuantizedIndex::default()),
            reload_lock: tokio::sync::Mutex::new(()),
            index_cursor: Default::default(),
            vector_oversample: options.vector_oversample,
            text_statistics: super::text_statistics::TextStatistics::default(),
            pool,
        })
    }

    /// Starts a write transaction that holds SQLite's write lock from its first statement
    /// (`BEGIN IMMEDIATE`). A deferred transaction that reads first and writes later cannot wait
    /// for the lock: when another process committed since its read, SQLite answers BUSY at once
    /// (`SQLITE_BUSY_SNAPSHOT`), whatever `busy_timeout` says. Taking the lock at `BEGIN` makes
    /// every writer, in this process or another, wait its turn for up to `busy_timeout`.
    pub(super) async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// The pool, for tests that check the database directly.
    #[cfg(test)]
    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}
