//! Whether a fact is grounded in the memories it cites: most of its content words occur in
//! them. The consolidation refuses an extracted fact that is not; forgetting re-checks a fact
//! that lost one of its sources against the sources it has left (`MemoryRemoval`), and removes
//! it when it is no longer grounded or still carries words only the forgotten source had.

use std::collections::HashSet;

/// Words that say nothing about what a fact is about.
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "are", "was", "were", "has", "have", "had", "his", "her", "hers", "their",
    "they", "them", "she", "him", "its", "this", "that", "with", "from", "user", "users", "about",
    "will", "would", "should", "could", "been", "being", "into", "than", "then", "there", "what",
    "when", "who", "which", "also", "very", "does", "did", "not", "but", "you", "your", "our",
];

/// The share of a fact's content words that must come from the memories it cites. A real small
/// model's inventions shared one word with their sources ("hospital") and passed a check for
/// any shared word; a fact read from the turns keeps most of their words, in the third person.
pub const MIN_GROUNDED_SHARE: f64 = 0.5;

/// The content words of `text`, lowercase: at least three characters, no stop words.
pub fn content_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() >= 3 && !STOP_WORDS.contains(&word.as_str()))
        .collect()
}

/// The content words of `text` cut to five characters, so that inflections meet ("loves" and
/// "love", "hiking" and "hikes" do not all, but most paraphrases keep a noun or a name).
pub fn content_stems(text: &str) -> HashSet<String> {
    content_words(text)
        .into_iter()
        .map(|word| word.chars().take(5).collect())
        .collect()
}

/// Whether most of `content`'s content words ([`MIN_GROUNDED_SHARE`]) occur in `sources`. A
/// fact that shares few was not read from them (a small model's invention, or its prompt echoed
/// back); a fact without content words is not grounded.
pub fn grounded<'a>(content: &str, sources: impl IntoIterator<Item = &'a str>) -> bool {
    let cited: HashSet<String> = sources.into_iter().flat_map(content_stems).collect();
    let stems = content_stems(content);
    if stems.is_empty() {
        return false;
    }
    let found = stems.iter().filter(|stem| cited.contains(*stem)).count();
    found as f64 / stems.len() as f64 >= MIN_GROUNDED_SHARE
}

/// Whether `content` still stands once `forgotten` is gone: grounded in `remaining`, and without
/// a content word that only `forgotten` had (a name, a number, a code word it told), compared
/// whole, not as stems, so that forgetting "tok123" does not spare a fact naming it because
/// another source says "tok124".
pub fn stands_without<'a>(
    content: &str,
    forgotten: impl IntoIterator<Item = &'a str>,
    remaining: &[&str],
) -> bool {
    if !grounded(content, remaining.iter().copied()) {
        return false;
    }
    let kept: HashSet<String> = remaining
        .iter()
        .flat_map(|text| content_words(text))
        .collect();
    let gone: HashSet<String> = forgotten.into_iter().flat_map(content_words).collect();
    content_words(content)
        .iter()
        .all(|word| kept.contains(word) || !gone.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_is_grounded_in_most_of_its_words() {
        let turn = "I love hiking in the Alps every summer";
        assert!(grounded("The user loves hiking in the Alps", [turn]));
        assert!(!grounded("The user works at a hospital in Lyon", [turn]));
        assert!(!grounded("the and for", [turn]), "no content words");
    }

    #[test]
    fn a_fact_stands_only_without_words_of_what_was_forgotten() {
        let gone = ["My locker code is tok123 at the gym"];
        let left = ["I go to the gym every morning, locker by the door"];
        assert!(stands_without(
            "The user goes to the gym every morning",
            gone,
            &left
        ));
        assert!(!stands_without(
            "The user's gym locker code is tok123",
            gone,
            &left
        ));
        assert!(
            !stands_without("The user sings opera", gone, &left),
            "not grounded"
        );
        let similar = ["My locker code at the gym is tok124"];
        assert!(!stands_without(
            "The user's gym locker code is tok123",
            gone,
            &similar
        ));
    }
}
