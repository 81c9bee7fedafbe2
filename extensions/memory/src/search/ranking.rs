//! Ranking a search: fusing the candidate lists, weighing confidence, lifting what was said in
//! the period the query names and the turns of the speaker it names, and lifting turns next to
//! relevant ones and in sessions that match in several turns.

use std::collections::HashMap;

use mnemo_kernel::spans::gen_ai;
use mnemo_memory_api::spans;
use tracing::Instrument as _;

use super::agents_words::asks_for_agents_words;
use super::candidates::{query_head, Gathered};
use super::fusion::{fuse, session_lift, spread_to_neighbours, Fusion, SENTENCE_LIST};
use super::searcher::Searcher;
use super::source::SearchSource;
use super::speakers::spoken_by;
use super::when::period_in;
use crate::error::{record_failure, Result};
use crate::types::{
    CandidateList, FusionMethod, ListMatch, Origin, ScoreBreakdown, SearchHit, SearchMode,
    SearchRequest,
};

/// Hybrid search re-ranks by speaker, neighbouring turns and sessions only the best
/// `limit × NEIGHBOUR_POOL` candidates.
const NEIGHBOUR_POOL: usize = 8;

/// A search candidate being ranked: id, score, event time, and its rank in each list.
type Ranked = (String, f64, i64, Vec<(String, usize)>);

