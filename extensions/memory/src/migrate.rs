//! Moving a store between backends (`mnemo migrate-store`): every row of one store, copied into
//! an empty store of the other (or the same) backend through the storage traits' lossless
//! export and import, then checked by exporting the copy and comparing it with the original.
//! Vectors are not copied: every memory arrives on the copy's indexer queue, and the first
//! start with an embedding model embeds them again (the embedding cache makes that cheap when
//! the texts were seen before).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::{MemoryError, Result};
use crate::store::{
    open_postgres, redacted, MemoryBackend, MemoryStore, PostgresOptions, StoreOptions,
    DEFAULT_WAL_TRUNCATE_FRAMES,
};

/// Where a store is: `sqlite:PATH` or a `postgres://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(String),
}

impl std::str::FromStr for StoreLocation {
    type Err = MemoryError;

    fn from_str(text: &str) -> Result<Self> {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            Ok(Self::Postgres(text.to_owned()))
        } else if let Some(path) = text.strip_prefix("sqlite:").filter(|path| !path.is_empty()) {
            Ok(Self::Sqlite(PathBuf::from(path)))
        } else {
            Err(MemoryError::Invalid(format!(
                "`{text}` is not a store: give sqlite:PATH or a postgres:// URL"
            )))
        }
    }
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(formatter, "sqlite:{}", path.display()),
            Self::Postgres(url) => formatter.write_str(&redacted(url)),
        }
    }
}

/// What a copy did: rows per table, all checked equal in the copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Rows copied, by table.
    pub rows: BTreeMap<String, u64>,
}

impl CopyReport {
    /// Rows copied in all.
    pub fn total(&self) -> u64 {
        self.rows.values().sum()
    }
}

async fn open(location: &StoreLocation, must_exist: bool) -> Result<Arc<dyn MemoryBackend>> {
    let opened: Result<Arc<dyn MemoryBackend>> = match location {
        StoreLocation::Sqlite(path) => {
            if must_exist && !path.is_file() {
                return Err(MemoryError::Invalid(format!(
                    "there is no SQLite store at {}",
                    path.display()
                )));
            }
            // A new store's directory is made, as for a data directory.
            if let Some(parent) = path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
            {
                if !must_exist {
                    std::fs::create_dir_all(parent).map_err(|error| MemoryError::Open {
                        path: location.to_string(),
                        source: Box::new(MemoryError::Invalid(format!(
                            "cannot make its directory {}: {error}",
                            parent.display()
                        ))),
                    })?;
                }
            }
            MemoryStore::open(
                path,
                &StoreOptions {
                    busy_timeout: Duration::from_secs(5),
                    synchronous: "full".to_owned(),
                    max_connections: 2,
                    vector_oversample: 8,
                    wal_truncate_frames: DEFAULT_WAL_TRUNCATE_FRAMES,
                },
            )
            .await
            .map(|store| Arc::new(store) as Arc<dyn MemoryBackend>)
        }
        StoreLocation::Postgres(url) => {
            open_postgres(&PostgresOptions {
                url: url.clone(),
                max_connections: 4,
                lock_timeout: Duration::from_secs(5),
                ef_search: 100,
                synchronous_commit: true,
            })
            .await
        }
    };
    opened.map_err(|source| MemoryError::Open {
        path: location.to_string(),
        source: Box::new(source),
    })
}

/// Rows copied in each transaction.
const COPY_BATCH: usize = 2_000;

fn table_of(record: &Value) -> Result<&str> {
    record["type"]
        .as_str()
        .ok_or_else(|| MemoryError::Corrupt("an exported record has no table".to_owned()))
}

/// Copies every row of the store at `from` into the empty store at `to` (made if needed), then
/// exports the copy and checks that it equals the original, row for row. `progress` is called
/// with (rows copied, rows in all).
///
/// # Errors
/// Either store cannot be opened; `to` is the same store as `from` or is not empty (nothing is
/// written then); a row cannot be written; the copy differs from the original. A copy that
/// fails half-way leaves the rows written so far, and running it again finishes it: rows that
/// are there already are skipped.
pub async fn copy_store(
    from: &StoreLocation,
    to: &StoreLocation,
    mut progress: impl FnMut(u64, u64),
) -> Result<CopyReport> {
    if from == to {
        return Err(MemoryError::Invalid(
            "the source and the target are the same store".to_owned(),
        ));
    }
    let source = open(from, true).await?;
    let records = source.export_rows(None).await?;
    source.close().await;
    let target = open(to, false).await?;
    let existing = target.export_rows(None).await?;
    let result = copy_into(target.as_ref(), &records, &existing, &mut progress).await;
    target.close().await;
    result
}

async fn copy_into(
    target: &dyn MemoryBackend,
    records: &[Value],
    existing: &[Value],
    progress: &mut impl FnMut(u64, u64),
) -> Result<CopyReport> {
    // A target that holds exactly a prefix of the source is an interrupted copy: go on.
    if !existing.is_empty() && !is_subset(existing, records) {
        return Err(MemoryError::Invalid(format!(
            "the target store is not empty ({} rows that are not the source's); migrate-store \
             copies into an empty store only",
            existing.len()
        )));
    }
    let total = records.len() as u64;
    let mut report = CopyReport::default();
    let mut copied = 0;
    // A transaction per batch: one commit for each `COPY_BATCH` rows, not one per row.
    for batch in records.chunks(COPY_BATCH) {
        let mut rows = Vec::with_capacity(batch.len());
        for record in batch {
            let table = table_of(record)?;
            rows.push((table, &record["row"]));
            *report.rows.entry(table.to_owned()).or_default() += 1;
        }
        target.import_rows(&rows).await?;
        copied += batch.len() as u64;
        progress(copied, total);
    }
    let copied = target.export_rows(None).await?;
    if copied != records {
        let first = copied
            .iter()
            .zip(records)
            .position(|(copy, original)| copy != original)
            .unwrap_or(copied.len().min(records.len()));
        return Err(MemoryError::Corrupt(format!(
            "the copy differs from the original: {} rows against {}, first at row {first}",
            copied.len(),
            records.len()
        )));
    }
    Ok(report)
}

/// True when every record of `part` is among `whole`'s.
fn is_subset(part: &[Value], whole: &[Value]) -> bool {
    let whole: std::collections::HashSet<String> = whole.iter().map(Value::to_string).collect();
    part.iter()
        .all(|record| whole.contains(&record.to_string()))
}
