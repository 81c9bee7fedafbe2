//! BM25 ranking: term frequency, inverse document frequency and length normalisation each move a
//! document up or down as they should.

use mnemo_markdown_memory::{tokenize, Bm25Index};

fn ranked(documents: &[&str], query: &str) -> Vec<usize> {
    Bm25Index::new(documents)
        .search(query, 10)
        .into_iter()
        .map(|hit| hit.doc)
        .collect()
}

#[test]
fn more_query_terms_matched_rank_higher() {
    let documents = [
        "The user practised scales on the cello",
        "Cello lessons with Marta every Monday",
        "Bought a new bicycle helmet",
    ];
    assert_eq!(ranked(&documents, "cello lessons"), vec![1, 0]);
}

#[test]
fn rare_terms_outweigh_common_ones() {
    let documents = [
        "meeting notes about the budget",
        "meeting notes about the roadmap",
        "meeting notes about the offsite in Porto",
        "meeting with Porto office",
    ];
    // "meeting" is in every document, "porto" in two: the Porto documents lead, and between
    // them the one where the query terms make up more of a shorter text.
    let order = ranked(&documents, "meeting porto");
    assert_eq!(&order[..2], &[3, 2]);
    assert_eq!(order.len(), 4);
    let index = Bm25Index::new(documents);
    assert!(index.idf("porto") > index.idf("meeting"));
}

#[test]
fn term_frequency_counts_but_saturates() {
    let documents = [
        "tea tea tea tea tea tea tea tea coffee",
        "tea tea coffee juice water milk soda beer",
        "tea coffee juice water milk soda beer wine",
    ];
    let index = Bm25Index::new(documents);
    let terms = tokenize("tea");
    let scores: Vec<f64> = (0..3).map(|doc| index.score(&terms, doc)).collect();
    assert!(scores[0] > scores[1] && scores[1] > scores[2], "{scores:?}");
    // Eight times the term is far less than eight times the score (k1 saturation).
    assert!(scores[0] < 3.0 * scores[2], "{scores:?}");
}

#[test]
fn shorter_documents_win_at_equal_term_frequency() {
    let documents = [
        "Lisbon trip planned for May with flights hotel museums trams pastries beaches and friends",
        "Lisbon trip in May",
    ];
    assert_eq!(ranked(&documents, "lisbon"), vec![1, 0]);
}

#[test]
fn the_score_matches_the_formula() {
    let documents = ["cello cello lessons", "guitar lessons", "piano"];
    let index = Bm25Index::new(documents);
    // N = 3, n(cello) = 1, tf = 2, |D| = 3, avgdl = (3 + 2 + 1) / 3 = 2.
    let idf = (1.0f64 + (3.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
    let norm = 1.0 - Bm25Index::B + Bm25Index::B * 3.0 / 2.0;
    let expected = idf * 2.0 * (Bm25Index::K1 + 1.0) / (2.0 + Bm25Index::K1 * norm);
    let got = index.score(&tokenize("cello"), 0);
    assert!((got - expected).abs() < 1e-12, "{got} != {expected}");
}

#[test]
fn no_match_no_hit_and_ties_keep_list_order() {
    let documents = ["alpha beta", "alpha beta", "gamma"];
    assert_eq!(ranked(&documents, "delta"), Vec::<usize>::new());
    assert_eq!(ranked(&documents, "alpha"), vec![0, 1]);
    assert!(Bm25Index::new(Vec::<String>::new())
        .search("alpha", 5)
        .is_empty());
    let limited = Bm25Index::new(documents).search("alpha", 1);
    assert_eq!(limited.len(), 1);
}
