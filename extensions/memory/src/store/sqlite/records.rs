//! Reading memories: by id, through a request's filters, the keys ranking needs, and the
//! listings the service, tools and jobs ask for; counting accesses.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{QueryBuilder, Row, Sqlite};

use super::packed::{exact_real, fetch_packed, packed_rows, Real};
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::MemoryRecords;
use crate::store::listing::push_listing_filters;
use crate::store::rows::{from_ts, memory_from_row, ts, MEMORY_COLUMNS};
use crate::store::sql::push_filters;
use crate::store::types::{RankColumns, RankKey};
use crate::types::{ListRequest, Memory, MemoryKind, MemoryStats, SearchRequest};

#[async_trait]
impl MemoryRecords for MemoryStore {
    async fn get(&self, id: &str) -> Result<Option<Memory>> {
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?"
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

    async fn rank_keys(
        &self,
        ids: &[String],
        request: &SearchRequest,
        neighbours: bool,
    ) -> Result<HashMap<String, RankKey>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        // One packed row (see `packed.rs`): a search reads the keys of several hundred ids.
        let mut columns = format!("m.id, {}, m.event_time, ", exact_real("m.confidence"));
        if neighbours {
            // The session index finds each turn's neighbours in the same user's session (`+kind`
            // and `+chat_id` keep SQLite on it).
            columns.push_str(
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
            columns.push_str("NULL, NULL");
        }
        columns
            .push_str(", m.user_id, m.chat_id, CASE WHEN m.kind = 'episode' THEN m.session_id END");
        let mut builder = QueryBuilder::new(format!(
            "SELECT {} FROM memories m WHERE m.id IN (",
            packed_rows(&columns, "")
        ));
        let mut separated = builder.separated(", ");
        for id in ids {
            separated.push_bind(id.clone());
        }
        builder.push(")");
        push_filters(&mut builder, request);
        let rows: Vec<RankColumns<Real>> = fetch_packed(builder, &self.pool).await?;
        Ok(rows
            .into_iter()
            .map(
                |(id, Real(confidence), event_time, previous, next, user, chat, session)| {
                    RankKey::from_row((
                        id, confidence, event_time, previous, next, user, chat, session,
                    ))
                },
            )
            .collect())
    }

    async fn touch(&self, ids: &[String], times: u32, at: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let _write = self.write_lock.lock().await;
        // A recalled fact that had faded is back: in the context again, with the confidence of
        // a fact in doubt (0.5) if it had fallen below that, and its decay starts over.
        let mut builder = QueryBuilder::new("UPDATE memories SET access_count = access_count + ");
        builder.push_bind(i64::from(times)).push(
            ", confidence = CASE WHEN faded_at IS NOT NULL THEN MAX(confidence, 0.5) ELSE confidence END, \
             faded_at = NULL, last_accessed = MAX(COALESCE(last_accessed, 0), ",
        );
        builder.push_bind(ts(at)).push(") WHERE id IN (");
        let mut separated = builder.separated(", ");
        for id in ids {
            separated.push_bind(id.clone());
        }
        builder.push(")");
        builder.build().execute(&self.pool).await?;
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
        self.fetch_memories(builder).await
    }

    async fn latest_reflection(
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
            .push(" ORDER BY m.event_time DESC LIMIT ")
            .push_bind(limit as i64);
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
            builder.push(" AND m.kind IN (");
            let mut kinds = builder.separated(", ");
            for kind in &request.kinds {
                kinds.push_bind(kind.as_str());
            }
            builder.push(")");
        }
        push_listing_filters(&mut builder, request, now);
        builder
            .push(" ORDER BY m.event_time DESC, m.rowid DESC LIMIT ")
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
}

impl MemoryStore {
    /// The memories a built query (selecting `MEMORY_COLUMNS`) returns, in its order.
    pub(super) async fn fetch_memories(
        &self,
        mut builder: QueryBuilder<'_, Sqlite>,
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
