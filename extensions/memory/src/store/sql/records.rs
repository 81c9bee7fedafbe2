//! Reading memories, for both backends: by id, through a search's filters, counts, and the
//! listings the service, tools and jobs ask for, and counting a search's accesses ([`touch`]).
//! The keys a search ranks by stay with each backend ([`SearchRecords::rank_keys`]): SQLite
//! reads them packed and PostgreSQL compares rows. What differs in the SQL here is the
//! dialect's: the column that orders rows as stored, reading a memory's JSON attributes, and
//! the name of `GREATEST`.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{push_filters, Bind, Dialect, Driver, Run, SqlStore};
use crate::error::Result;
use crate::store::backend::{MemoryRecords, SearchRecords};
use crate::store::listing::push_listing_filters;
use crate::store::rows::{from_ts, ts, MEMORY_COLUMNS};
use crate::types::{ListRequest, Memory, MemoryKind, MemoryStats, SearchRequest};

/// Appends ` ORDER BY m.event_time DESC, <stored order> DESC LIMIT limit`: newest first, and
/// of the same time the last stored first.
pub(super) fn push_newest<D: Dialect>(builder: &mut QueryBuilder<D>, limit: usize) {
    builder
        .push(format!(
            " ORDER BY m.event_time DESC, m.{} DESC LIMIT ",
            D::STORED_ORDER
        ))
        .count(limit);
}

/// The kinds' names, for binding as a list.
fn kind_names(kinds: &[MemoryKind]) -> Vec<String> {
    kinds.iter().map(|kind| kind.as_str().to_owned()).collect()
}

