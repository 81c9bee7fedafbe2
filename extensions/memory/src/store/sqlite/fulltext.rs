//! Full-text queries over `memories_fts` (FTS5, BM25): ranked matches and match counts. Which
//! query to run is the search layer's choice (see `crate::search::full_text`).

use async_trait::async_trait;
use sqlx::{QueryBuilder, Sqlite};

use super::packed::{exact_real, fetch_packed, packed_rows, Real};
use super::scope::push_filters;
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::FullTextIndex;
use crate::store::FirstPass;
use crate::types::SearchRequest;

#[async_trait]
impl FullTextIndex for MemoryStore {
    async fn fts_best_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        self.best_matches(query, None, request, limit).await
    }

    async fn fts_first_pass_matches(
        &self,
        pass: &FirstPass,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        self.best_matches(&pass.query, Some(pass), request, limit)
            .await
    }

    async fn fts_all_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let mut builder = ranked_matches(
            "-bm25(memories_fts) AS relevance FROM memories_fts CROSS JOIN memories m \
             ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ",
        );
        builder.push_bind(query.to_owned());
        self.filtered_best(builder, request, limit).await
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

impl MemoryStore {
    /// The best matches of `query` (a few times `limit`), then the request's filters. With a
    /// first pass, a match that has none of its rare words is ranked only if it is among the
    /// `newest_kept` highest rowids of its common words' matches: the others are dropped
    /// before `bm25()` runs.
    async fn best_matches(
        &self,
        query: &str,
        pass: Option<&FirstPass>,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let depth = (limit * 4).max(64);
        let mut builder = ranked_matches(
            "-best.score AS relevance FROM (SELECT rowid AS fts_row, bm25(memories_fts) AS score \
             FROM memories_fts WHERE memories_fts MATCH ",
        );
        builder.push_bind(query.to_owned());
        if let Some(pass) = pass {
            // The cut-off is the `newest_kept`-th highest rowid among the common words'
            // matches; a store with fewer has none, and keeps them all. With rare words, `+`
            // keeps the test out of FTS5's plan (an OR of two tests cannot go in): FTS5 walks
            // every match, and SQLite drops those that fail before computing the rank. Without
            // them, FTS5 takes the lower bound on rowid itself and starts there.
            let rowid = if pass.rare.is_some() {
                "+rowid"
            } else {
                "rowid"
            };
            builder.push(format!(
                " AND ({rowid} >= COALESCE((SELECT rowid FROM memories_fts \
                 WHERE memories_fts MATCH "
            ));
            builder.push_bind(pass.common.clone());
            builder
                .push(" ORDER BY rowid DESC LIMIT 1 OFFSET ")
                .push_bind(i64::try_from(pass.newest_kept.saturating_sub(1)).unwrap_or(i64::MAX))
                .push("), 0)");
            if let Some(rare) = &pass.rare {
                builder.push(
                    " OR +rowid IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ",
                );
                builder.push_bind(rare.clone()).push(")");
            }
            builder.push(")");
        }
        builder
            .push(" ORDER BY score LIMIT ")
            .push_bind(depth as i64);
        builder.push(") best CROSS JOIN memories m ON m.rowid = best.fts_row WHERE 1 = 1");
        self.filtered_best(builder, request, limit).await
    }

    /// Runs a full-text query that [`ranked_matches`] began and that ends in a `WHERE` on
    /// `memories m`: adds the request's filters, then keeps the `limit` best in
    /// [`BEST_FIRST`] order.
    async fn filtered_best(
        &self,
        mut builder: QueryBuilder<'_, Sqlite>,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        push_filters(&mut builder, request);
        builder
            .push(format!(" ORDER BY {BEST_FIRST} LIMIT "))
            .push_bind(limit as i64)
            .push(")");
        let rows: Vec<(String, Real)> = fetch_packed(builder, &self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|(id, Real(relevance))| (id, relevance))
            .collect())
    }
}

/// The order of full-text matches: the most relevant first, the newest first among equals, and
/// by id among those (so that equal matches come in the same order every time).
const BEST_FIRST: &str = "relevance DESC, event_time DESC, id";

/// The start of a full-text query: `select` names the relevance of each match (`relevance`,
/// higher is better) and goes on to its `FROM`. The rows, `m.id` and relevance, come back packed
/// (see `packed.rs`) in [`BEST_FIRST`] order.
fn ranked_matches(select: &str) -> QueryBuilder<'static, Sqlite> {
    let columns = format!("id, {}", exact_real("relevance"));
    QueryBuilder::new(format!(
        "SELECT {} FROM (SELECT m.id AS id, m.event_time AS event_time, {select}",
        packed_rows(&columns, BEST_FIRST),
    ))
}
