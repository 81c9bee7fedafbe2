//! Pseudo-relevance feedback: a query's best first matches say what it is about in the
//! memories' own words, so the query vector is moved towards theirs (Rocchio's rule,
//! `q' = q + shift × mean(best)`, each a unit vector), and every candidate the other lists
//! found is scored again by its similarity to `q'`. Those scores are one more list,
//! `feedback`, fused with its own weight (`feedback_weight`).
//!
//! "What activities has Melanie done with her family?" embeds far from "I'm off to go swimming
//! with the kids", but the first matches ("We always look forward to our family camping
//! trip") lie between the two. The list re-scores the candidates in hand and adds none: a
//! nearest-neighbour search for `q'` over the whole index found no more on LoCoMo, and costs
//! another scan of it. The candidates' vectors come from one read of the store by id.

use super::candidates::query_head;
use super::fusion::{fuse, Fusion};
use super::searcher::Searcher;
use super::source::SearchSource;
use super::speakers::without_names;
use crate::error::Result;
use crate::types::{CandidateList, SearchRequest};

/// `vector` scaled to unit length; `None` for a zero or non-finite vector.
fn unit(vector: &[f32]) -> Option<Vec<f32>> {
    let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| vector.iter().map(|value| value / norm).collect())
}

/// The cosine of two unit vectors.
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Rocchio's query: the unit `query` plus `shift` times the unit mean of the unit `matches`, as
/// a unit vector. `None` when no match has the query's length.
pub(crate) fn shaped_query(query: &[f32], matches: &[Vec<f32>], shift: f32) -> Option<Vec<f32>> {
    let query = unit(query)?;
    let units: Vec<Vec<f32>> = matches
        .iter()
        .filter(|vector| vector.len() == query.len())
        .filter_map(|vector| unit(vector))
        .collect();
    if units.is_empty() {
        return None;
    }
    let sum: Vec<f32> = (0..query.len())
        .map(|index| units.iter().map(|vector| vector[index]).sum())
        .collect();
    let mean = unit(&sum)?;
    let moved: Vec<f32> = query
        .iter()
        .zip(&mean)
        .map(|(value, centre)| value + shift * centre)
        .collect();
    unit(&moved)
}