/// Runs `search`, a search for `request`, inside the search's span (`memory.search`), which
/// records the hits it returned or how it failed. The lists' and fusion's spans are its
/// children.
///
/// # Errors
/// `search`'s.
pub(crate) async fn traced(
    request: &SearchRequest,
    search: impl std::future::Future<Output = Result<Vec<SearchHit>>>,
) -> Result<Vec<SearchHit>> {
    let span = tracing::info_span!(
        spans::SEARCH,
        mnemo.search.mode = ?request.mode,
        mnemo.search.limit = mnemo_kernel::spans::count(request.limit),
        mnemo.search.hits = tracing::field::Empty,
        gen_ai.operation.name = gen_ai::SEARCH_MEMORY,
        gen_ai.memory.record.count = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    let result = search.instrument(span.clone()).await;
    if let Ok(hits) = &result {
        let hits = mnemo_kernel::spans::count(hits.len());
        span.record("mnemo.search.hits", hits);
        span.record(gen_ai::MEMORY_RECORD_COUNT, hits);
    }
    record_failure(&span, &result);
    result
}

impl<S: SearchSource + ?Sized + 'static> Searcher<S> {
    /// How the request's lists are fused: hybrid search with score fusion weighs them as
    /// configured; a single list keeps its own order (1 / (k + rank) is monotonic).
    pub(super) fn fusion(&self, request: &SearchRequest) -> Fusion {
        let config = &self.config;
        if request.mode == SearchMode::Hybrid && config.fusion == FusionMethod::Scores {
            Fusion::Scores {
                vector_weight: config.vector_weight,
                context_weight: config.context_weight,
                entity_weight: config.entity_weight,
                feedback_weight: config.feedback_weight,
                similarity_floor: f64::from(
                    request.min_similarity.unwrap_or(config.min_similarity),
                ),
                sentence_weight: config.sentence_weight,
                sentence_floor: f64::from(config.sentence_floor),
            }
        } else {
            Fusion::Rrf { k: config.rrf_k }
        }
    }

    /// Searches with the request's mode and filters. Hybrid fuses the lists as `fusion` says
    /// (weighted normalised scores, or Reciprocal Rank Fusion; see `fusion.rs`), then lets each
    /// listed episode inherit a share of its neighbouring turns' relevance and of its session's
    /// best other matches (their relevance with their own neighbours' shares). Counting the
    /// hits as recalled is the caller's (`MemoryService::search`, which also opens the span,
    /// [`traced`]).
    ///
    /// # Errors
    /// The store fails. Query text never causes an error.
    pub(crate) async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>> {
        let store = self.store.as_ref();
        let mut owned = request.clone();
        // An "as of" search reads the query's periods ("last week") from that time.
        match owned.as_of {
            Some(as_of) => owned.at = Some(as_of.at),
            None => {
                owned.at.get_or_insert(self.clock.now());
            }
        }
        let request = &owned;
        let limit = request.limit.clamp(1, self.config.max_search_limit.max(1));
        let candidates = self.config.candidates_per_list.max(limit);
        let Gathered {
            lists,
            speakers,
            mut keys,
        } = self.gather(request, candidates).await?;
        let fusion = self.fusion(request);
        let fused = tracing::info_span!(spans::SEARCH_FUSION).in_scope(|| fuse(&lists, fusion));
        // The sentence-key list's part of each fused relevance: a turn's own words, which its
        // neighbours and session do not share.
        let sentence_parts: HashMap<String, f64> = lists
            .iter()
            .filter(|list| list.name == SENTENCE_LIST)
            .flat_map(|list| fuse(std::slice::from_ref(list), fusion))
            .map(|(id, (part, _))| (id, part))
            .collect();
        let sentence_part = |id: &String| sentence_parts.get(id).copied().unwrap_or(0.0);
        let (before, after) = (
            self.config.previous_turn_weight,
            self.config.next_turn_weight,
        );
        let hybrid = request.mode == SearchMode::Hybrid;
        let spread = hybrid && (before > 0.0 || after > 0.0);
        // One read for the keys gathering did not read, with neighbours when they will spread
        // relevance (those gathered have them).
        let missing: Vec<String> = fused
            .keys()
            .filter(|id| !keys.contains_key(*id))
            .cloned()
            .collect();
        keys.extend(store.rank_keys(&missing, request, spread).await?);
        // A memory we doubt (confidence below 0.5: contradicted by a newer fact, or nearly
        // forgotten) ranks after trusted ones of similar relevance: its score is scaled by
        // 0.5 + confidence. Ordinary decay above 0.5 leaves relevance alone. Its origin's
        // weight scales it too: the user's own words above the agent's, stated above inferred.
        // A query that wants the agent's words (`agents_words.rs`) weighs the agent's turns
        // like the user's; what the chat's model claimed through a tool (a fact) keeps its weight.
        let origin_weights = self.config.origin_weights;
        let agents_turns_wanted = asks_for_agents_words(query_head(&request.query));
        let trust = |id: &String| {
            keys.get(id).map(|key| {
                let agents_turn = key.origin == Origin::Agent && key.session.is_some();
                Trust {
                    confidence: (0.5 + key.confidence.clamp(0.0, 1.0)).min(1.0),
                    origin: if agents_turns_wanted && agents_turn {
                        origin_weights.agent.max(origin_weights.user)
                    } else {
                        origin_weights.of(key.origin)
                    },
                }
            })
        };
        let weight = |id: &String| trust(id).map(|trust| trust.confidence * trust.origin);
        // Said in the period the query names (or the week after): relevance × (1 + weight).
        let period_weight = self.config.period_weight;
        let period = request
            .at
            .filter(|_| hybrid && period_weight > 0.0)
            .and_then(|at| period_in(query_head(&request.query), at));
        let period_factor = |id: &String| match (&period, keys.get(id)) {
            (Some(period), Some(key)) if period.covers(key.event_time) => 1.0 + period_weight,
            _ => 1.0,
        };
        let order = |ranked: &mut Vec<Ranked>| {
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
        };
        let mut ranked: Vec<Ranked> = fused
            .iter()
            .filter_map(|(id, (score, ranks))| {
                let key = keys.get(id)?;
                Some((
                    id.clone(),
                    score * period_factor(id) * weight(id)?,
                    key.event_time,
                    ranks.clone(),
                ))
            })
            .collect();
        order(&mut ranked);
        // The head of the list is re-ranked: only a candidate already near the top can be
        // lifted into the results by its speaker or its neighbours.
        let mut speaker_factor: HashMap<String, f64> = HashMap::new();
        let mut session_gain: HashMap<String, f64> = HashMap::new();
        if hybrid {
            ranked.truncate(limit * NEIGHBOUR_POOL);
            let head: Vec<String> = ranked.iter().map(|(id, ..)| id.clone()).collect();
            let speaker_weight = self.config.speaker_weight;
            if let [speaker] = speakers.as_slice() {
                if speaker_weight > 0.0 {
                    let memories = store.load_filtered(&head, request).await?;
                    for (id, memory) in memories {
                        if spoken_by(&memory.content, speaker) {
                            speaker_factor.insert(id, 1.0 + speaker_weight);
                        }
                    }
                }
            }
            let relevance: HashMap<String, f64> = fused
                .iter()
                .map(|(id, (score, _))| {
                    let factor = speaker_factor.get(id).copied().unwrap_or(1.0);
                    let shared = score - sentence_part(id);
                    (id.clone(), shared * factor * period_factor(id))
                })
                .collect();
            let spread = if spread {
                let neighbours: Vec<(String, Option<String>, Option<String>)> = head
                    .iter()
                    .filter_map(|id| {
                        let key = keys.get(id)?;
                        Some((id.clone(), key.previous.clone(), key.next.clone()))
                    })
                    .collect();
                spread_to_neighbours(&relevance, &neighbours, before, after)
            } else {
                relevance
            };
            let session_weight = self.config.session_weight;
            if session_weight > 0.0 {
                let members: Vec<_> = head
                    .iter()
                    .filter_map(|id| Some((id, keys.get(id)?.session.as_ref()?, *spread.get(id)?)))
                    .collect();
                session_gain = session_lift(&members, session_weight);
            }
            for entry in &mut ranked {
                if let (Some(score), Some(weight)) = (spread.get(&entry.0), weight(&entry.0)) {
                    let gain = session_gain.get(&entry.0).copied().unwrap_or(0.0);
                    let own = sentence_part(&entry.0)
                        * speaker_factor.get(&entry.0).copied().unwrap_or(1.0)
                        * period_factor(&entry.0);
                    entry.1 = (score + gain + own) * weight;
                }
            }
            order(&mut ranked);
        }
        ranked.truncate(limit);
        let top: Vec<String> = ranked.iter().map(|(id, ..)| id.clone()).collect();
        let mut memories = store.load_filtered(&top, request).await?;
        let hits: Vec<SearchHit> = ranked
            .into_iter()
            .filter_map(|(id, score, _, ranks)| {
                let speaker = speaker_factor.get(&id).copied().unwrap_or(1.0);
                let relevance = Relevance {
                    fused: fused.get(&id)?.0,
                    speaker,
                    period: period_factor(&id),
                    session: session_gain.get(&id).copied().unwrap_or(0.0),
                };
                let why = breakdown(&lists, fusion, &id, &ranks, relevance, score, trust(&id)?);
                memories
                    .remove(&id)
                    .map(|memory| SearchHit { score, memory, why })
            })
            .collect();
        Ok(hits)
    }
}

