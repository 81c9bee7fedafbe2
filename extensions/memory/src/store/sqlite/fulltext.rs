//! Full-text queries over `memories_fts` (FTS5, BM25): ranked matches and match counts. Which
//! query to run is the search layer's choice (see `crate::search::full_text`).

use async_trait::async_trait;
use sqlx::QueryBuilder;

use super::scope::push_filters;
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::FullTextIndex;
use crate::types::SearchRequest;

#[async_trait]
impl FullTextIndex for MemoryStore {
    async fn fts_best_matches(
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

    async fn fts_all_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let mut builder = QueryBuilder::new(
            "SELECT m.id, -bm25(memories_fts) FROM memories_fts CROSS JOIN memories m \
             ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ",
        );
        builder.push_bind(query.to_owned());
        push_filters(&mut builder, request);
        builder
            .push(" ORDER BY bm25(memories_fts), m.event_time DESC LIMIT ")
            .push_bind(limit as i64);
        Ok(builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?)
    }

    async fn fts_document_count(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM memories_fts")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn fts_match_count(&self, query: &str) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?")
                .bind(query)
                .fetch_one(&self.pool)
                .await?,
        )
    }
}
