//! The figures `scope_bm25()` ranks a scope's full-text matches by (see `scope_rank.rs`): how
//! many memories the scope holds, their total length in tokens, and how many of them hold each
//! phrase of the query. Each is counted by the index within the scope (an owner's range of row
//! ids, or a chat's scope token, AND the phrase), so it costs what the scope's own matches
//! cost, and is cached for two minutes (a count of 0 is not): a ranking may lag that long
//! behind new memories, as the search layer's `CorpusStats` do. A removal in this process
//! clears them all; in another process they expire. Whether a user's scope is the whole store
//! is read fresh every time.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::scope::{index_scope, owner_condition, owner_rows, within, IndexScope};
use super::MemoryStore;
use crate::error::Result;
use crate::store::TextScope;

/// How long a figure is trusted.
const FIGURES_TTL: Duration = Duration::from_secs(120);
/// Most figures kept; the cache starts over beyond this.
const MOST_FIGURES: usize = 50_000;
/// The memories an FTS5 query (`?1`) matches.
const COUNT_MATCHES: &str =
    "SELECT CAST(COUNT(*) AS REAL) FROM memories_fts WHERE memories_fts MATCH ?1";
/// The memories of the owner `?1` an FTS5 query (`?2`) matches.
const COUNT_OWNER_MATCHES: &str = concat!(
    "SELECT CAST(COUNT(*) AS REAL) FROM memories_fts WHERE memories_fts MATCH ?2 AND rowid ",
    owner_rows!(1)
);
/// The memories of the owner `?1`.
pub(super) const COUNT_OWNER_ROWS: &str = concat!(
    "SELECT CAST(COUNT(*) AS REAL) FROM memories WHERE fts_rowid ",
    owner_rows!(1)
);
/// The total text length, in tokens, of the memories an FTS5 query (`?1`) matches. FTS5
/// answers an auxiliary function only on its own query's rows, not inside an aggregate: the
/// lengths are read first.
const TOTAL_LENGTH: &str = "WITH lengths AS MATERIALIZED (SELECT text_length(memories_fts) \
     AS tokens FROM memories_fts WHERE memories_fts MATCH ?1) SELECT TOTAL(tokens) FROM lengths";
/// Cached counts by what they count (see [`MemoryStore::scope_rank_arguments`]).
#[derive(Debug, Default)]
pub(super) struct TextStatistics {
    figures: Mutex<HashMap<String, (f64, Instant)>>,
}

impl TextStatistics {
    fn figures(&self) -> MutexGuard<'_, HashMap<String, (f64, Instant)>> {
        self.figures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets every figure.
    pub(super) fn clear(&self) {
        self.figures().clear();
    }
}

/// The phrases of an FTS5 query as the search layer writes them (`"…"`, a quote doubled
/// inside), in their order in the query, which is the order FTS5 numbers them in.
pub(super) fn phrases(query: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut characters = query.chars().peekable();
    while let Some(character) = characters.next() {
        if character != '"' {
            continue;
        }
        let mut phrase = String::new();
        while let Some(inside) = characters.next() {
            if inside == '"' {
                if characters.peek() == Some(&'"') {
                    characters.next();
                    phrase.push('"');
                    continue;
                }
                break;
            }
            phrase.push(inside);
        }
        found.push(phrase);
    }
    found
}

impl MemoryStore {
    /// Whether every row of the store is `user`'s, read fresh (three index probes): a cached
    /// answer could outlive another user's first memory. An empty store is no one's.
    async fn holds_only(&self, user: &str) -> Result<bool> {
        Ok(sqlx::query_scalar::<_, bool>(
            "SELECT COALESCE((SELECT MIN(user_id) FROM memories) = ?1 \
             AND (SELECT MAX(user_id) FROM memories) = ?1 \
             AND NOT EXISTS (SELECT 1 FROM memories WHERE user_id IS NULL), 0)",
        )
        .bind(user)
        .fetch_one(&self.pool)
        .await?)
    }

    /// A count, from the cache while it is fresh, else by `sql` with `bound` (its numbered
    /// parameters), kept under both. A count of 0 is not kept: a new scope's first memories
    /// count at once.
    pub(super) async fn figure(&self, sql: &'static str, bound: &[&str]) -> Result<f64> {
        let key = format!("{sql}\n{}", bound.join("\n"));
        if let Some((value, at)) = self.text_statistics.figures().get(&key) {
            if at.elapsed() < FIGURES_TTL {
                return Ok(*value);
            }
        }
        let mut query = sqlx::query_scalar::<_, f64>(sql);
        for value in bound {
            query = query.bind(*value);
        }
        let value = query.fetch_one(&self.pool).await?;
        if value == 0.0 {
            return Ok(value);
        }
        let mut figures = self.text_statistics.figures();
        if figures.len() >= MOST_FIGURES {
            figures.clear();
        }
        figures.insert(key, (value, Instant::now()));
        Ok(value)
    }

