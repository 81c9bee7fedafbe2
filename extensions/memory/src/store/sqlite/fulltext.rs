//! Full-text queries over `memories_fts` (FTS5, BM25): ranked matches and match counts. Which
//! query to run is the search layer's choice (see `crate::search::full_text`).
//!
//! Every query matches within the request's scope (`scope::IndexScope`): a personal search
//! within the owner's range of index row ids, which FTS5 seeks to in each word's list, so it
//! reads the asker's matches, not every user's; a chat's search within its scope tokens. BM25 reads the text column alone, with the scope's own figures (`scope_bm25()`, see
//! `scope_rank.rs` and `text_statistics.rs`): one user's ranking is the same whatever other
//! users' memories the store holds. A search over the whole store ranks by FTS5's `bm25()`.

use async_trait::async_trait;
use sqlx::{QueryBuilder, Sqlite};

use super::packed::{exact_real, fetch_packed, packed_rows, Real};
use super::scope::index_scope;
use super::MemoryStore;
use crate::error::Result;
use crate::store::backend::FullTextIndex;
use crate::store::sql::push_filters;
use crate::store::{FirstPass, TextScope};
use crate::types::SearchRequest;

/// BM25 over the whole index (a search for no owner and no chat): the scope column (see
/// `scope::IndexScope`) weighs 0 in the score, though its tokens count in a row's length.
const TEXT_BM25: &str = "bm25(memories_fts, 1.0, 0.0)";

/// Appends a match's BM25 rank (lower is better, as FTS5's `bm25()`): with a scope's figures
/// (`arguments`, see `text_statistics::ScopedText`), or over the whole index.
fn push_rank(builder: &mut QueryBuilder<Sqlite>, arguments: Option<&[f64]>) {
    match arguments {
        Some(arguments) => {
            builder.push("scope_bm25(memories_fts");
            for argument in arguments {
                builder.push(", ").push_bind(*argument);
            }
            builder.push(")");
        }
        None => {
            builder.push(TEXT_BM25);
        }
    }
}

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
        let scope = TextScope::of(request);
        let text = self.scoped_text(query, scope).await?;
        let mut builder = ranked_matches("-");
        push_rank(&mut builder, text.rank.as_deref());
        builder.push(
            " AS relevance FROM memories_fts CROSS JOIN memories m \
             ON m.fts_rowid = memories_fts.rowid WHERE ",
        );
        text.push_match(&mut builder, query);
        self.filtered_best(builder, request, limit).await
    }

    /// Counted once with the ranking's own figures (`text_statistics.rs`), and cached there.
    async fn fts_document_count(&self, scope: TextScope<'_>) -> Result<i64> {
        let count = self.count_in_scope(None, &index_scope(scope)).await?;
        Ok(count as i64)
    }

    /// Counted once with the ranking's own figures (`text_statistics.rs`), and cached there.
    async fn fts_match_count(&self, query: &str, scope: TextScope<'_>) -> Result<i64> {
        let count = self
            .count_in_scope(Some(query), &index_scope(scope))
            .await?;
        Ok(count as i64)
    }
}

impl MemoryStore {
    /// The best matches of `query` within the request's scope (a few times `limit`), then the
    /// request's filters. With a first pass, a match that has none of its rare words is ranked
    /// only if it is among the `newest_kept` highest index row ids of its common words' matches
    /// in that scope: the others are dropped before `bm25()` runs. Row ids follow the order
    /// memories were stored in within each owner (migration 0019): in a personal scope these
    /// are the newest; in a chat of several owners, the newest of the owners numbered last.
    async fn best_matches(
        &self,
        query: &str,
        pass: Option<&FirstPass>,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let depth = (limit * 4).max(64);
        let scope = TextScope::of(request);
        let text = self.scoped_text(query, scope).await?;
        let mut builder =
            ranked_matches("-best.score AS relevance FROM (SELECT rowid AS fts_row, ");
        push_rank(&mut builder, text.rank.as_deref());
        builder.push(" AS score FROM memories_fts WHERE ");
        text.push_match(&mut builder, query);
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
                " AND ({rowid} >= COALESCE((SELECT rowid FROM memories_fts WHERE "
            ));
            text.push_match(&mut builder, &pass.common);
            builder
                .push(" ORDER BY rowid DESC LIMIT 1 OFFSET ")
                .push_bind(i64::try_from(pass.newest_kept.saturating_sub(1)).unwrap_or(i64::MAX))
                .push("), 0)");
            if let Some(rare) = &pass.rare {
                builder.push(" OR +rowid IN (SELECT rowid FROM memories_fts WHERE ");
                text.push_match(&mut builder, rare);
                builder.push(")");
            }
            builder.push(")");
        }
        builder
            .push(" ORDER BY score LIMIT ")
            .push_bind(depth as i64);
        builder.push(") best CROSS JOIN memories m ON m.fts_rowid = best.fts_row WHERE 1 = 1");
        self.filtered_best(builder, request, limit).await
    }

    /// Runs a full-text query that [`ranked_matches`] began and that ends in a `WHERE` on
    /// `memories m`: adds the request's filters, then keeps the `limit` best in
    /// [`BEST_FIRST`] order.
    async fn filtered_best(
        &self,
        mut builder: QueryBuilder<Sqlite>,
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
fn ranked_matches(select: &str) -> QueryBuilder<Sqlite> {
    let columns = format!("id, {}", exact_real("relevance"));
    QueryBuilder::new(format!(
        "SELECT {} FROM (SELECT m.id AS id, m.event_time AS event_time, {select}",
        packed_rows(&columns, BEST_FIRST),
    ))
}
