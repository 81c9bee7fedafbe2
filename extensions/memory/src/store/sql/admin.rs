//! The integrity check's counts, for both backends: memories, active ones, the indexer's queue,
//! vectors against the active memories, and forgotten events. What each database checks of
//! itself (SQLite's pages and full-text index, PostgreSQL's indexes), how the check reads a
//! consistent store, and closing and sizing the store stay with each backend
//! (`store/*/admin.rs`).

use sqlx::QueryBuilder;

use super::Dialect;
use crate::error::Result;
use crate::store::IntegrityReport;

/// The count that `sql` selects as `n`.
async fn count<D: Dialect>(connection: &mut D::Connection, sql: String) -> Result<i64> {
    match D::rows(connection, QueryBuilder::new(sql)).await?.first() {
        Some(row) => D::int(row, "n"),
        None => Ok(0),
    }
}

/// The integrity check's counts on `connection`, with those of the vector index when
/// `has_vectors`; the database's own findings are left empty, for the caller to fill.
pub(crate) async fn integrity_counts<D: Dialect>(
    connection: &mut D::Connection,
    has_vectors: bool,
) -> Result<IntegrityReport> {
    let memories = count::<D>(connection, "SELECT COUNT(*) AS n FROM memories".into()).await?;
    let active = count::<D>(
        connection,
        "SELECT COUNT(*) AS n FROM memories WHERE valid_until IS NULL".into(),
    )
    .await?;
    let queued = count::<D>(
        connection,
        "SELECT COUNT(*) AS n FROM embedding_queue q JOIN memories m ON m.id = q.memory_id \
         WHERE m.valid_until IS NULL"
            .into(),
    )
    .await?;
    let (vectors, orphan_vectors, unindexed) = if has_vectors {
        let table = D::VECTORS;
        let vectors = count::<D>(connection, format!("SELECT COUNT(*) AS n FROM {table}")).await?;
        let orphans = count::<D>(
            connection,
            format!(
                "SELECT (SELECT COUNT(*) FROM {table} v WHERE NOT EXISTS \
                 (SELECT 1 FROM memories m WHERE m.id = v.memory_id AND m.valid_until IS NULL)) \
                 + (SELECT COUNT(*) FROM memory_sentence_vectors s WHERE NOT EXISTS \
                 (SELECT 1 FROM memories m WHERE m.id = s.memory_id AND m.valid_until IS NULL)) \
                 AS n"
            ),
        )
        .await?;
        let unindexed = count::<D>(
            connection,
            format!(
                "SELECT COUNT(*) AS n FROM memories m WHERE m.valid_until IS NULL \
                 AND NOT EXISTS (SELECT 1 FROM {table} v WHERE v.memory_id = m.id) \
                 AND NOT EXISTS (SELECT 1 FROM embedding_queue q WHERE q.memory_id = m.id)"
            ),
        )
        .await?;
        (Some(vectors), orphans, unindexed)
    } else {
        (None, 0, 0)
    };
    let forgotten_events = count::<D>(
        connection,
        "SELECT COUNT(*) AS n FROM ingested_events e WHERE NOT EXISTS \
         (SELECT 1 FROM memories m WHERE m.id = e.memory_id)"
            .into(),
    )
    .await?;
    Ok(IntegrityReport {
        database: Vec::new(),
        full_text: None,
        memories,
        active,
        vectors,
        orphan_vectors,
        unindexed,
        queued,
        forgotten_events,
    })
}
