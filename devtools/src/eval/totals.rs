//! Retrieval metrics over a set of questions: recall@k, recall_all@k, hit@k, MRR and nDCG@10.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// Results of one search mode over a set of questions.
#[derive(Default, Clone)]
pub(super) struct Totals {
    pub(super) questions: usize,
    recall: BTreeMap<usize, f64>,
    recall_all: BTreeMap<usize, f64>,
    hit: BTreeMap<usize, f64>,
    reciprocal_rank: f64,
    ndcg10: f64,
}

impl Totals {
    /// Scores one ranking (turn or session ids, best first, no duplicates) against `evidence`.
    pub(super) fn add(&mut self, ks: &[usize], ranked: &[String], evidence: &[String]) {
        self.questions += 1;
        for &k in ks {
            let top: Vec<&String> = ranked.iter().take(k).collect();
            let found = evidence.iter().filter(|id| top.contains(id)).count();
            *self.recall.entry(k).or_default() += found as f64 / evidence.len() as f64;
            *self.recall_all.entry(k).or_default() += f64::from(u8::from(found == evidence.len()));
            *self.hit.entry(k).or_default() += f64::from(u8::from(found > 0));
        }
        if let Some(rank) = ranked.iter().position(|id| evidence.contains(id)) {
            self.reciprocal_rank += 1.0 / (rank + 1) as f64;
        }
        let gain = |position: usize| 1.0 / ((position + 2) as f64).log2();
        let dcg: f64 = ranked
            .iter()
            .take(10)
            .enumerate()
            .filter(|(_, id)| evidence.contains(id))
            .map(|(position, _)| gain(position))
            .sum();
        let ideal: f64 = (0..evidence.len().min(10)).map(gain).sum();
        if ideal > 0.0 {
            self.ndcg10 += dcg / ideal;
        }
    }

    pub(super) fn json(&self) -> Value {
        let n = self.questions.max(1) as f64;
        let mut object = Map::new();
        for (k, value) in &self.recall {
            object.insert(format!("recall@{k}"), json!(round(value / n)));
        }
        for (k, value) in &self.recall_all {
            object.insert(format!("recall_all@{k}"), json!(round(value / n)));
        }
        for (k, value) in &self.hit {
            object.insert(format!("hit@{k}"), json!(round(value / n)));
        }
        object.insert("mrr".to_owned(), json!(round(self.reciprocal_rank / n)));
        object.insert("ndcg@10".to_owned(), json!(round(self.ndcg10 / n)));
        object.insert("questions".to_owned(), json!(self.questions));
        Value::Object(object)
    }
}

pub(super) fn round(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}
