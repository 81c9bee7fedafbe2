//! The full-text candidate list: which FTS5 query to rank for a search, narrowing a query
//! whose words match too many memories to rank them all.

use super::fts_query::{match_any, match_rare_or_all_common, query_terms};
use super::stats::CorpusStats;
use crate::error::Result;
use crate::store::MemoryBackend;
use crate::types::{Memory, MemoryKind, SearchRequest, SessionKey};

/// Matches worth ranking in one query; a query matching more is narrowed first (see
/// [`search_fts`]).
const RANK_BUDGET: i64 = 2_000;

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
pub(crate) async fn search_fts(
    store: &dyn MemoryBackend,
    stats: &CorpusStats,
    request: &SearchRequest,
    limit: usize,
) -> Result<Vec<(String, f64)>> {
    let terms = query_terms(&request.query);
    let Some(any_word) = match_any(&terms) else {
        return Ok(Vec::new());
    };
    if terms.len() > 1 && stats.document_count(store).await? > RANK_BUDGET {
        let mut rare = Vec::new();
        let mut common = Vec::new();
        let mut matches = 0;
        for term in &terms {
            let frequency = stats.term_frequency(store, term).await?;
            matches += frequency;
            if frequency <= RANK_BUDGET {
                rare.push(term.clone());
            } else {
                common.push(term.clone());
            }
        }
        if matches > 2 * RANK_BUDGET {
            if let Some(narrow) = match_rare_or_all_common(&rare, &common) {
                let ids = store.fts_best_matches(&narrow, request, limit).await?;
                if ids.len() >= limit {
                    return Ok(ids);
                }
            }
        }
    }
    let ids = store.fts_best_matches(&any_word, request, limit).await?;
    if ids.len() >= limit {
        return Ok(ids);
    }
    store.fts_all_matches(&any_word, request, limit).await
}

/// Active facts visible in `session`'s scope (its user's, in its chat) sharing words with
/// `content`, best BM25 first.
///
/// # Errors
/// The database fails.
pub(crate) async fn similar_facts(
    store: &dyn MemoryBackend,
    stats: &CorpusStats,
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
    let ids: Vec<String> = search_fts(store, stats, &request, limit)
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut found = store.load_filtered(&ids, &request).await?;
    Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
}
