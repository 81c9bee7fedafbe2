//! What a search reads in SQLite: the keys ranking needs, read packed. The rest of reading
//! memories, and counting accesses, is written once, in `store/sql/records.rs`.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::packed::{exact_real, fetch_packed, packed_rows, Real};
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::SearchRecords;
use crate::store::sql::{push_filters, touch, Bind};
use crate::store::types::{RankColumns, RankKey};
use crate::types::SearchRequest;

#[async_trait]
impl SearchRecords for MemoryStore {
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
        columns.push_str(
            ", m.user_id, m.chat_id, CASE WHEN m.kind = 'episode' THEN m.session_id END, m.origin",
        );
        let mut builder = QueryBuilder::new(format!(
            "SELECT {} FROM memories m WHERE m.id IN ",
            packed_rows(&columns, "")
        ));
        builder.text_list(ids);
        push_filters(&mut builder, request);
        let rows: Vec<RankColumns<Real>> = fetch_packed(builder, &self.pool).await?;
        Ok(rows
            .into_iter()
            .map(
                |(
                    id,
                    Real(confidence),
                    event_time,
                    previous,
                    next,
                    user,
                    chat,
                    session,
                    origin,
                )| {
                    RankKey::from_row((
                        id, confidence, event_time, previous, next, user, chat, session, origin,
                    ))
                },
            )
            .collect())
    }

    async fn touch(&self, ids: &[String], times: u32, at: DateTime<Utc>) -> Result<()> {
        touch(self, ids, times, at).await
    }
}
