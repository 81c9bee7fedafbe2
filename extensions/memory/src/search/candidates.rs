//! The candidate lists of a search: full text, vector and entity, each ranked by its own
//! score, gathered at once.

use mnemo_memory_api::spans;
use tracing::Instrument as _;

use super::entities::search_entities;
use super::fts_query::{is_stopword, terms};
use super::full_text::search_fts;
use crate::error::{record_failure, Result};
use crate::service::MemoryService;
use crate::types::{CandidateList, SearchMode, SearchRequest};

/// Most names tried against the entity table for one query.
const MAX_QUERY_NAMES: usize = 96;

/// Longest part of a query given to the embedder and to NER, in characters; a longer query is
/// searched by its beginning (FTS5 bounds its own terms).
const MAX_QUERY_CHARS: usize = 2_000;

/// The first `MAX_QUERY_CHARS` characters of `query`.
fn query_head(query: &str) -> &str {
    match query.char_indices().nth(MAX_QUERY_CHARS) {
        Some((cut, _)) => &query[..cut],
        None => query,
    }
}

/// The span of one candidate list, named `name`, with the fields [`traced_list`] records.
macro_rules! list_span {
    ($name:expr) => {
        tracing::info_span!(
            $name,
            mnemo.search.candidates = tracing::field::Empty,
            error.type = tracing::field::Empty,
        )
    };
}

/// Gathers one candidate list inside `span`, recording how many candidates it gave, or how
/// it failed. `None`: the list could not run (no vector search).
async fn traced_list<T>(
    span: tracing::Span,
    list: impl std::future::Future<Output = Result<Option<Vec<T>>>>,
) -> Result<Option<Vec<T>>> {
    let result = list.instrument(span.clone()).await;
    if let Ok(Some(hits)) = &result {
        span.record(
            spans::SEARCH_CANDIDATES,
            mnemo_kernel::spans::count(hits.len()),
        );
    }
    record_failure(&span, &result);
    result
}

impl MemoryService {
    /// Names in a query to look up in the entity table: what NER finds, and word n-grams.
    fn query_names(&self, query: &str) -> Vec<String> {
        let mut names = Vec::new();
        if let Some(ner) = self.state().ok().and_then(|state| state.ner.as_ref()) {
            for entity in ner.extract_fast(query) {
                names.push(entity.canonical);
                names.push(entity.surface);
            }
        }
        let words = terms(query);
        for size in 1..=3 {
            for window in words.windows(size) {
                if size == 1 && (is_stopword(&window[0]) || window[0].chars().count() < 2) {
                    continue;
                }
                names.push(window.join(" "));
            }
        }
        names.truncate(MAX_QUERY_NAMES);
        names
    }

    /// The vector list: the query's embedding, then its nearest memories with their cosine
    /// similarity; `None` when vector search is unavailable (the reason is logged once).
    async fn vector_list(
        &self,
        request: &SearchRequest,
        depth: usize,
    ) -> Result<Option<Vec<(String, f64)>>> {
        let Some(embedder) = self.vector_embedder().await else {
            let reason = self.vector_unavailable_reason().await;
            self.warn_fallback(&reason);
            return Ok(None);
        };
        let Some(vector) = self
            .query_vector(&embedder, query_head(&request.query))
            .await?
        else {
            return Ok(None);
        };
        let min_similarity = request
            .min_similarity
            .unwrap_or(self.config().min_similarity);
        let nearest = self
            .store()?
            .search_vector(request, &vector, depth, min_similarity)
            .await?;
        Ok(Some(
            nearest
                .into_iter()
                .map(|(id, similarity)| (id, f64::from(similarity)))
                .collect(),
        ))
    }

    /// The entity list: memories linked to entities the query names (directly, or as a
    /// relation of the asking user such as "my sister"), with how many each matches.
    async fn entity_list(
        &self,
        request: &SearchRequest,
        depth: usize,
    ) -> Result<Vec<(String, i64)>> {
        let state = self.state()?;
        let store = state.store.as_ref();
        let mut names = self.query_names(query_head(&request.query));
        if let Some(owner) = &request.user_id {
            for relation in crate::people::relations_in(query_head(&request.query)) {
                if let Some(person) = store.person_by_relation(owner, &relation).await? {
                    names.push(person.name);
                    names.extend(person.aliases);
                }
            }
        }
        search_entities(store, &state.stats, request, &names, depth).await
    }

    /// The ranked lists the request's mode searches (fts, vector, entity; hybrid all three),
    /// each at most `depth` long, with each list's own scores. [`Self::search`] fuses them; the
    /// evaluation reads them to study fusion.
    ///
    /// # Errors
    /// The store fails. Query text never causes an error.
    pub async fn candidate_lists(
        &self,
        request: &SearchRequest,
        depth: usize,
    ) -> Result<Vec<CandidateList>> {
        let state = self.state()?;
        let mode = request.mode;
        // The three lists run at once: the query embedding (on a blocking thread) overlaps
        // the FTS5 and entity queries (on the pool's connections).
        // Each list that runs is a span of its own (`mnemo_memory_api::spans`).
        let fts = async {
            if matches!(mode, SearchMode::Hybrid | SearchMode::Fts) {
                let list = search_fts(state.store.as_ref(), &state.stats, request, depth);
                traced_list(list_span!(spans::SEARCH_FTS), async {
                    list.await.map(Some)
                })
                .await
            } else {
                Ok(None)
            }
        };
        let vector = async {
            if matches!(mode, SearchMode::Hybrid | SearchMode::Vector)
                && !request.query.trim().is_empty()
            {
                traced_list(
                    list_span!(spans::SEARCH_VECTOR),
                    self.vector_list(request, depth),
                )
                .await
            } else {
                Ok(None)
            }
        };
        let entity = async {
            if matches!(mode, SearchMode::Hybrid | SearchMode::Entity) {
                let list = self.entity_list(request, depth);
                traced_list(list_span!(spans::SEARCH_ENTITY), async {
                    list.await.map(Some)
                })
                .await
            } else {
                Ok(None)
            }
        };
        let (fts, vector, entity) = tokio::join!(fts, vector, entity);
        let mut lists: Vec<CandidateList> = Vec::new();
        if let Some(hits) = fts? {
            lists.push(CandidateList { name: "fts", hits });
        }
        if let Some(hits) = vector? {
            lists.push(CandidateList {
                name: "vector",
                hits,
            });
        }
        if let Some(mut linked) = entity? {
            // An entity list says "mentions who you asked about", not how well; among memories
            // linked to as many of the query's entities, the text and meaning lists decide.
            let best_rank = |id: &String| {
                lists
                    .iter()
                    .filter_map(|list| list.hits.iter().position(|(other, _)| other == id))
                    .min()
                    .unwrap_or(usize::MAX)
            };
            linked.sort_by_cached_key(|(id, matched)| (std::cmp::Reverse(*matched), best_rank(id)));
            lists.push(CandidateList {
                name: "entity",
                hits: linked
                    .into_iter()
                    .map(|(id, matched)| (id, matched as f64))
                    .collect(),
            });
        }
        Ok(lists)
    }
}
