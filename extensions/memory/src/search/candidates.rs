//! The candidate lists of a search: full text (and, over a conversation, the text with the turn
//! before), vector and entity, each ranked by its own score, gathered at once.

use std::collections::HashMap;
use std::sync::Arc;

use mnemo_memory_api::spans;
use tracing::Instrument as _;

use super::entities::{query_entities, search_entities};
use super::full_text::search_fts;
use super::fusion::{context_scores, SENTENCE_LIST};
use super::searcher::Searcher;
use super::source::SearchSource;
use super::speakers::{spoken_by, without_names};
use crate::error::{record_failure, Result};
use crate::sentence_keys::in_first_person;
use crate::store::RankKey;
use crate::text::{is_stopword, terms};
use crate::types::{CandidateList, FusionMethod, SearchMode, SearchRequest};

/// Most names tried against the entity table for one query.
const MAX_QUERY_NAMES: usize = 96;

/// Newest links of a very common person read to tell whether they speak in the memories
/// (a transcript's `Name:` labels) or are only talked about.
const SPEAKER_EVIDENCE: i64 = 8;

/// Longest part of a query given to the embedder and to NER, in characters; a longer query is
/// searched by its beginning (FTS5 bounds its own terms).
const MAX_QUERY_CHARS: usize = 2_000;

