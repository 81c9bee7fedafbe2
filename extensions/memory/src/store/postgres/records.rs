//! What a search reads in PostgreSQL: the keys ranking needs. The rest of reading memories, and
//! counting accesses, is written once, in `store/sql/records.rs`.
//!
//! Where the SQLite store breaks a tie of event times by insertion order (`rowid`), this one
//! uses `seq`, the order rows were stored in.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::SearchRecords;
use crate::store::sql::{push_filters, touch};
use crate::store::types::{RankKey, RankRow};
use crate::types::SearchRequest;

#[async_trait]
impl SearchRecords for PostgresStore {
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
            ", m.user_id, m.chat_id, CASE WHEN m.kind = 'episode' THEN m.session_id END, \
             m.origin FROM memories m WHERE m.id = ANY(",
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

    async fn touch(&self, ids: &[String], times: u32, at: DateTime<Utc>) -> Result<()> {
        touch(self, ids, times, at).await
    }
}
