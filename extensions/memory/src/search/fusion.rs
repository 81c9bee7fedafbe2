//! Fusing hybrid search's candidate lists into one relevance score per memory.
//!
//! Two fusions are offered. Reciprocal Rank Fusion adds 1 / (k + rank) over the lists: it needs
//! no scores, but it trusts every list equally, so a weak list (a small embedding model's nearest
//! neighbours, which always exist) drags strong keyword hits down. Score fusion (the default) is a
//! weighted sum of each list's scores normalised per query from the list's natural zero: BM25
//! relevance as a share of the best match's, cosine similarity as the share of the best match's
//! margin over `min_similarity`. The two become comparable, a clear winner in one list stays a
//! clear winner, near-ties stay near-ties (min-max scaling would stretch them to 0 and 1), and the
//! vector list's share is a weight.
//!
//! Conversations add two more signals, because a turn answering a question rarely repeats the
//! question's words, but follows the turn that does. The conversation-context list
//! ([`context_scores`]) scores each turn by its own BM25 plus that of the turn before it, and
//! shares the text weight with the plain BM25 list. After fusion, [`spread_to_neighbours`] gives
//! every listed episode a share of the fused relevance of the turns just before and after it,
//! and [`session_lift`] a share of that of the best other matches of its session: a session
//! that matches in several turns is about the question, and questions that span sessions want
//! each whole session's evidence.
//!
//! A question in the first person adds the sentence-key list ([`SENTENCE_LIST`], see
//! `crate::sentence_keys`), fused like the vector list with its own weight and floor. Its share
//! is a turn's own words: it is kept out of what neighbours and sessions share.

use std::collections::HashMap;

use crate::types::{CandidateList, FusionMethod, SessionKey};

/// The name of the sentence-key list (see `crate::sentence_keys`): fused like the others, but
/// its share is not spread to neighbours or sessions (see `ranking.rs`).
pub(crate) const SENTENCE_LIST: &str = "sentence";

/// How many other turns of its session lend an episode relevance ([`session_lift`]).
pub(crate) const SESSION_PEERS: usize = 2;

/// How hybrid search fuses its lists (`fusion` in `[extensions.memory]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fusion {
    /// Reciprocal Rank Fusion with this k.
    Rrf { k: f64 },
    /// Weighted sum of normalised scores.
    Scores {
        /// Share of the vector list; the text lists (BM25 alone, and with the turn before)
        /// get the rest.
        vector_weight: f64,
        /// Share of the text weight given to the conversation-context list.
        context_weight: f64,
        /// Added for linked entities, scaled by the share of the query's entities matched.
        entity_weight: f64,
        /// The feedback list's weight: nearest neighbours of the query moved towards its best
        /// first matches (see `feedback.rs`).
        feedback_weight: f64,
        /// The cosine similarity that counts as unrelated (the vector list's cut-off).
        similarity_floor: f64,
        /// The sentence-key list's weight (see `crate::sentence_keys`).
        sentence_weight: f64,
        /// The cosine similarity the sentence-key list counts as unrelated.
        sentence_floor: f64,
    },
}

impl Fusion {
    /// Which method this is, as a hit records it.
    pub(crate) fn method(self) -> FusionMethod {
        match self {
            Fusion::Rrf { .. } => FusionMethod::Rrf,
            Fusion::Scores { .. } => FusionMethod::Scores,
        }
    }
}

/// `hits`' scores as shares of the best one's margin over `floor` (all 1 when the best is at
/// or below the floor).
fn share_of_best(hits: &[(String, f64)], floor: f64) -> impl Iterator<Item = (&String, f64)> {
    let best = hits
        .iter()
        .map(|(_, score)| *score)
        .fold(f64::NEG_INFINITY, f64::max);
    hits.iter().map(move |(id, score)| {
        let share = if best > floor {
            ((score - floor) / (best - floor)).max(0.0)
        } else {
            1.0
        };
        (id, share)
    })
}

