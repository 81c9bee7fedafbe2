//! Turning what a user typed into a safe FTS5 query.
//!
//! User text never reaches FTS5 syntax: it is split into words (letters and digits), each word is
//! wrapped in double quotes (so `AND`, `OR`, `NEAR`, `*`, `:`, `^`, brackets and quotes are plain
//! text), and the words are joined with `OR` so that BM25 ranks memories by how many rare words
//! they share with the query.

use crate::text::{is_stopword, terms, MAX_TERMS};

/// The words of `text` worth searching: its non-stopwords, or all its words when it has nothing
/// else; at most `MAX_TERMS`.
pub(crate) fn query_terms(text: &str) -> Vec<String> {
    let all = terms(text);
    let content: Vec<String> = all
        .iter()
        .filter(|word| !is_stopword(word))
        .cloned()
        .collect();
    let mut chosen = if content.is_empty() { all } else { content };
    chosen.truncate(MAX_TERMS);
    chosen
}

/// The FTS5 query matching any of `terms`, each quoted; `None` when there are none.
pub(crate) fn match_any(terms: &[String]) -> Option<String> {
    joined(terms, " OR ")
}

/// The FTS5 query matching all of `terms` together; `None` when there are none.
pub(crate) fn match_all(terms: &[String]) -> Option<String> {
    joined(terms, " AND ")
}

/// `terms`, each quoted, joined by the FTS5 operator `operator`; `None` when there are none.
fn joined(terms: &[String], operator: &str) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<String> = terms.iter().map(|word| quote(word)).collect();
    Some(quoted.join(operator))
}

/// The FTS5 query matching any of `rare`, or all of `common` together (at least two of them):
/// a memory that has only one common word is left out. `None` when that matches nothing.
pub(crate) fn match_rare_or_all_common(rare: &[String], common: &[String]) -> Option<String> {
    let mut parts: Vec<String> = rare.iter().map(|word| quote(word)).collect();
    if common.len() >= 2 {
        parts.extend(match_all(common).map(|all| format!("({all})")));
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join(" OR "))
    }
}

/// `word` as an FTS5 string: in double quotes, inner quotes doubled, NUL characters (which end
/// an FTS5 string early) dropped.
fn quote(word: &str) -> String {
    format!("\"{}\"", word.replace('\0', "").replace('"', "\"\""))
}

/// The FTS5 query for `text`, or `None` when it has no words.
#[cfg(test)]
fn fts_query(text: &str) -> Option<String> {
    match_any(&query_terms(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_every_term_and_drops_syntax() {
        assert_eq!(
            fts_query("coffee AND \"tea\" OR NEAR(x*:y)").as_deref(),
            Some("\"coffee\" OR \"tea\" OR \"near\" OR \"x\" OR \"y\"")
        );
        assert_eq!(fts_query("").as_deref(), None);
        assert_eq!(fts_query("((( ''' ***").as_deref(), None);
        assert_eq!(fts_query("the").as_deref(), Some("\"the\""));
        assert_eq!(
            fts_query("what is the boiler code").as_deref(),
            Some("\"boiler\" OR \"code\"")
        );
    }

    #[test]
    fn rare_words_or_all_common_ones() {
        let words = crate::search::strings;
        assert_eq!(
            match_rare_or_all_common(&words(&["zebra"]), &words(&["dana", "lis\"bon"])).as_deref(),
            Some("\"zebra\" OR (\"dana\" AND \"lis\"\"bon\")")
        );
        assert_eq!(
            match_rare_or_all_common(&words(&["zebra"]), &words(&["dana"])).as_deref(),
            Some("\"zebra\"")
        );
        assert_eq!(match_rare_or_all_common(&[], &words(&["dana"])), None);
    }

    #[test]
    fn bounds_huge_queries() {
        let text = "word ".repeat(20_000) + &(0..500).map(|n| format!("w{n} ")).collect::<String>();
        let query = fts_query(&text).unwrap();
        assert!(query.matches(" OR ").count() < MAX_TERMS);
    }
}

#[cfg(test)]
pub(crate) mod properties {
    use super::*;
    use crate::text::MAX_TERM_CHARS;
    use proptest::prelude::*;

    /// Text made of FTS5 syntax, quotes, control characters and any other character.
    pub(crate) fn hostile_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            any::<char>().prop_map(String::from),
            prop::sample::select(vec![
                "\"", "\"\"", "*", "(", ")", ":", "^", "-", "+", "\0", " ", "AND", "OR", "NOT",
                "NEAR", "content", "garden", "quartz", "the",
            ])
            .prop_map(str::to_owned),
        ];
        prop::collection::vec(piece, 0..30).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn query_terms_are_bounded_words(text in hostile_text()) {
            let chosen = query_terms(&text);
            prop_assert!(chosen.len() <= MAX_TERMS);
            for term in chosen {
                prop_assert!(!term.is_empty());
                prop_assert!(term.chars().count() <= MAX_TERM_CHARS * 3, "{term:?}");
                prop_assert!(term.chars().all(char::is_alphanumeric), "{term:?}");
            }
        }
    }
}
