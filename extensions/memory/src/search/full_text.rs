//! The full-text candidate list: which FTS5 query to rank for a search, narrowing a query
//! whose words match too many memories to rank them all.

use super::fts_query::{match_all, match_any, match_rare_or_all_common, query_terms};
use super::source::SearchSource;
use super::stats::CorpusStats;
use crate::error::Result;
use crate::store::{FirstPass, TextScope};
use crate::types::{Memory, MemoryKind, SearchRequest, SessionKey};

/// Matches worth ranking in one query; a query matching more is narrowed first (see
/// [`search_fts`]).
const RANK_BUDGET: i64 = 2_000;

/// Ids ranked by BM25 for `request.query`, best first, each with its BM25 relevance
/// (FTS5's `bm25()` negated, so higher is better and every match is above 0).
///
/// The index matches within the request's scope (its owner's memories, in a chat also the
/// chat's shared ones), and every count below is of that scope: one user's search costs and
/// finds the same whatever other users' memories the store holds.
///
/// In a large index (more than [`RANK_BUDGET`] memories in scope), a query of several words is first
/// run without the words found in half the memories or more: FTS5's BM25 gives them no weight
/// (it clamps their IDF, zero or negative, to almost 0), yet ranking reads each one's whole
/// posting list, and every memory holding one is a match to rank. They are searched too only
/// when the other words find fewer than `limit` memories (or when every word is that common).
/// PostgreSQL's `ts_rank` has no IDF and would have weighed them like any other word; there
/// the results change.
///
/// Ranking costs about a microsecond per matching memory, so when the query's words
/// match more than twice [`RANK_BUDGET`] memories, a first pass ranks only the memories
/// that have a rare word (in at most `RANK_BUDGET` memories) or all the common words
/// together: a memory with a single common word has the least BM25 weight anyway. Common
/// words can still go together in most of a large store (a name of two words, a phrase of
/// every day), so the memories with all of them and no rare word are ranked only if they are
/// among the [`RANK_BUDGET`] last stored matches of the common words (highest rowid on SQLite,
/// counted within the scope before the request's other filters; PostgreSQL ranks them all, see
/// [`SearchSource::fts_first_pass_matches`]): they differ from each other only in length and
/// in how often they repeat a word, while a rare word outweighs them. Only if the first pass
/// finds fewer than `limit` does the plain "any word" query run.
///
/// FTS5 ranks its best matches before the request's filters join `memories`; only when too
/// few pass are all matches ranked with the filters.
///
/// # Errors
/// The database fails (a user's query text never causes one: it is quoted term by term).
pub(crate) async fn search_fts<S: SearchSource + ?Sized>(
    store: &S,
    stats: &CorpusStats,
    request: &SearchRequest,
    limit: usize,
) -> Result<Vec<(String, f64)>> {
    full_text_matches(store, stats, request, limit, CommonMatches::Newest).await
}

/// Which of a first pass's memories that have only common words are ranked.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CommonMatches {
    /// Only those among the [`RANK_BUDGET`] last stored matches of the common words: a search,
    /// where time counts.
    Newest,
    /// All of them: looking for a near-duplicate, which may be old.
    Every,
}

/// [`search_fts`], ranking the first pass's memories with only common words as `common` says.
async fn full_text_matches<S: SearchSource + ?Sized>(
    store: &S,
    stats: &CorpusStats,
    request: &SearchRequest,
    limit: usize,
    common: CommonMatches,
) -> Result<Vec<(String, f64)>> {
    let terms = query_terms(&request.query);
    let Some(any_word) = match_any(&terms) else {
        return Ok(Vec::new());
    };
    // In a large index: the first-pass queries of the specific words, then of all of them.
    let mut queries = Vec::new();
    if terms.len() > 1 {
        let scope = TextScope::of(request);
        let documents = stats.document_count(store, scope).await?;
        if documents > RANK_BUDGET {
            let mut frequencies = Vec::with_capacity(terms.len());
            for term in &terms {
                frequencies.push(stats.term_frequency(store, term, scope).await?);
            }
            let (specific, specific_frequencies) = specific_terms(&terms, &frequencies, documents);
            if specific.len() < terms.len() {
                queries.push(narrow(&specific, &specific_frequencies));
                queries.push(match_any(&specific).map(Attempt::Whole));
            }
            queries.push(narrow(&terms, &frequencies));
        }
    }
    queries.push(Some(Attempt::Whole(any_word.clone())));
    for attempt in queries.into_iter().flatten() {
        let ids = match (&attempt, common) {
            (Attempt::Whole(query), _) => store.fts_best_matches(query, request, limit).await?,
            (Attempt::FirstPass(pass), CommonMatches::Every) => {
                store.fts_best_matches(&pass.query, request, limit).await?
            }
            (Attempt::FirstPass(pass), CommonMatches::Newest) => {
                store.fts_first_pass_matches(pass, request, limit).await?
            }
        };
        if ids.len() >= limit {
            return Ok(ids);
        }
    }
    store.fts_all_matches(&any_word, request, limit).await
}