/// Every listed memory's fused relevance, and its 1-based rank in each list that returned it.
pub(crate) fn fuse(
    lists: &[CandidateList],
    fusion: Fusion,
) -> HashMap<String, (f64, Vec<(String, usize)>)> {
    let mut fused: HashMap<String, (f64, Vec<(String, usize)>)> = HashMap::new();
    for list in lists {
        let contributions: Vec<(&String, f64)> = match fusion {
            Fusion::Rrf { k } => list
                .hits
                .iter()
                .enumerate()
                .map(|(index, (id, _))| (id, 1.0 / (k + (index + 1) as f64)))
                .collect(),
            Fusion::Scores {
                vector_weight,
                context_weight,
                entity_weight,
                feedback_weight,
                similarity_floor,
                sentence_weight,
                sentence_floor,
            } => match list.name {
                // The best sentence of each turn the user spoke.
                SENTENCE_LIST => share_of_best(&list.hits, sentence_floor)
                    .map(|(id, score)| (id, sentence_weight * score))
                    .collect(),
                // Cosine lists: the query's own vector, and the one moved by feedback.
                "vector" | "feedback" => {
                    let weight = if list.name == "vector" {
                        vector_weight
                    } else {
                        feedback_weight
                    };
                    share_of_best(&list.hits, similarity_floor)
                        .map(|(id, score)| (id, weight * score))
                        .collect()
                }
                "entity" => {
                    // Entity counts are not spread like scores: 1 of 1 entity matched is full.
                    let most = list
                        .hits
                        .iter()
                        .map(|(_, matched)| *matched)
                        .fold(1.0, f64::max);
                    list.hits
                        .iter()
                        .map(|(id, matched)| (id, entity_weight * matched / most))
                        .collect()
                }
                "context" => share_of_best(&list.hits, 0.0)
                    .map(|(id, score)| (id, (1.0 - vector_weight) * context_weight * score))
                    .collect(),
                _ => {
                    // Without a context list (facts only, or none asked for), the text list
                    // keeps the whole text weight.
                    let text_weight = if lists.iter().any(|other| other.name == "context") {
                        (1.0 - vector_weight) * (1.0 - context_weight)
                    } else {
                        1.0 - vector_weight
                    };
                    share_of_best(&list.hits, 0.0)
                        .map(|(id, score)| (id, text_weight * score))
                        .collect()
                }
            },
        };
        for (index, (id, contribution)) in contributions.into_iter().enumerate() {
            let entry = fused.entry(id.clone()).or_insert((0.0, Vec::new()));
            entry.0 += contribution;
            entry.1.push((list.name.to_owned(), index + 1));
        }
    }
    fused
}