#[async_trait]
impl<S: SqlStore + SearchRecords> MemoryRecords for S {
    async fn get(&self, id: &str) -> Result<Option<Memory>> {
        let mut query = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = "
        ));
        query.text(id);
        Ok(self.fetch_memories(query).await?.into_iter().next())
    }

    async fn load_filtered(
        &self,
        ids: &[String],
        request: &SearchRequest,
    ) -> Result<HashMap<String, Memory>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut builder =
            QueryBuilder::<S::Db>::new(format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE "));
        S::Db::push_one_of(&mut builder, "m.id", ids);
        push_filters(&mut builder, request);
        self.read(builder)
            .await?
            .iter()
            .map(|row| S::Db::memory(row).map(|memory| (memory.id.clone(), memory)))
            .collect()
    }

    async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats> {
        // A fact decay faded is counted apart: it is out of the context, not active.
        let mut builder = QueryBuilder::<S::Db>::new(
            "SELECT m.kind, COUNT(*) AS n, \
             SUM(CASE WHEN m.faded_at IS NULL THEN 0 ELSE 1 END) AS faded, \
             MAX(CASE WHEN m.faded_at IS NULL THEN m.event_time END) AS latest FROM memories m \
             WHERE m.valid_until IS NULL AND m.superseded_at IS NULL",
        );
        if let Some(user_id) = user_id {
            builder.push(" AND m.user_id = ").text(user_id);
        }
        builder.push(" GROUP BY m.kind");
        let mut stats = MemoryStats::default();
        for row in self.read(builder).await? {
            let faded = S::Db::opt_int(&row, "faded")?.unwrap_or(0);
            let count = S::Db::int(&row, "n")? - faded;
            match S::Db::text(&row, "kind")?.as_str() {
                "episode" => stats.episodes = count,
                "fact" => {
                    stats.facts = count;
                    stats.faded_facts = faded;
                }
                "reflection" => stats.reflections = count,
                _ => {}
            }
            if let Some(latest) = S::Db::opt_int(&row, "latest")?.map(from_ts) {
                stats.latest = Some(stats.latest.map_or(latest, |known| known.max(latest)));
            }
        }
        let mut builder =
            QueryBuilder::<S::Db>::new("SELECT COUNT(*) AS n FROM entities e WHERE 1 = 1");
        if let Some(user_id) = user_id {
            builder.push(" AND e.owner_id = ").text(user_id);
        }
        stats.entities = count(self, builder).await?;
        let mut builder = QueryBuilder::<S::Db>::new("SELECT COUNT(*) AS n FROM embedding_queue q");
        if let Some(user_id) = user_id {
            builder
                .push(" JOIN memories m ON m.id = q.memory_id WHERE m.user_id = ")
                .text(user_id);
        }
        stats.pending_index = count(self, builder).await?;
        Ok(stats)
    }

    async fn memories_for_enrichment(
        &self,
        kinds: &[MemoryKind],
        max_entities: usize,
        max_attempts: i64,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let mut builder = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.valid_until IS NULL \
             AND {} IS NULL AND {} < ",
            S::Db::json_field("m.attributes", "enriched_at"),
            S::Db::ENRICHMENT_ATTEMPTS,
        ));
        builder
            .int(max_attempts)
            .push(" AND (SELECT COUNT(*) FROM memory_entities me WHERE me.memory_id = m.id) <= ")
            .count(max_entities);
        if !kinds.is_empty() {
            builder.push(" AND ");
            S::Db::push_one_of(&mut builder, "m.kind", &kind_names(kinds));
        }
        push_newest(&mut builder, limit);
        self.fetch_memories(builder).await
    }

    async fn enrichments_given_up(&self, kinds: &[MemoryKind], max_attempts: i64) -> Result<u64> {
        let mut builder = QueryBuilder::<S::Db>::new(format!(
            "SELECT COUNT(*) AS n FROM memories m WHERE m.valid_until IS NULL \
             AND {} IS NULL AND {} >= ",
            S::Db::json_field("m.attributes", "enriched_at"),
            S::Db::ENRICHMENT_ATTEMPTS,
        ));
        builder.int(max_attempts);
        if !kinds.is_empty() {
            builder.push(" AND ");
            S::Db::push_one_of(&mut builder, "m.kind", &kind_names(kinds));
        }
        Ok(u64::try_from(count(self, builder).await?).unwrap_or_default())
    }

    async fn latest_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>> {
        let mut builder = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.kind = 'reflection' \
             AND m.valid_until IS NULL AND m.quarantine IS NULL \
             AND (m.user_id IS NOT DISTINCT FROM "
        ));
        builder
            .opt_text(user_id)
            .push(" OR m.user_id IS NULL) AND m.chat_id IS NOT DISTINCT FROM ")
            .opt_text(chat_id);
        push_newest(&mut builder, 1);
        Ok(self.fetch_memories(builder).await?.into_iter().next())
    }

    async fn recent_memories(
        &self,
        user_id: Option<&str>,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let mut builder = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.valid_until IS NULL \
             AND m.superseded_at IS NULL AND m.quarantine IS NULL \
             AND m.kind IN ('fact', 'episode') AND m.event_time >= "
        ));
        builder.int(ts(since));
        if let Some(user_id) = user_id {
            builder.push(" AND m.user_id = ").text(user_id);
        }
        push_newest(&mut builder, limit);
        self.fetch_memories(builder).await
    }

    async fn list_memories(
        &self,
        request: &ListRequest,
        now: DateTime<Utc>,
    ) -> Result<Vec<Memory>> {
        let mut builder = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.user_id = "
        ));
        builder.text(request.user_id.as_str());
        if !request.kinds.is_empty() {
            builder.push(" AND ");
            S::Db::push_one_of(&mut builder, "m.kind", &kind_names(&request.kinds));
        }
        push_listing_filters(&mut builder, request, now);
        push_newest(&mut builder, request.limit);
        builder.push(" OFFSET ").count(request.offset);
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
        let mut builder = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.user_id = "
        ));
        builder
            .text(owner)
            .push(" AND m.memory_type = 'context' AND (m.chat_id IS NULL OR m.chat_id = ")
            .opt_text(chat_id)
            .push(
                ") AND m.valid_until IS NULL AND m.superseded_at IS NULL \
                 AND (m.expires_at IS NULL OR m.expires_at > ",
            )
            .int(ts(now))
            .push(format!(
                ") AND {} = ",
                S::Db::json_field("m.attributes", "key")
            ))
            .text(key)
            .push(format!(
                " ORDER BY m.chat_id IS NULL, m.created_at DESC, m.{} DESC LIMIT 1",
                S::Db::STORED_ORDER
            ));
        Ok(self.fetch_memories(builder).await?.into_iter().next())
    }
}

/// The count a query selecting `COUNT(*) AS n` returns.
async fn count<S: SqlStore>(store: &S, query: QueryBuilder<S::Db>) -> Result<i64> {
    match store.read(query).await?.first() {
        Some(row) => S::Db::int(row, "n"),
        None => Ok(0),
    }
}

/// Counts `times` accesses of the memories `ids` at `at` (see [`SearchRecords::touch`]), in one
/// statement on a pooled connection, in the turn [`SqlStore::access_turn`] says. A recalled
/// fact that had faded is back: in the context again, with the confidence of a fact in doubt
/// (0.5) if it had fallen below that, and its decay starts over.
pub(crate) async fn touch<S: SqlStore>(
    store: &S,
    ids: &[String],
    times: u32,
    at: DateTime<Utc>,
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let _turn = store.access_turn().await;
    let greatest = S::Db::GREATEST;
    let mut update =
        QueryBuilder::<S::Db>::new("UPDATE memories SET access_count = access_count + ");
    update
        .int(i64::from(times))
        .push(format!(
            ", confidence = CASE WHEN faded_at IS NOT NULL THEN {greatest}(confidence, 0.5) \
             ELSE confidence END, faded_at = NULL, \
             last_accessed = {greatest}(COALESCE(last_accessed, 0), "
        ))
        .int(ts(at))
        .push(") WHERE ");
    S::Db::push_one_of(&mut update, "id", ids);
    let mut connection = store.pool().acquire().await?;
    S::Db::execute(&mut connection, update).await?;
    Ok(())
}
