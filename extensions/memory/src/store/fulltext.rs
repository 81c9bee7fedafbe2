//! Full-text search over `memories_fts` (FTS5, BM25).

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::Duration;

use sqlx::QueryBuilder;

use super::scope::push_filters;
use super::{MemoryStore, SessionKey};
use crate::error::Result;
use crate::fts::{match_any, match_rare_or_all_common, query_terms};
use crate::types::{Memory, MemoryKind, SearchRequest};

/// How long cached corpus statistics are trusted: they steer which terms and entities are
/// worth searching, where a few minutes' drift changes nothing.
pub(super) const STATS_TTL: Duration = Duration::from_secs(120);

/// Most cached term frequencies; the cache starts over beyond this.
pub(super) const STATS_MAX_TERMS: usize = 20_000;

/// Matches worth ranking in one query; a query matching more is narrowed first (see
/// [`MemoryStore::search_fts`]).
pub(super) const RANK_BUDGET: i64 = 2_000;

/// The newest links of an entity read when looking for memories that also name another of
/// the query's entities (see [`MemoryStore::search_entities`]).
pub(super) const CO_MENTION_SCAN: i64 = 4_096;

/// Corpus statistics cached between searches.
#[derive(Debug, Default)]
pub(super) struct TermStats {
    pub(super) documents: Option<(i64, std::time::Instant)>,
    pub(super) linked_memories: Option<(i64, std::time::Instant)>,
    pub(super) frequencies: HashMap<String, (i64, std::time::Instant)>,
    /// Memories linked to each entity, by entity id.
    pub(super) entity_links: HashMap<String, (i64, std::time::Instant)>,
}

pub(super) fn fresh(entry: Option<&(i64, std::time::Instant)>) -> Option<i64> {
    entry
        .filter(|(_, at)| at.elapsed() < STATS_TTL)
        .map(|(value, _)| *value)
}

impl MemoryStore {
    /// Ids ranked by BM25 for `request.query`, best first, each with its BM25 relevance
    /// (FTS5's `bm25()` negated, so higher is better and every match is above 0).
    ///
    /// Ranking costs about a microsecond per matching memory, so when the query's words
    /// match more than twice [`RANK_BUDGET`] memories, a first pass ranks only the memories
    /// that have a rare word (in at most `RANK_BUDGET` memories) or all the common words
    /// together: a memory with a single common word has the least BM25 weight anyway. Only if
    /// that finds fewer than `limit` does the plain "any word" query run.
    ///
    /// FTS5 ranks its best matches before the request's filters join `memories`; only when too
    /// few pass are all matches ranked with the filters.
    ///
    /// # Errors
    /// The database fails (a user's query text never causes one: it is quoted term by term).
    pub async fn search_fts(
        &self,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        let terms = query_terms(&request.query);
        let Some(any_word) = match_any(&terms) else {
            return Ok(Vec::new());
        };
        if terms.len() > 1 && self.document_count().await? > RANK_BUDGET {
            let mut rare = Vec::new();
            let mut common = Vec::new();
            let mut matches = 0;
            for term in &terms {
                let frequency = self.term_frequency(term).await?;
                matches += frequency;
                if frequency <= RANK_BUDGET {
                    rare.push(term.clone());
                } else {
                    common.push(term.clone());
                }
            }
            if matches > 2 * RANK_BUDGET {
                if let Some(narrow) = match_rare_or_all_common(&rare, &common) {
                    let ids = self.ranked_fts(&narrow, request, limit).await?;
                    if ids.len() >= limit {
                        return Ok(ids);
                    }
                }
            }
        }
        let ids = self.ranked_fts(&any_word, request, limit).await?;
        if ids.len() >= limit {
            return Ok(ids);
        }
        let mut builder = QueryBuilder::new(
            "SELECT m.id, -bm25(memories_fts) FROM memories_fts CROSS JOIN memories m \
             ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ",
        );
        builder.push_bind(any_word);
        push_filters(&mut builder, request);
        builder
            .push(" ORDER BY bm25(memories_fts), m.event_time DESC LIMIT ")
            .push_bind(limit as i64);
        Ok(builder
            .build_query_as::<(String, f64)>()
            .fetch_all(&self.pool)
            .await?)
    }

    /// The FTS5 query's best matches (a few times `limit`), then the request's filters.
    pub(super) async fn ranked_fts(
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

    pub(super) fn cached_stats(&self) -> std::sync::MutexGuard<'_, TermStats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rows in the full-text index (cached).
    pub(super) async fn document_count(&self) -> Result<i64> {
        if let Some(count) = fresh(self.cached_stats().documents.as_ref()) {
            return Ok(count);
        }
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories_fts")
            .fetch_one(&self.pool)
            .await?;
        self.cached_stats().documents = Some((count, std::time::Instant::now()));
        Ok(count)
    }

    /// Memories whose text contains `term` (cached).
    pub(super) async fn term_frequency(&self, term: &str) -> Result<i64> {
        if let Some(count) = fresh(self.cached_stats().frequencies.get(term)) {
            return Ok(count);
        }
        let Some(query) = match_any(&[term.to_owned()]) else {
            return Ok(0);
        };
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?")
                .bind(query)
                .fetch_one(&self.pool)
                .await?;
        let mut stats = self.cached_stats();
        if stats.frequencies.len() >= STATS_MAX_TERMS {
            stats.frequencies.clear();
        }
        stats
            .frequencies
            .insert(term.to_owned(), (count, std::time::Instant::now()));
        Ok(count)
    }

    /// Active facts visible in `session`'s scope (its user's, in its chat) sharing words with
    /// `content`, best BM25 first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn similar_facts(
        &self,
        session: &SessionKey,
        content: &str,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let request = SearchRequest {
            query: content.to_owned(),
            user_id: Some(session.user_id.clone()),
            chat_id: session.chat_id.clone(),
            kinds: vec![MemoryKind::Fact],
            limit,
            ..SearchRequest::default()
        };
        let ids: Vec<String> = self
            .search_fts(&request, limit)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let mut found = self.load_filtered(&ids, &request).await?;
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }
}