/// The ids of the `count` best memories of `lists` fused by `fusion`, best first.
fn best_first_matches(lists: &[CandidateList], fusion: Fusion, count: usize) -> Vec<String> {
    let fused = fuse(lists, fusion);
    let mut ranked: Vec<(&String, f64)> =
        fused.iter().map(|(id, (score, _))| (id, *score)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    ranked
        .into_iter()
        .take(count)
        .map(|(id, _)| id.clone())
        .collect()
}

/// Every memory some list of `lists` holds, once, in a fixed order.
fn candidates_in(lists: &[CandidateList]) -> Vec<String> {
    let mut ids: Vec<String> = lists
        .iter()
        .flat_map(|list| list.hits.iter().map(|(id, _)| id.clone()))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

impl<S: SearchSource + ?Sized + 'static> Searcher<S> {
    /// The feedback list for `lists` (see the module doc): their candidates at least
    /// `min_similarity` to the shaped query, best first, at most `depth`. `None` when vector
    /// search is unavailable or none of the best matches has a vector yet. `speakers` are left
    /// out of the embedded query, as for the vector list.
    pub(super) async fn feedback_list(
        &self,
        request: &SearchRequest,
        lists: &[CandidateList],
        speakers: &[String],
        depth: usize,
    ) -> Result<Option<Vec<(String, f64)>>> {
        let Some(embedder) = self.vector_embedder().await else {
            return Ok(None);
        };
        let head = query_head(&request.query);
        let text = without_names(head, speakers);
        let Some(query) = self
            .query_vector(&embedder, text.as_deref().unwrap_or(head))
            .await?
        else {
            return Ok(None);
        };
        let config = &self.config;
        // The best first matches are among the candidates: one read of the store serves both.
        let best = best_first_matches(lists, self.fusion(request), config.feedback_matches);
        let stored = self.store.stored_vectors(&candidates_in(lists)).await?;
        let matches: Vec<Vec<f32>> = best
            .iter()
            .filter_map(|id| stored.get(id).cloned())
            .collect();
        let Some(shaped) = shaped_query(&query, &matches, config.feedback_shift as f32) else {
            return Ok(None);
        };
        let floor = f64::from(request.min_similarity.unwrap_or(config.min_similarity));
        // A vector of another length (an earlier provider's, on PostgreSQL) is not compared.
        let mut scored: Vec<(String, f64)> = stored
            .into_iter()
            .filter(|(_, vector)| vector.len() == shaped.len())
            .filter_map(|(id, vector)| Some((id, f64::from(cosine(&unit(&vector)?, &shaped)))))
            .filter(|(_, similarity)| *similarity >= floor)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(depth);
        Ok(Some(scored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shaped_query_moves_towards_the_matches_by_the_shift() {
        let query = [1.0, 0.0, 0.0];
        let matches = vec![vec![0.0, 2.0, 0.0], vec![0.0, 1.0, 0.0]];
        let halfway = shaped_query(&query, &matches, 1.0).unwrap();
        // Equal parts of the query and the matches' direction: 45 degrees from each.
        assert!((cosine(&halfway, &[1.0, 0.0, 0.0]) - 0.5_f32.sqrt()).abs() < 1e-6);
        assert!((cosine(&halfway, &[0.0, 1.0, 0.0]) - 0.5_f32.sqrt()).abs() < 1e-6);
        let nearer = shaped_query(&query, &matches, 0.5).unwrap();
        assert!(cosine(&nearer, &query) > cosine(&halfway, &query));
        assert!((cosine(&nearer, &nearer) - 1.0).abs() < 1e-6);
        let unmoved = shaped_query(&query, &matches, 0.0).unwrap();
        assert!((cosine(&unmoved, &query) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_shaped_query_needs_a_match_of_the_query_s_length() {
        assert!(shaped_query(&[1.0, 0.0], &[], 0.5).is_none());
        assert!(shaped_query(&[1.0, 0.0], &[vec![1.0, 0.0, 0.0]], 0.5).is_none());
        assert!(shaped_query(&[0.0, 0.0], &[vec![1.0, 0.0]], 0.5).is_none());
        // A zero match is skipped, not averaged in.
        let shaped = shaped_query(&[1.0, 0.0], &[vec![0.0, 0.0], vec![0.0, 3.0]], 1.0).unwrap();
        assert!((shaped[0] - shaped[1]).abs() < 1e-6);
    }

    #[test]
    fn the_best_first_matches_follow_the_fused_order() {
        let lists = vec![
            CandidateList {
                name: "fts",
                hits: vec![("a".into(), 4.0), ("b".into(), 2.0), ("c".into(), 1.0)],
            },
            CandidateList {
                name: "vector",
                hits: vec![("c".into(), 0.9), ("d".into(), 0.5)],
            },
        ];
        let fusion = Fusion::Scores {
            vector_weight: 0.5,
            context_weight: 0.5,
            entity_weight: 0.1,
            feedback_weight: 0.3,
            similarity_floor: 0.3,
            sentence_weight: 0.0,
            sentence_floor: 0.2,
        };
        // a: 0.5; b: 0.25; c: 0.125 + 0.5; d: 0.5 × 0.2 / 0.6.
        assert_eq!(best_first_matches(&lists, fusion, 2), ["c", "a"]);
        assert_eq!(candidates_in(&lists), ["a", "b", "c", "d"]);
        // The feedback list is fused as a cosine list with its own weight.
        let mut with_feedback = lists.clone();
        with_feedback.push(CandidateList {
            name: "feedback",
            hits: vec![("b".into(), 0.8), ("d".into(), 0.55)],
        });
        let fused = fuse(&with_feedback, fusion);
        assert!((fused["b"].0 - (0.25 + 0.3)).abs() < 1e-9, "{fused:?}");
        assert!(
            (fused["d"].0 - (0.5 * 0.2 / 0.6 + 0.3 * 0.5)).abs() < 1e-9,
            "{fused:?}"
        );
    }
}