/// The first `MAX_QUERY_CHARS` characters of `query`.
pub(super) fn query_head(query: &str) -> &str {
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

impl<S: SearchSource + ?Sized + 'static> Searcher<S> {
    /// Names in a query to look up in the entity table: what NER finds, and word n-grams.
    fn query_names(&self, query: &str) -> Vec<String> {
        let mut names = Vec::new();
        if let Some(ner) = &self.ner {
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

    /// The vector list: the memories nearest the query's embedding `vector`, with their cosine
    /// similarity.
    async fn vector_list(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        depth: usize,
    ) -> Result<Option<Vec<(String, f64)>>> {
        let min_similarity = request.min_similarity.unwrap_or(self.config.min_similarity);
        let nearest = self
            .store
            .search_vector(request, vector, depth, min_similarity)
            .await?;
        Ok(Some(cosine_list(nearest)))
    }

    /// The sentence-key list (see `crate::sentence_keys`): the turns the user spoke whose best
    /// sentence is nearest the query's embedding `vector`, at that sentence's similarity.
    ///
    /// Started as a task of its own, so that its scan of the sentence mirror runs on another
    /// worker thread while this one scans the turns' mirror: at a million memories each scan
    /// takes about 10 ms. The task is traced under `span`.
    fn spawn_sentence_list(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        depth: usize,
        span: tracing::Span,
    ) -> tokio::task::JoinHandle<Result<Option<ScoredList>>> {
        let store = Arc::clone(&self.store);
        let (request, vector) = (request.clone(), vector.to_vec());
        let floor = self.config.sentence_floor;
        tokio::spawn(traced_list(span, async move {
            let nearest = store
                .search_sentences(&request, &vector, depth, floor)
                .await?;
            Ok(Some(cosine_list(nearest)))
        }))
    }

    /// The entities the query names (directly, or as a relation of the asking user such as
    /// "my sister"): those specific enough to search by, and the names of the conversation
    /// speakers among them (people too common to be specific whose newest memories include
    /// turns they spoke).
    async fn named_entities(&self, request: &SearchRequest) -> Result<(Vec<String>, Vec<String>)> {
        let store = self.store.as_ref();
        let mut names = self.query_names(query_head(&request.query));
        if let Some(owner) = &request.user_id {
            for relation in crate::people::relations_in(query_head(&request.query)) {
                if let Some(person) = store.person_by_relation(owner, &relation).await? {
                    names.push(person.name);
                    names.extend(person.aliases);
                }
            }
        }
        let entities =
            query_entities(store, &self.stats, request.user_id.as_deref(), &names).await?;
        let mut speakers = Vec::new();
        for (id, name) in entities.common_people {
            let newest: Vec<String> = store
                .newest_links(&id, SPEAKER_EVIDENCE)
                .await?
                .into_iter()
                .map(|(memory_id, _)| memory_id)
                .collect();
            let memories = store.load_filtered(&newest, request).await?;
            if memories
                .values()
                .any(|memory| spoken_by(&memory.content, &name))
            {
                speakers.push(name);
            }
        }
        Ok((entities.specific, speakers))
    }

    /// The conversation-context list for the text list `text` (see `fusion::context_scores`):
    /// one more store read, for the turns that follow the text matches. Also the rank keys
    /// that read gave, with neighbours, which ranking uses again.
    async fn context_list(
        &self,
        request: &SearchRequest,
        text: &[(String, f64)],
        depth: usize,
    ) -> Result<(Vec<(String, f64)>, HashMap<String, RankKey>)> {
        let ids: Vec<String> = text.iter().map(|(id, _)| id.clone()).collect();
        // With neighbours: ranking spreads relevance with these keys (see `Gathered::keys`).
        let keys = self.store.rank_keys(&ids, request, true).await?;
        let scores = context_scores(
            text,
            |id| keys.get(id).and_then(|key| key.next.clone()),
            depth,
        );
        Ok((scores, keys))
    }

    /// The ranked lists the request's mode searches (fts, vector, entity; hybrid all three,
    /// and the conversation-context list when score fusion gives it a weight), each at most
    /// `depth` long, with each list's own scores; the speakers the query names (see
    /// `speakers.rs`), and the rank keys read on the way. [`Self::search`] fuses the lists; the
    /// evaluation reads them to study fusion (`MemoryService::candidate_lists`).
    ///
    /// # Errors
    /// The store fails. Query text never causes an error.
    pub(crate) async fn gather(&self, request: &SearchRequest, depth: usize) -> Result<Gathered> {
        let mode = request.mode;
        let with_context = mode == SearchMode::Hybrid
            && self.config.fusion == FusionMethod::Scores
            && self.config.context_weight > 0.0;
        let with_sentences = mode == SearchMode::Hybrid
            && self.config.fusion == FusionMethod::Scores
            && self.config.sentence_weight > 0.0;
        // The lists run at once: the query embedding (on a blocking thread) overlaps the FTS5
        // queries (on the pool's connections). The entity names are resolved first, because
        // the speakers among them are left out of the text embedded.
        // Each list that runs is a span of its own (`mnemo_memory_api::spans`).
        let text = async {
            if !matches!(mode, SearchMode::Hybrid | SearchMode::Fts) {
                return Ok((None, None));
            }
            let list = search_fts(self.store.as_ref(), &self.stats, request, depth);
            let hits = traced_list(list_span!(spans::SEARCH_FTS), async {
                list.await.map(Some)
            })
            .await?;
            let context = match &hits {
                Some(hits) if with_context && !hits.is_empty() => {
                    Some(self.context_list(request, hits, depth).await?)
                }
                _ => None,
            };
            Ok::<_, crate::error::MemoryError>((hits, context))
        };
        let by_names = async {
            let (specific, speakers) = if mode == SearchMode::Fts {
                (Vec::new(), Vec::new())
            } else {
                self.named_entities(request).await?
            };
            let vector = async {
                if !matches!(mode, SearchMode::Hybrid | SearchMode::Vector)
                    || request.query.trim().is_empty()
                {
                    return Ok(None);
                }
                let head = query_head(&request.query);
                let shaped = without_names(head, &speakers);
                let span = list_span!(spans::SEARCH_VECTOR);
                let embedded = self
                    .query_embedding(shaped.as_deref().unwrap_or(head))
                    .instrument(span.clone())
                    .await;
                let vector = match embedded {
                    Ok(Some(vector)) => vector,
                    Ok(None) => return Ok(None),
                    Err(error) => {
                        let failed = Err(error);
                        record_failure(&span, &failed);
                        return failed;
                    }
                };
                let sentences = if with_sentences && in_first_person(head) {
                    let span = list_span!(spans::SEARCH_SENTENCES);
                    Some(self.spawn_sentence_list(request, &vector, depth, span))
                } else {
                    None
                };
                let hits = traced_list(span, self.vector_list(request, &vector, depth)).await?;
                let sentences = match sentences {
                    Some(task) => match task.await {
                        Ok(list) => list?,
                        // The task panicked: the panic goes on here, as if it ran inline.
                        Err(error) if error.is_panic() => {
                            std::panic::resume_unwind(error.into_panic())
                        }
                        // Cancelled only as the runtime shuts down: no list then.
                        Err(_) => None,
                    },
                    None => None,
                };
                Ok(Some((hits, sentences)))
            };
            let entity = async {
                if !matches!(mode, SearchMode::Hybrid | SearchMode::Entity) {
                    return Ok(None);
                }
                let list = search_entities(self.store.as_ref(), request, &specific, depth);
                traced_list(list_span!(spans::SEARCH_ENTITY), async {
                    list.await.map(Some)
                })
                .await
            };
            let (vector, entity) = tokio::join!(vector, entity);
            Ok::<_, crate::error::MemoryError>((vector?, entity?, speakers))
        };
        let (text, by_names) = tokio::join!(text, by_names);
        let (fts, context) = text?;
        let (vector, entity, speakers) = by_names?;
        let (vector, sentences) = match vector {
            Some((vector, sentences)) => (vector, sentences),
            None => (None, None),
        };
        let mut lists: Vec<CandidateList> = Vec::new();
        if let Some(hits) = fts {
            lists.push(CandidateList { name: "fts", hits });
        }
        let mut keys = HashMap::new();
        if let Some((hits, context_keys)) = context {
            lists.push(CandidateList {
                name: "context",
                hits,
            });
            keys = context_keys;
        }
        if let Some(hits) = vector {
            lists.push(CandidateList {
                name: "vector",
                hits,
            });
        }
        if let Some(mut linked) = entity {
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
        let with_feedback = mode == SearchMode::Hybrid
            && self.config.fusion == FusionMethod::Scores
            && self.config.feedback_weight > 0.0
            && lists.iter().any(|list| list.name == "vector");
        if with_feedback {
            let feedback = self.feedback_list(request, &lists, &speakers, depth);
            if let Some(hits) = traced_list(list_span!(spans::SEARCH_FEEDBACK), feedback).await? {
                lists.push(CandidateList {
                    name: "feedback",
                    hits,
                });
            }
        }
        // After the feedback list, which shapes its query from the other lists' best matches.
        if let Some(hits) = sentences {
            lists.push(CandidateList {
                name: SENTENCE_LIST,
                hits,
            });
        }
        Ok(Gathered {
            lists,
            speakers,
            keys,
        })
    }
}

/// A candidate list's memory ids with their scores, best first.
type ScoredList = Vec<(String, f64)>;

/// Cosine hits as list scores.
fn cosine_list(nearest: Vec<(String, f32)>) -> Vec<(String, f64)> {
    nearest
        .into_iter()
        .map(|(id, similarity)| (id, f64::from(similarity)))
        .collect()
}

/// What [`Searcher::gather`] found.
pub(crate) struct Gathered {
    /// The candidate lists.
    pub(crate) lists: Vec<CandidateList>,
    /// The speakers the query names.
    pub(crate) speakers: Vec<String>,
    /// Rank keys, with neighbours, read for some of the candidates (the full-text list's,
    /// when the context list ran), through the request's filters.
    pub(crate) keys: HashMap<String, RankKey>,
}