/// The conversation-context list: each text match and each turn right after one, scored by its
/// own BM25 plus that of the turn before it, best first, at most `depth`. `text` is the BM25
/// list; `next` gives the turn after a memory in its session, for episodes.
pub(crate) fn context_scores(
    text: &[(String, f64)],
    next: impl Fn(&str) -> Option<String>,
    depth: usize,
) -> Vec<(String, f64)> {
    let mut scores: HashMap<String, f64> = text.iter().cloned().collect();
    for (id, score) in text {
        if let Some(following) = next(id) {
            *scores.entry(following).or_default() += score;
        }
    }
    let mut ranked: Vec<(String, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(depth);
    ranked
}

/// Relevance after each listed episode takes `before` times the relevance of the turn just
/// before it in its session and `after` times that of the turn just after it. `neighbours`
/// holds, for listed memories, (id, previous turn, next turn). Only listed memories are
/// re-scored: a turn that matched nothing is not made a result by its neighbour.
pub(crate) fn spread_to_neighbours(
    relevance: &HashMap<String, f64>,
    neighbours: &[(String, Option<String>, Option<String>)],
    before: f64,
    after: f64,
) -> HashMap<String, f64> {
    let mut spread = relevance.clone();
    for (id, previous, next) in neighbours {
        let Some(score) = spread.get_mut(id) else {
            continue;
        };
        let inherited = |neighbour: &Option<String>| {
            neighbour
                .as_ref()
                .and_then(|neighbour| relevance.get(neighbour))
                .copied()
                .unwrap_or(0.0)
        };
        *score += before * inherited(previous) + after * inherited(next);
    }
    spread
}

/// What each episode of `head` (id, session, relevance) gains from its session: `weight`
/// times the summed relevance of the [`SESSION_PEERS`] most relevant other episodes of the same
/// session in `head`. Episodes alone in their session gain nothing and are left out.
pub(crate) fn session_lift(
    head: &[(&String, &SessionKey, f64)],
    weight: f64,
) -> HashMap<String, f64> {
    let mut sessions: HashMap<&SessionKey, Vec<(f64, &String)>> = HashMap::new();
    for &(id, session, relevance) in head {
        sessions.entry(session).or_default().push((relevance, id));
    }
    let mut lift = HashMap::new();
    for members in sessions.values_mut().filter(|members| members.len() > 1) {
        members.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        for (_, id) in members.iter() {
            let peers: f64 = members
                .iter()
                .filter(|(_, other)| other != id)
                .take(SESSION_PEERS)
                .map(|(relevance, _)| relevance)
                .sum();
            lift.insert((*id).clone(), weight * peers);
        }
    }
    lift
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(name: &'static str, hits: &[(&str, f64)]) -> CandidateList {
        CandidateList {
            name,
            hits: hits.iter().map(|(id, s)| ((*id).to_owned(), *s)).collect(),
        }
    }

    fn order(fused: &HashMap<String, f64>) -> Vec<String> {
        let mut ids: Vec<(&String, &f64)> = fused.iter().collect();
        ids.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
        ids.into_iter().map(|(id, _)| id.clone()).collect()
    }

    fn scores(fused: HashMap<String, (f64, Vec<(String, usize)>)>) -> HashMap<String, f64> {
        fused.into_iter().map(|(id, (s, _))| (id, s)).collect()
    }

    #[test]
    fn a_weak_vector_list_does_not_bury_a_clear_text_winner() {
        let lists = [
            list("fts", &[("a", 9.0), ("b", 1.2), ("c", 1.0)]),
            list("vector", &[("c", 0.42), ("b", 0.41), ("a", 0.40)]),
        ];
        let rrf = scores(fuse(&lists, Fusion::Rrf { k: 60.0 }));
        let weighted = scores(fuse(
            &lists,
            Fusion::Scores {
                vector_weight: 0.3,
                context_weight: 0.5,
                entity_weight: 0.1,
                feedback_weight: 0.0,
                similarity_floor: 0.3,
                sentence_weight: 0.0,
                sentence_floor: 0.2,
            },
        ));
        // By ranks alone, a (1st and 3rd) ties c (3rd and 1st).
        assert!((rrf["a"] - rrf["c"]).abs() < 1e-12);
        assert_eq!(order(&weighted)[0], "a");
    }

    #[test]
    fn ranks_are_kept_per_list() {
        let lists = [
            list("fts", &[("a", 2.0), ("b", 1.0)]),
            list("entity", &[("b", 1.0)]),
        ];
        let fused = fuse(
            &lists,
            Fusion::Scores {
                vector_weight: 0.3,
                context_weight: 0.5,
                entity_weight: 0.1,
                feedback_weight: 0.0,
                similarity_floor: 0.3,
                sentence_weight: 0.0,
                sentence_floor: 0.2,
            },
        );
        assert_eq!(
            fused["b"].1,
            vec![("fts".to_owned(), 2), ("entity".to_owned(), 1)]
        );
        // Half the best BM25 (0.7 x 0.5), plus the only entity match counting fully (0.1).
        assert!((fused["b"].0 - 0.45).abs() < 1e-12);
    }

    #[test]
    fn near_ties_stay_near_ties() {
        let lists = [list("fts", &[("red", 2.0), ("blue", 1.96)])];
        let fused = scores(fuse(
            &lists,
            Fusion::Scores {
                vector_weight: 0.3,
                context_weight: 0.5,
                entity_weight: 0.1,
                feedback_weight: 0.0,
                similarity_floor: 0.3,
                sentence_weight: 0.0,
                sentence_floor: 0.2,
            },
        ));
        assert!(fused["red"] - fused["blue"] < 0.02);
    }

    #[test]
    fn a_listed_turn_inherits_a_share_of_its_neighbours() {
        let relevance: HashMap<String, f64> = [
            ("question".to_owned(), 1.0),
            ("answer".to_owned(), 0.2),
            ("other".to_owned(), 0.4),
        ]
        .into();
        let neighbours = vec![
            (
                "question".to_owned(),
                Some("greeting".to_owned()),
                Some("answer".to_owned()),
            ),
            ("answer".to_owned(), Some("question".to_owned()), None),
        ];
        let spread = spread_to_neighbours(&relevance, &neighbours, 0.3, 0.1);
        assert!((spread["answer"] - 0.5).abs() < 1e-12);
        assert!((spread["question"] - 1.02).abs() < 1e-12);
        assert!(!spread.contains_key("greeting"), "not listed, not a result");
        assert_eq!(order(&spread), ["question", "answer", "other"]);
    }

    #[test]
    fn a_reply_is_scored_with_what_it_answers() {
        // q1 asks about hiking (BM25 4), a1 answers it without the word (BM25 1); q2 matches
        // alone; a2 matches nothing and follows nothing that matched.
        let text = vec![
            ("q1".to_owned(), 4.0),
            ("q2".to_owned(), 3.0),
            ("a1".to_owned(), 1.0),
        ];
        let next = |id: &str| match id {
            "q1" => Some("a1".to_owned()),
            "a1" => Some("q2".to_owned()),
            _ => None,
        };
        let context = context_scores(&text, next, 10);
        assert_eq!(
            context,
            vec![
                ("a1".to_owned(), 5.0),
                ("q1".to_owned(), 4.0),
                ("q2".to_owned(), 4.0)
            ]
        );
        assert_eq!(context_scores(&text, next, 1).len(), 1);
    }

    #[test]
    fn the_context_list_shares_the_text_weight() {
        let scored = |lists: &[CandidateList]| {
            scores(fuse(
                lists,
                Fusion::Scores {
                    vector_weight: 0.4,
                    context_weight: 0.25,
                    entity_weight: 0.1,
                    feedback_weight: 0.0,
                    similarity_floor: 0.3,
                    sentence_weight: 0.0,
                    sentence_floor: 0.2,
                },
            ))
        };
        let text = list("fts", &[("q", 2.0), ("a", 1.0)]);
        let alone = scored(std::slice::from_ref(&text));
        assert!((alone["q"] - 0.6).abs() < 1e-12);
        let both = scored(&[text, list("context", &[("a", 3.0), ("q", 2.0)])]);
        // q: 0.6 x 0.75 x 1 + 0.6 x 0.25 x 2/3; a: 0.6 x 0.75 x 1/2 + 0.6 x 0.25 x 1.
        assert!((both["q"] - 0.55).abs() < 1e-12);
        assert!((both["a"] - 0.375).abs() < 1e-12);
    }

    #[test]
    fn a_session_lends_its_best_other_matches() {
        let session = |user: &str, id: &str| SessionKey {
            user_id: user.to_owned(),
            chat_id: None,
            session_id: id.to_owned(),
        };
        let (s1, s2, other_user) = (
            session("ana", "s1"),
            session("ana", "s2"),
            session("bo", "s1"),
        );
        let ids: Vec<String> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|id| (*id).to_owned())
            .collect();
        let head = vec![
            (&ids[0], &s1, 1.0),
            (&ids[1], &s1, 0.5),
            (&ids[2], &s1, 0.25),
            (&ids[3], &s1, 0.125),
            (&ids[4], &s2, 0.9),
            // The same session id of another user is another session.
            (&ids[5], &other_user, 0.8),
        ];
        let lift = session_lift(&head, 0.1);
        // Each gets 0.1 x its two best peers: a from b and c, the others from a and the next.
        assert!((lift["a"] - 0.075).abs() < 1e-12);
        assert!((lift["b"] - 0.125).abs() < 1e-12);
        assert!((lift["c"] - 0.15).abs() < 1e-12);
        assert!((lift["d"] - 0.15).abs() < 1e-12);
        assert!(
            !lift.contains_key("e") && !lift.contains_key("f"),
            "alone in a session"
        );
    }
}
