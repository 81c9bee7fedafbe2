//! The figures `scope_bm25()` ranks a scope's full-text matches by (see `scope_rank.rs`): how
//! many memories the scope holds, their total length in tokens, and how many of them hold each
//! phrase of the query. Each is counted by the index within the scope (the scope's token AND the
//! phrase), so it costs what the scope's own matches cost, and is cached for two minutes (a
//! count of 0 is not): a ranking may lag that long behind new memories, as the search layer's
//! `CorpusStats` do. A removal in this process clears them all; in another process they
//! expire. Whether a user's scope is the whole store is read fresh every time.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::scope::{scope_condition, within};
use super::MemoryStore;
use crate::error::Result;
use crate::store::TextScope;

/// How long a figure is trusted.
const FIGURES_TTL: Duration = Duration::from_secs(120);
/// Most figures kept; the cache starts over beyond this.
const MOST_FIGURES: usize = 50_000;
/// The memories an FTS5 query matches.
pub(super) const COUNT_MATCHES: &str =
    "SELECT CAST(COUNT(*) AS REAL) FROM memories_fts WHERE memories_fts MATCH ?";
/// The total text length, in tokens, of the memories an FTS5 query matches. FTS5 answers an
/// auxiliary function only on its own query's rows, not inside an aggregate: the lengths are
/// read first.
const TOTAL_LENGTH: &str = "WITH lengths AS MATERIALIZED (SELECT text_length(memories_fts) \
     AS tokens FROM memories_fts WHERE memories_fts MATCH ?) SELECT TOTAL(tokens) FROM lengths";

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

    /// A count, from the cache while it is fresh, else by `sql` with `bound` (the FTS5 query),
    /// kept under both. A count of 0 is not kept: a new scope's first memories count at once.
    pub(super) async fn figure(&self, sql: &'static str, bound: Option<String>) -> Result<f64> {
        let key = format!("{sql}\n{}", bound.as_deref().unwrap_or_default());
        if let Some((value, at)) = self.text_statistics.figures().get(&key) {
            if at.elapsed() < FIGURES_TTL {
                return Ok(*value);
            }
        }
        let mut query = sqlx::query_scalar::<_, f64>(sql);
        if let Some(bound) = bound {
            query = query.bind(bound);
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

    /// How to match and rank the text query `query` within `scope` (see [`ScopedText`]).
    ///
    /// # Errors
    /// The database fails.
    pub(super) async fn scoped_text(
        &self,
        query: &str,
        scope: TextScope<'_>,
    ) -> Result<ScopedText> {
        let Some(condition) = scope_condition(scope) else {
            return Ok(ScopedText {
                condition: None,
                rank: None,
            });
        };
        // A scope that holds every memory (a store of one user) matches without its condition,
        // which would only make FTS5 walk the scope's whole list beside the query's, and ranks
        // by FTS5's own live totals.
        let whole = match (scope.user_id, scope.chat_id) {
            (Some(user), None) => self.holds_only(user).await?,
            _ => false,
        };
        let (documents, tokens) = if whole {
            (0.0, -1.0)
        } else {
            (
                self.figure(COUNT_MATCHES, Some(condition.clone())).await?,
                self.figure(TOTAL_LENGTH, Some(condition.clone())).await?,
            )
        };
        let kept = (!whole).then_some(condition);
        let mut arguments = vec![documents, tokens];
        if let Some(condition) = &kept {
            arguments.extend(phrases(condition).iter().map(|_| 0.0));
        }
        for phrase in phrases(query) {
            let quoted = format!("\"{}\"", phrase.replace('"', "\"\""));
            let matching = within(kept.as_deref(), &quoted);
            arguments.push(self.figure(COUNT_MATCHES, Some(matching)).await?);
        }
        Ok(ScopedText {
            condition: kept,
            rank: Some(arguments),
        })
    }
}

/// How a text query is matched and ranked within a scope.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ScopedText {
    /// The scope's condition on `fts_scope` (`scope::scope_condition`), or `None` when the
    /// scope is the whole index.
    condition: Option<String>,
    /// The arguments `scope_bm25(memories_fts, …)` takes after the table: the scope's memories,
    /// their tokens (-1 when the scope holds every memory: FTS5's own row count and total are
    /// theirs, and the count before is not read), and per
    /// phrase of the match, in order, the scope's memories holding it (0 for the condition's
    /// tokens, which are in the other column). `None` for a search of the whole store, ranked
    /// by `bm25()`.
    pub(super) rank: Option<Vec<f64>>,
}

impl ScopedText {
    /// The FTS5 query of `text` (a query over the memories' text) within the scope's rows.
    /// Its words are not confined to the text column, since a column filter makes FTS5 read
    /// every match's positions: a word that spells a scope token (`u…x` in hex) matches the
    /// scope's own rows by that token, and `scope_bm25` gives them 0, so it finds nothing the
    /// asker may not see.
    pub(super) fn matching(&self, text: &str) -> String {
        within(self.condition.as_deref(), text)
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
