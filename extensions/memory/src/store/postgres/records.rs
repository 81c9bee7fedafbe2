//! Reading memories: by id, through a request's filters, the keys ranking needs, and the
//! listings the service, tools and jobs ask for; counting accesses.
//!
//! Where the SQLite store breaks a tie of event times by insertion order (`rowid`), this one
//! uses `seq`, the order rows were stored in.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder, Row};

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::MemoryRecords;
use crate::store::listing::push_listing_filters;
use crate::store::rows::{from_ts, memory_from_row, ts, MEMORY_COLUMNS};
use crate::store::sql::push_filters;
use crate::store::types::{RankKey, RankRow};
use crate::types::{ListRequest, Memory, MemoryKind, MemoryStats, SearchRequest};

/// The kinds' names, for binding as a list.
fn kind_names(kinds: &[MemoryKind]) -> Vec<String> {
    kinds.iter().map(|kind| kind.as_str().to_owned()).collect()
}

#[async_trait]
impl MemoryRecords for PostgresStore {
    async fn get(&self, id: &str) -> Result<Option<Memory>> {
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(memory_from_row).transpose()
    }

    async fn load_filtered(
        &self,
        ids: &[String],
        request: &SearchRequest,
    ) -> Result<HashMap<String, Memory>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut builder = QueryBuilder::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ANY("
        ));
        builder.push_bind(ids.to_vec()).push(")");
        push_filters(&mut builder, request);
        let rows = builder.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| memory_from_row(row).map(|memory| (memory.id.clone(), memory)))
            .collect()
    }

    async fn rank_keys(
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
            // Each turn's neighbours in the same user's session and chat, through the session
            // index; turns are ordered by event time, then as stored (`seq`).
            builder.push(
                "CASE WHEN m.kind = 'episode' AND m.session_id IS NOT NULL THEN \
                 (SELECT p.id FROM memories p WHERE p.session_id = m.session_id \
                  AND p.user_id = m.user_id AND p.chat_id IS NOT DISTINCT FROM m.chat_id \
                  AND p.kind = 'episode' \
                  AND (p.event_time, p.seq) < (m.event_time, m.seq) \
                  ORDER BY p.event_time DESC, p.seq DESC LIMIT 1) END, \
                 CASE WHEN m.kind = 'episode' AND m.session_id IS NOT NULL THEN \
                 (SELECT n.id FROM memories n WHERE n.session_id = m.session_id \
                  AND n.user_id = m.user_id AND n.chat_id IS NOT DISTINCT FROM m.chat_id \
                  AND n.kind = 'episode' \
                  AND (n.event_time, n.seq) > (m.event_time, m.seq) \
                  ORDER BY n.event_time, n.seq LIMIT 1) END",
            );
        } else {
            builder.push("NULL::text, NULL::text");
        }
        builder.push(
            ", m.user_id, m.chat_id, CASE WHEN m.kind = 'episode' THEN m.session_id END \
             FROM memories m WHERE m.id = ANY(",
        );
        builder.push_bind(ids.to_vec()).push(")");
        push_filters(&mut builder, request);
        Ok(builder
            .build_query_as::<RankRow>()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(RankKey::from_row)
            .collect())
    }

    /// A touch is a write to each owner's memories: the ids are grouped by owner and each
    /// owner's are updated in a transaction holding that owner's write lock (so decay, which
    /// holds the whole store, never interleaves with it). Owners are touched one after another,
    /// not all in one transaction.
    async fn touch(&self, ids: &[String], times: u32, at: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // No advisory lock: the row locks of one statement are enough, and a search never
        // waits for a writer of the owner (or for a whole-store writer such as decay) to count
        // its accesses. A recalled fact that had faded is back: in the context again, with the
        // confidence of a fact in doubt (0.5) if it had fallen below that.
        sqlx::query(
            "UPDATE memories SET access_count = access_count + $1, \
             confidence = CASE WHEN faded_at IS NOT NULL THEN GREATEST(confidence, 0.5) \
             ELSE confidence END, faded_at = NULL, \
             last_accessed = GREATEST(COALESCE(last_accessed, 0), $2) WHERE id = ANY($3)",
        )
        .bind(i64::from(times))
        .bind(ts(at))
        .bind(ids)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats> {
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

    async fn memories_for_enrichment(
        &self,
        kinds: &[MemoryKind],
        max_entities: usize,
        max_attempts: i64,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        // `->>` gives SQL NULL for a missing key and for JSON null alike, as `json_extract`
        // does; an attempt count that is not a number counts as none.
        let mut builder = QueryBuilder::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.valid_until IS NULL \
             AND (m.attributes::jsonb ->> 'enriched_at') IS NULL \
             AND COALESCE(CASE WHEN jsonb_typeof(m.attributes::jsonb -> 'enrichment_attempts') \
             = 'number' THEN (m.attributes::jsonb ->> 'enrichment_attempts')::double precision \
             END, 0) < "
        ));
        builder.push_bind(max_attempts);
        builder
            .push(" AND (SELECT COUNT(*) FROM memory_entities me WHERE me.memory_id = m.id) <= ");
        builder.push_bind(i64::try_from(max_entities).unwrap_or(i64::MAX));
        if !kinds.is_empty() {
            builder
                .push(" AND m.kind = ANY(")
                .push_bind(kind_names(kinds))
                .push(")");
        }
        builder
            .push(" ORDER BY m.event_time DESC, m.seq DESC LIMIT ")
            .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
        self.fetch_memories(builder).await
    }

    async fn latest_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>> {
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.kind = 'reflection' \
             AND m.valid_until IS NULL \
             AND (m.user_id IS NOT DISTINCT FROM $1 OR m.user_id IS NULL) \
             AND m.chat_id IS NOT DISTINCT FROM $2 \
             ORDER BY m.event_time DESC, m.seq DESC LIMIT 1"
        ))
        .bind(user_id)
        .bind(chat_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(memory_from_row).transpose()
    }

    async fn recent_memories(
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
            .push(" ORDER BY m.event_time DESC, m.seq DESC LIMIT ")
            .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
        self.fetch_memories(builder).await
    }

    async fn list_memories(
        &self,
        request: &ListRequest,
        now: DateTime<Utc>,
    ) -> Result<Vec<Memory>> {
        let mut builder = QueryBuilder::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.user_id = "
        ));
        builder.push_bind(request.user_id.clone());
        if !request.kinds.is_empty() {
            builder
                .push(" AND m.kind = ANY(")
                .push_bind(kind_names(&request.kinds))
                .push(")");
        }
        push_listing_filters(&mut builder, request, now);
        builder
            .push(" ORDER BY m.event_time DESC, m.seq DESC LIMIT ")
            .push_bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
            .push(" OFFSET ")
            .push_bind(i64::try_from(request.offset).unwrap_or(i64::MAX));
        self.fetch_memories(builder).await
    }

    async fn context_value(
        &self,
        owner: &str,
        chat_id: Option<&str>,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Memory>> {
        // In a chat: the value set in that chat, else the owner's value set outside any chat
        // (`chat_id IS NULL` is false for the chat's own, which sorts first).
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.user_id = $1 \
             AND m.memory_type = 'context' \
             AND (m.chat_id IS NULL OR m.chat_id = $2) \
             AND m.valid_until IS NULL AND m.superseded_at IS NULL \
             AND (m.expires_at IS NULL OR m.expires_at > $3) \
             AND (m.attributes::jsonb ->> 'key') = $4 \
             ORDER BY m.chat_id IS NULL, m.created_at DESC, m.seq DESC LIMIT 1"
        ))
        .bind(owner)
        .bind(chat_id)
        .bind(ts(now))
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(memory_from_row).transpose()
    }
}

impl PostgresStore {
    /// The memories a built query (selecting `MEMORY_COLUMNS`) returns, in its order.
    pub(super) async fn fetch_memories(
        &self,
        mut builder: QueryBuilder<'_, Postgres>,
    ) -> Result<Vec<Memory>> {
        builder
            .build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(memory_from_row)
            .collect()
    }
}
