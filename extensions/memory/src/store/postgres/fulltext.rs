//! Full-text queries over `memories.search_text` (a generated English tsvector with a GIN
//! index): ranked matches and match counts. The search layer writes its queries in FTS5's
//! syntax; [`tsquery`] turns them into tsquery text, which `to_tsquery('mnemo_english', …)` stems
//! as the column was stemmed. Which query to run is the search layer's choice (see
//! `crate::search::full_text`).
//!
//! Relevance is `ts_rank(search_text, query, 1)`: for the search layer's `OR` queries it sums,
//! per query word, the word's occurrences with diminishing returns, and divides by the log of
//! the memory's length; so higher is better, a memory sharing more of the query's words ranks
//! higher, and every match is above 0 (PostgreSQL floors it at 1e-20). The search layer uses the
//! score as a share of the best match's, as it does FTS5's BM25. Unlike BM25 it has no inverse
//! document frequency: a rare word counts as much as a common one.

use async_trait::async_trait;
use sqlx::QueryBuilder;

use super::scope::push_text_scope;
use super::text_search::{tsquery, CONFIG};
use super::PostgresStore;
use crate::error::Result;
use crate::store::backend::FullTextIndex;
use crate::store::sql::push_filters;
use crate::store::TextScope;
use crate::types::SearchRequest;

/// The tsquery expression of a bound query text.
fn query_expression() -> String {
    format!("to_tsquery('{CONFIG}', ")
}

#[async_trait]
impl FullTextIndex for PostgresStore {
    async fn fts_best_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let Some(query) = tsquery(query) else {
            return Ok(Vec::new());
        };
        let depth = i64::try_from((limit.saturating_mul(4)).max(64)).unwrap_or(i64::MAX);
        let to_query = query_expression();
        let mut builder = QueryBuilder::new(format!(
            "SELECT m.id, best.score FROM (SELECT f.id, \
             ts_rank(f.search_text, {to_query}"
        ));
        builder.push_bind(query.clone());
        builder.push(format!(
            "), 1)::double precision AS score, f.event_time FROM memories f \
             WHERE f.search_text @@ {to_query}"
        ));
        builder.push_bind(query);
        builder.push(")");
        // The best matches within the request's scope, then its filters.
        push_text_scope(&mut builder, "f", TextScope::of(request));
        builder
            .push(" ORDER BY score DESC, f.event_time DESC LIMIT ")
            .push_bind(depth);
        builder.push(") best JOIN memories m ON m.id = best.id WHERE 1 = 1");
        push_filters(&mut builder, request);
        builder
            .push(" ORDER BY best.score DESC, m.event_time DESC, m.id LIMIT ")
            .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
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
        let Some(query) = tsquery(query) else {
            return Ok(Vec::new());
        };
        let to_query = query_expression();
        let mut builder =
            QueryBuilder::new(format!("SELECT m.id, ts_rank(m.search_text, {to_query}"));
        builder.push_bind(query.clone());
        builder.push(format!(
            "), 1)::double precision AS score FROM memories m \
             WHERE m.search_text @@ {to_query}"
        ));
        builder.push_bind(query);
        builder.push(")");
        push_filters(&mut builder, request);
        builder
            .push(" ORDER BY score DESC, m.event_time DESC, m.id LIMIT ")
            .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
        Ok(builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?)
    }

    /// Every memory in scope, as FTS5's index holds a row for every memory (active or not).
    async fn fts_document_count(&self, scope: TextScope<'_>) -> Result<i64> {
        let mut builder = QueryBuilder::new("SELECT COUNT(*) FROM memories f WHERE 1 = 1");
        push_text_scope(&mut builder, "f", scope);
        Ok(builder.build_query_scalar().fetch_one(&self.pool).await?)
    }

    async fn fts_match_count(&self, query: &str, scope: TextScope<'_>) -> Result<i64> {
        let Some(query) = tsquery(query) else {
            return Ok(0);
        };
        let mut builder = QueryBuilder::new(format!(
            "SELECT COUNT(*) FROM memories f WHERE f.search_text @@ {}",
            query_expression()
        ));
        builder.push_bind(query).push(")");
        push_text_scope(&mut builder, "f", scope);
        Ok(builder.build_query_scalar().fetch_one(&self.pool).await?)
    }
}
