//! Converting between Rust values and their stored form, the same in every backend: timestamps
//! (Unix seconds), JSON lists, vector blobs, memory rows, and new ids.

use chrono::{DateTime, Utc};
use mnemo_kernel::host::JobRun;
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::error::{MemoryError, Result};
use crate::store::{EntitySummary, OwnerSummary};
use crate::types::{Memory, MemoryKind, Origin};

/// The columns [`memory_from_row`] reads, for alias `m`.
pub(crate) const MEMORY_COLUMNS: &str =
    "m.id, m.kind, m.content, m.session_id, m.user_id, m.chat_id, \
    m.event_time, m.created_at, m.valid_until, m.confidence, m.access_count, m.last_accessed, \
    m.decay_rate, m.source_ids, m.source_role, m.entity_ids, m.tags, m.attributes, \
    m.memory_type, m.expires_at, m.shared, m.superseded_at, m.superseded_by_id, m.subject_ids, \
    m.faded_at, m.quarantine, m.origin, m.valid_from, m.valid_to";

pub(crate) fn ts(time: DateTime<Utc>) -> i64 {
    time.timestamp()
}

pub(crate) fn from_ts(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).unwrap_or_default()
}

pub(crate) fn json_list(text: &str, column: &str) -> Result<Vec<String>> {
    serde_json::from_str(text).map_err(|err| MemoryError::Corrupt(format!("{column}: {err}")))
}

/// The columns [`entity_summary_from_row`] reads, from `entities e`.
pub(crate) const ENTITY_SUMMARY_COLUMNS: &str =
    "e.id, e.canonical_name, e.type, e.relation, e.aliases, \
    (SELECT COUNT(*) FROM memory_entities me WHERE me.entity_id = e.id) AS memories";

/// An entity's summary from a row holding [`ENTITY_SUMMARY_COLUMNS`], in either backend.
pub(crate) fn entity_summary_from_row<'r, R>(row: &'r R) -> Result<EntitySummary>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(EntitySummary {
        id: row.try_get("id")?,
        name: row.try_get("canonical_name")?,
        entity_type: row.try_get("type")?,
        relation: row.try_get("relation")?,
        aliases: json_list(&row.try_get::<String, _>("aliases")?, "aliases")?,
        memories: row.try_get("memories")?,
    })
}

/// An owner's summary from a row holding `user_id` and `memories` (a count).
pub(crate) fn owner_summary_from_row<'r, R>(row: &'r R) -> Result<OwnerSummary>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(OwnerSummary {
        user_id: row.try_get("user_id")?,
        memories: row.try_get("memories")?,
    })
}

/// The columns [`job_run_from_row`] reads, from `job_history`.
pub(crate) const JOB_RUN_COLUMNS: &str = "job, started_ms, finished_ms, ok, report, failed_items";

/// A job run from a row holding [`JOB_RUN_COLUMNS`], in either backend.
pub(crate) fn job_run_from_row<'r, R>(row: &'r R) -> Result<JobRun>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let millis = |column: &'static str| -> Result<DateTime<Utc>> {
        let value: i64 = row.try_get(column)?;
        DateTime::from_timestamp_millis(value)
            .ok_or_else(|| MemoryError::Corrupt(format!("job_history.{column}: {value}")))
    };
    let report: String = row.try_get("report")?;
    let ok: i64 = row.try_get("ok")?;
    Ok(JobRun {
        job: row.try_get("job")?,
        at: millis("started_ms")?,
        finished_at: millis("finished_ms")?,
        outcome: if ok == 1 { Ok(report) } else { Err(report) },
        failed_items: u64::try_from(row.try_get::<i64, _>("failed_items")?).unwrap_or(0),
    })
}

/// A memory from a row holding [`MEMORY_COLUMNS`], in either backend.
pub(crate) fn memory_from_row<'r, R>(row: &'r R) -> Result<Memory>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    f64: Decode<'r, R::Database> + Type<R::Database>,
{
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
        faded_at: row.try_get::<Option<i64>, _>("faded_at")?.map(from_ts),
        subject_ids: json_list(&row.try_get::<String, _>("subject_ids")?, "subject_ids")?,
        quarantine: row
            .try_get::<Option<String>, _>("quarantine")?
            .map(|text| {
                serde_json::from_str(&text)
                    .map_err(|err| MemoryError::Corrupt(format!("quarantine: {err}")))
            })
            .transpose()?,
        origin: origin_named(&row.try_get::<String, _>("origin")?)?,
        valid_from: row.try_get::<Option<i64>, _>("valid_from")?.map(from_ts),
        valid_to: row.try_get::<Option<i64>, _>("valid_to")?.map(from_ts),
    })
}

/// The origin stored as `name`; the column's check admits no other.
pub(crate) fn origin_named(name: &str) -> Result<Origin> {
    Origin::parse(name).ok_or_else(|| MemoryError::Corrupt(format!("origin: `{name}`")))
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

/// The embedding-cache keys a memory's text may have left: its own, and its sentence keys'
/// (see `crate::sentence_keys`); removing the memory removes them.
pub(crate) fn cached_hashes(text: &str) -> Vec<String> {
    let own = content_hash(text);
    let keys: Vec<String> = crate::sentence_keys::sentence_keys(text)
        .iter()
        .map(|key| content_hash(key))
        .filter(|hash| *hash != own)
        .collect();
    std::iter::once(own).chain(keys).collect()
}

pub(crate) fn vector_blob(vector: &[f32]) -> Vec<u8> {
    vector
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

pub(crate) fn blob_vector(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        .collect()
}