/// The terms found in fewer than half of the `documents` (with their frequencies), or all of
/// them when none is.
fn specific_terms(
    terms: &[String],
    frequencies: &[i64],
    documents: i64,
) -> (Vec<String>, Vec<i64>) {
    let specific = |frequency: i64| frequency * 2 < documents;
    if !frequencies.iter().any(|&frequency| specific(frequency)) {
        return (terms.to_vec(), frequencies.to_vec());
    }
    terms
        .iter()
        .zip(frequencies)
        .filter(|&(_, &frequency)| specific(frequency))
        .map(|(term, &frequency)| (term.clone(), frequency))
        .unzip()
}

/// A full-text query [`search_fts`] tries.
#[derive(Debug, PartialEq)]
enum Attempt {
    /// A query whose every match is ranked.
    Whole(String),
    /// A first pass, whose matches with common words only may be ranked in part.
    FirstPass(FirstPass),
}

/// The first pass for `terms` occurring in `frequencies` memories each: their rare words, or
/// all their common ones together; `None` when they match too few memories to need it.
fn narrow(terms: &[String], frequencies: &[i64]) -> Option<Attempt> {
    if terms.len() < 2 || frequencies.iter().sum::<i64>() <= 2 * RANK_BUDGET {
        return None;
    }
    let mut rare = Vec::new();
    let mut common = Vec::new();
    for (term, &frequency) in terms.iter().zip(frequencies) {
        if frequency <= RANK_BUDGET {
            rare.push(term.clone());
        } else {
            common.push(term.clone());
        }
    }
    let query = match_rare_or_all_common(&rare, &common)?;
    if common.len() < 2 {
        return Some(Attempt::Whole(query));
    }
    Some(Attempt::FirstPass(FirstPass {
        query,
        common: match_all(&common)?,
        rare: match_any(&rare),
        newest_kept: usize::try_from(RANK_BUDGET).unwrap_or(usize::MAX),
    }))
}

/// Active facts visible in `session`'s scope (its user's, in its chat), but for those decay
/// faded, sharing words with `content`, best BM25 first.
///
/// # Errors
/// The database fails.
pub(crate) async fn similar_facts<S: SearchSource + ?Sized>(
    store: &S,
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
        // A fact decay faded is out of the context: a new fact like it is kept, not refused
        // as its duplicate.
        exclude_faded: true,
        ..SearchRequest::default()
    };
    // An old near-duplicate must be found even when it shares only common words.
    let ids: Vec<String> = full_text_matches(store, stats, &request, limit, CommonMatches::Every)
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut found = store.load_filtered(&ids, &request).await?;
    Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::strings as words;

    #[test]
    fn words_in_half_the_memories_or_more_are_not_specific() {
        let terms = words(&["zebra", "about", "half", "lisbon"]);
        let (specific, frequencies) = specific_terms(&terms, &[3, 5_800, 5_000, 4_999], 10_000);
        assert_eq!(specific, words(&["zebra", "lisbon"]));
        assert_eq!(frequencies, vec![3, 4_999]);
        // When every word is that common, they all stay.
        let (all, _) = specific_terms(&terms[1..3], &[5_800, 5_000], 10_000);
        assert_eq!(all, words(&["about", "half"]));
    }

    #[test]
    fn a_first_pass_takes_rare_words_or_all_common_ones_together() {
        let terms = words(&["zebra", "alpha", "beta"]);
        assert_eq!(
            narrow(&terms, &[3, 2_400, 2_400]),
            Some(Attempt::FirstPass(FirstPass {
                query: "\"zebra\" OR (\"alpha\" AND \"beta\")".into(),
                common: "\"alpha\" AND \"beta\"".into(),
                rare: Some("\"zebra\"".into()),
                newest_kept: 2_000,
            }))
        );
        // Every word common: the common words together, with no rare ones.
        let Some(Attempt::FirstPass(common_only)) = narrow(&terms[1..], &[2_400, 2_400]) else {
            panic!("a first pass of the common words together");
        };
        assert_eq!(common_only.query, "(\"alpha\" AND \"beta\")");
        assert_eq!(common_only.rare, None);
        // A single common word is left out, and the rare words are ranked whole.
        assert_eq!(
            narrow(&terms[..2], &[3, 9_000]),
            Some(Attempt::Whole("\"zebra\"".into()))
        );
        // Few matches in all: no first pass.
        assert_eq!(narrow(&terms, &[3, 1_000, 1_000]), None);
        assert_eq!(narrow(&terms[..1], &[9_000]), None);
    }
}