/// How much a hit is trusted: its confidence's factor and its origin's weight; its score is
/// multiplied by both.
#[derive(Debug, Clone, Copy)]
struct Trust {
    confidence: f64,
    origin: f64,
}

/// A hit's relevance before its neighbours' shares and its confidence: the fused lists, the
/// speaker's and the period's factors, and what its session's other matches added.
struct Relevance {
    fused: f64,
    speaker: f64,
    period: f64,
    session: f64,
}

/// Why the memory `id` got `score` under `fusion`: each list's rank and own score, its
/// `relevance`, what its neighbours added, and its `trust`'s factors
/// (`score = (fused × speaker × period + neighbours + session) × confidence × origin`).
fn breakdown(
    lists: &[CandidateList],
    fusion: Fusion,
    id: &str,
    ranks: &[(String, usize)],
    relevance: Relevance,
    score: f64,
    trust: Trust,
) -> ScoreBreakdown {
    let Relevance {
        fused,
        speaker,
        period,
        session,
    } = relevance;
    let matches = ranks
        .iter()
        .map(|(list, rank)| ListMatch {
            list: list.clone(),
            rank: *rank,
            score: lists
                .iter()
                .find(|candidates| candidates.name == list)
                .and_then(|candidates| candidates.hits.get(rank.saturating_sub(1)))
                .filter(|(hit, _)| hit == id)
                .map_or(0.0, |(_, score)| *score),
        })
        .collect();
    let weight = trust.confidence * trust.origin;
    let neighbours = if weight > 0.0 {
        score / weight - fused * speaker * period - session
    } else {
        0.0
    };
    ScoreBreakdown {
        fusion: fusion.method(),
        lists: matches,
        fused,
        speaker,
        period,
        neighbours,
        session,
        confidence_weight: trust.confidence,
        origin_weight: trust.origin,
    }
}