    /// The memories of `scope` that FTS5 query `query` matches (all of them for none).
    pub(super) async fn count_in_scope(
        &self,
        query: Option<&str>,
        scope: &IndexScope,
    ) -> Result<f64> {
        match (scope, query) {
            (IndexScope::Whole, None) => {
                self.figure("SELECT CAST(COUNT(*) AS REAL) FROM memories_fts", &[])
                    .await
            }
            (IndexScope::Whole, Some(query)) => self.figure(COUNT_MATCHES, &[query]).await,
            (IndexScope::Tokens(condition), query) => {
                let matching =
                    query.map_or_else(|| condition.clone(), |query| within(Some(condition), query));
                self.figure(COUNT_MATCHES, &[&matching]).await
            }
            (IndexScope::Owner(owner), None) => self.figure(COUNT_OWNER_ROWS, &[owner]).await,
            (IndexScope::Owner(owner), Some(query)) => {
                self.figure(COUNT_OWNER_MATCHES, &[owner, query]).await
            }
        }
    }

    /// How to match and rank the text query `query` within `scope` (see [`ScopedText`]).
    ///
    /// # Errors
    /// The database fails.
    pub(super) async fn scoped_text(
        &self,
        query: &str,
        scope: TextScope<'_>,
    ) -> Result<ScopedText> {
        let rows = index_scope(scope);
        if rows == IndexScope::Whole {
            return Ok(ScopedText { rows, rank: None });
        }
        // A scope that holds every memory (a store of one user) matches without its condition,
        // which would only make FTS5 read the scope's bounds beside the query's, and ranks by
        // FTS5's own live totals.
        let whole = match (scope.user_id, scope.chat_id) {
            (Some(user), None) => self.holds_only(user).await?,
            _ => false,
        };
        let rows = if whole { IndexScope::Whole } else { rows };
        let mut arguments = match &rows {
            IndexScope::Whole => vec![0.0, -1.0],
            // An auxiliary function reads 0 on a scan of row ids: the owner's rows are matched
            // by their scope token, whose list holds theirs alone.
            IndexScope::Owner(owner) => vec![
                self.count_in_scope(None, &rows).await?,
                self.figure(TOTAL_LENGTH, &[&owner_condition(owner)])
                    .await?,
            ],
            IndexScope::Tokens(condition) => {
                let mut arguments = vec![
                    self.count_in_scope(None, &rows).await?,
                    self.figure(TOTAL_LENGTH, &[condition]).await?,
                ];
                // The condition's tokens are phrases of the match too, in the other column: 0.
                arguments.extend(phrases(condition).iter().map(|_| 0.0));
                arguments
            }
        };
        for phrase in phrases(query) {
            let quoted = format!("\"{}\"", phrase.replace('"', "\"\""));
            arguments.push(self.count_in_scope(Some(&quoted), &rows).await?);
        }
        Ok(ScopedText {
            rows,
            rank: Some(arguments),
        })
    }
}

/// How a text query is matched and ranked within a scope.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ScopedText {
    /// The index rows the scope keeps ([`IndexScope::Whole`] also for a scope that holds
    /// every memory).
    rows: IndexScope,
    /// The arguments `scope_bm25(memories_fts, …)` takes after the table: the scope's memories,
    /// their tokens (-1 when the scope holds every memory: FTS5's own row count and total are
    /// theirs, and the count before is not read), and per phrase of the match, in order, the
    /// scope's memories holding it (0 for a chat condition's tokens, which are in the other
    /// column). `None` for a search of the whole store, ranked by `bm25()`.
    pub(super) rank: Option<Vec<f64>>,
}

impl ScopedText {
    /// Appends `memories_fts MATCH <text>` within the scope's rows (see
    /// [`IndexScope::push_match`]). The words are not confined to the text column, since a
    /// column filter makes FTS5 read every match's positions: a word that spells a scope token
    /// (`u…x` in hex) matches rows by that token, and `scope_bm25` gives them 0, and the
    /// visibility rule drops what the asker may not see.
    pub(super) fn push_match(&self, builder: &mut sqlx::QueryBuilder<sqlx::Sqlite>, text: &str) {
        self.rows.push_match(builder, text);
    }
}

#[cfg(test)]
mod tests {
    use super::phrases;

    #[test]
    fn phrases_come_in_query_order_with_their_quotes_undone() {
        assert_eq!(
            phrases("fts_scope : (\"u61x\") AND content : (\"zebra\" OR (\"say \"\"hi\"\"\" AND \"b\"))"),
            ["u61x", "zebra", "say \"hi\"", "b"]
        );
        assert!(phrases("no phrase").is_empty());
    }
}
