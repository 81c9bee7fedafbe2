//! Ranked full-text search: Okapi BM25 over a small set of documents, built per query.
//!
//! For a query with terms `q` and a document `D` of `|D|` terms:
//!
//! ```text
//! score(D) = Σ_q  idf(q) · tf(q, D) · (k1 + 1) / (tf(q, D) + k1 · (1 − b + b · |D| / avgdl))
//! idf(q)   = ln(1 + (N − n(q) + 0.5) / (n(q) + 0.5))
//! ```
//!
//! `tf` is how often the term occurs in the document (term frequency), `n(q)` how many of the `N`
//! documents contain it (so rare terms weigh more: inverse document frequency), and the `b` part
//! normalises for length, so a long entry does not win merely by being long. The `1 +` inside the
//! logarithm (as in Lucene) keeps `idf` positive for terms found in most documents.

use std::collections::HashMap;

/// Words too common to say anything about a document.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have", "he",
    "her", "his", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "she", "so", "that",
    "the", "their", "them", "they", "this", "to", "was", "we", "were", "what", "when", "which",
    "who", "will", "with", "you", "your",
];

/// The search terms of `text`: lowercase runs of letters and digits, without stopwords and
/// one-letter words (one-digit numbers are kept).
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() > 1 || word.chars().all(|c| c.is_numeric()))
        .filter(|word| !STOPWORDS.contains(&word.as_str()))
        .collect()
}

/// One ranked document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Hit {
    /// The document's position in the list the index was built from.
    pub doc: usize,
    /// Its BM25 score; higher is better, always above zero.
    pub score: f64,
}

/// An in-memory BM25 index over a list of documents.
#[derive(Debug, Clone)]
pub struct Bm25Index {
    term_counts: Vec<HashMap<String, u32>>,
    lengths: Vec<usize>,
    doc_freq: HashMap<String, usize>,
    avg_len: f64,
}

impl Bm25Index {
    /// Term-frequency saturation: how quickly repeating a term stops adding to the score.
    pub const K1: f64 = 1.2;
    /// Length normalisation: 0 ignores document length, 1 normalises fully.
    pub const B: f64 = 0.75;

    /// Indexes `documents`; a hit's [`Bm25Hit::doc`] is the position in this list.
    pub fn new<I, S>(documents: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut term_counts = Vec::new();
        let mut lengths = Vec::new();
        let mut doc_freq: HashMap<String, usize> = HashMap::new();
        for document in documents {
            let terms = tokenize(document.as_ref());
            let mut counts: HashMap<String, u32> = HashMap::new();
            for term in &terms {
                *counts.entry(term.clone()).or_default() += 1;
            }
            for term in counts.keys() {
                *doc_freq.entry(term.clone()).or_default() += 1;
            }
            lengths.push(terms.len());
            term_counts.push(counts);
        }
        let total: usize = lengths.iter().sum();
        let avg_len = if lengths.is_empty() {
            0.0
        } else {
            total as f64 / lengths.len() as f64
        };
        Self {
            term_counts,
            lengths,
            doc_freq,
            avg_len,
        }
    }

    /// How many documents are indexed.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// True when no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The inverse document frequency of `term` (already tokenised).
    pub fn idf(&self, term: &str) -> f64 {
        let total = self.len() as f64;
        let containing = self.doc_freq.get(term).copied().unwrap_or(0) as f64;
        (1.0 + (total - containing + 0.5) / (containing + 0.5)).ln()
    }

    /// The BM25 score of document `doc` for the (tokenised, deduplicated) `terms`.
    pub fn score(&self, terms: &[String], doc: usize) -> f64 {
        let (Some(counts), Some(&length)) = (self.term_counts.get(doc), self.lengths.get(doc))
        else {
            return 0.0;
        };
        let norm = if self.avg_len > 0.0 {
            1.0 - Self::B + Self::B * length as f64 / self.avg_len
        } else {
            1.0
        };
        terms
            .iter()
            .filter_map(|term| counts.get(term).map(|&tf| (term, f64::from(tf))))
            .map(|(term, tf)| self.idf(term) * tf * (Self::K1 + 1.0) / (tf + Self::K1 * norm))
            .sum()
    }

    /// The documents matching `query`, best first, at most `limit`; ties keep list order.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Bm25Hit> {
        let mut terms = tokenize(query);
        terms.sort();
        terms.dedup();
        let mut hits: Vec<Bm25Hit> = (0..self.len())
            .map(|doc| Bm25Hit {
                doc,
                score: self.score(&terms, doc),
            })
            .filter(|hit| hit.score > 0.0)
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
        hits.truncate(limit);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_lowercase_words_without_stopwords() {
        assert_eq!(
            tokenize("The user's Cello-lessons are on 3 Mondays!"),
            vec!["user", "cello", "lessons", "3", "mondays"]
        );
        assert!(tokenize("a the of").is_empty());
    }

    #[test]
    fn idf_is_positive_even_for_a_term_in_every_document() {
        let index = Bm25Index::new(["cello", "cello", "cello"]);
        assert!(index.idf("cello") > 0.0);
        assert!(index.idf("violin") > index.idf("cello"));
    }
}
