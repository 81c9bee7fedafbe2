//! Whether a fact is grounded in the memories it cites: most of its content words occur in
//! them. The consolidation keeps an extracted fact only when it is a statement ([`is_statement`])
//! grounded in the user's turns of its page (those it cites, else the ones
//! [`grounding_sources`] finds); the chat's model's memories are checked against the user's
//! words (`service/trust.rs`); forgetting re-checks a fact that lost one of its sources against
//! the sources it has left (`MemoryRemoval`), and removes it when it is no longer grounded or
//! still carries words only the forgotten source had.

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

/// Words that say nothing about what a fact is about, in scripts written without spaces: "user"
/// in Chinese (用户, 用戶), Japanese (ユーザー) and Thai (ผู้ใช้). They are cut out before the
/// letters are paired, so they leave no pair behind.
const SPACELESS_STOP_WORDS: &[&str] = &["用户", "用戶", "ユーザー", "ユーザ", "ผู้ใช้"];

/// The content words of `text`, lowercase: at least three characters, no stop words. A run of
/// letters of a script written without spaces ([`is_spaceless_letter`]) has no words to split,
/// so it gives each pair of neighbouring letters instead, as search engines index Chinese and
/// Japanese ("我住在北京" gives 我住, 住在, 在北, 北京; Thai gets the same, cruder than its
/// dictionary word breaks), and a lone letter gives itself. Pairs of hiragana alone are
/// Japanese grammar ("して", "ます") and are left out, as stop words are.
pub fn content_words(text: &str) -> HashSet<String> {
    let mut words = HashSet::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || is_spaceless_letter(c))) {
        let letters: Vec<char> = word.chars().collect();
        for run in letters.chunk_by(|a, b| is_spaceless_letter(*a) == is_spaceless_letter(*b)) {
            let run: String = run.iter().collect();
            if run.starts_with(is_spaceless_letter) {
                letter_pairs(&run, &mut words);
            } else {
                let word = run.to_lowercase();
                if word.chars().count() >= 3 && !STOP_WORDS.contains(&word.as_str()) {
                    words.insert(word);
                }
            }
        }
    }
    words
}

/// Adds the pairs of neighbouring letters of `run` (letters of a script written without spaces)
/// to `words`, without its stop words and pairs of grammar.
fn letter_pairs(run: &str, words: &mut HashSet<String>) {
    let mut run = run.to_owned();
    for stop in SPACELESS_STOP_WORDS {
        run = run.replace(stop, " ");
    }
    // Hiragana and the long vowel mark: particles and endings, not what a fact is about.
    let grammar = |letters: &[char]| {
        letters
            .iter()
            .all(|c| matches!(c, '\u{3040}'..='\u{309F}' | '\u{30FC}'))
    };
    for segment in run.split(' ') {
        let letters: Vec<char> = segment.chars().collect();
        if letters.len() == 1 && !grammar(&letters) {
            words.insert(segment.to_owned());
        }
        words.extend(
            letters
                .windows(2)
                .filter(|pair| !grammar(pair))
                .map(|pair| pair.iter().collect::<String>()),
        );
    }
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

/// The fewest of `candidates` that together ground `content` ([`grounded`]), as indices into
/// `candidates`, best match first: each next one adds the most of the content's stems not yet
/// found (the earlier candidate on a tie). `None` when even all candidates that share a stem do
/// not ground it. The consolidation keeps a fact that cites the wrong turn with the turns this
/// finds, not with the model's citation.
pub fn grounding_sources(content: &str, candidates: &[&str]) -> Option<Vec<usize>> {
    let stems = content_stems(content);
    if stems.is_empty() {
        return None;
    }
    let mut remaining: Vec<(usize, HashSet<String>)> = candidates
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let shared = content_stems(text)
                .into_iter()
                .filter(|stem| stems.contains(stem))
                .collect();
            (index, shared)
        })
        .collect();
    let mut found: HashSet<String> = HashSet::new();
    let mut chosen = Vec::new();
    // The share [`grounded`] asks for, of the stems the chosen candidates hold.
    while (found.len() as f64 / stems.len() as f64) < MIN_GROUNDED_SHARE {
        let best = remaining
            .iter()
            .enumerate()
            .map(|(position, (_, shared))| (position, shared.difference(&found).count()))
            .filter(|(_, new)| *new > 0)
            // The first of the candidates adding the most: `max_by_key` keeps the last.
            .min_by_key(|(position, new)| (std::cmp::Reverse(*new), *position))?;
        let (index, shared) = remaining.remove(best.0);
        found.extend(shared);
        chosen.push(index);
    }
    Some(chosen)
}

/// The fewest words a fact needs to be a statement, with [`MIN_STATEMENT_CONTENT_WORDS`] of them
/// content words. A real small model saved "Ben" and "the company" as facts; "Ana is
/// vegetarian" is the shortest kind of statement worth keeping.
pub const MIN_STATEMENT_WORDS: usize = 3;

/// The fewest distinct content words ([`content_words`]) a fact needs to be a statement: who or
/// what it is about, and something said of it.
pub const MIN_STATEMENT_CONTENT_WORDS: usize = 2;

/// The fewest letters of a script written without spaces (Chinese, Japanese, Thai and their
/// neighbours) that make a statement: "我的妻子叫安娜" ("my wife is called Ana") has seven, "我的妻子"
/// ("my wife") four.
pub const MIN_STATEMENT_SPACELESS_LETTERS: usize = 6;

/// Whether `c` is a letter of a script written without spaces between words: Han, Hiragana,
/// Katakana, Thai, Lao, Tibetan, Myanmar, Khmer. Its word breaks, where marked, are zero-width
/// spaces.
pub fn is_spaceless_letter(c: char) -> bool {
    matches!(
        c,
        '\u{3040}'..='\u{30FF}'
            | '\u{3400}'..='\u{4DBF}'
            | '\u{4E00}'..='\u{9FFF}'
            | '\u{0E00}'..='\u{0FFF}'
            | '\u{1000}'..='\u{109F}'
            | '\u{1780}'..='\u{17FF}'
    )
}

/// Whether `content` is a statement rather than a fragment: at least [`MIN_STATEMENT_WORDS`]
/// words (separated by spaces, each with a letter or digit) of which at least
/// [`MIN_STATEMENT_CONTENT_WORDS`] are distinct content words, or, in a script written without
/// spaces, at least [`MIN_STATEMENT_SPACELESS_LETTERS`] of its letters. A count, not a grammar:
/// "Ben's dog Pixel" passes it.
pub fn is_statement(content: &str) -> bool {
    if content.chars().filter(|c| is_spaceless_letter(*c)).count()
        >= MIN_STATEMENT_SPACELESS_LETTERS
    {
        return true;
    }
    let words = content
        .split_whitespace()
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .count();
    // Letter pairs are no words here: "my wife 安娜" is a fragment, as "my wife" is.
    let content = content_words(content)
        .into_iter()
        .filter(|word| !word.chars().any(is_spaceless_letter))
        .count();
    words >= MIN_STATEMENT_WORDS && content >= MIN_STATEMENT_CONTENT_WORDS
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
    fn a_fact_in_a_script_without_spaces_is_grounded_by_its_letter_pairs() {
        // "I live in Beijing" and "my wife is called Ana"; the facts in the third person.
        let turns = ["我住在北京", "我的妻子叫安娜"];
        assert!(grounded("用户住在北京", [turns[0]]));
        assert!(grounded("用户的妻子叫安娜", [turns[1]]));
        assert_eq!(grounding_sources("用户的妻子叫安娜", &turns), Some(vec![1]));
        // "The user is a member of the team": not in what the user said.
        assert!(!grounded("用户是团队成员", turns));
        // Japanese: "I live in Tokyo", "the user lives in Tokyo".
        assert!(grounded(
            "ユーザーは東京に住んでいる",
            ["私は東京に住んでいます"]
        ));
        assert!(!grounded(
            "ユーザーは大阪の会社で働いている",
            ["私は東京に住んでいます"]
        ));
        // Swapping the one noun is no paraphrase: "works as a doctor" is not in "I work as a
        // teacher", whatever grammar the two share.
        assert!(!grounded(
            "ユーザーは医者として働いている",
            ["私は先生として働いています"]
        ));
        // Thai: "the user likes cats" is in "I like cats"; "the user is a doctor" is not.
        assert!(grounded("ผู้ใช้ชอบแมว", ["ฉันชอบแมว"]));
        assert!(!grounded("ผู้ใช้เป็นหมอ", ["ฉันชอบแมว"]));
        // Words and letters mixed in one run: both count.
        assert_eq!(
            content_words("Ana住在Lisbon"),
            HashSet::from(["ana", "住在", "lisbon"].map(String::from))
        );
    }

    #[test]
    fn the_sources_that_ground_a_fact_are_the_fewest_best_matches() {
        let turns = [
            "I walked the dog this morning",
            "My brother Ben adopted a dog named Pixel",
            "Ben lives in Porto with his wife",
        ];
        // The turn that shares the most comes alone when it is enough.
        assert_eq!(
            grounding_sources("Ben adopted a dog named Pixel", &turns),
            Some(vec![1])
        );
        // Spread over two turns: the best match first, then the one that adds most.
        let spread = "Ben adopted Pixel, moved to Porto and married Lucia, a nurse";
        assert_eq!(grounding_sources(spread, &turns), Some(vec![1, 2]));
        assert!(grounded(spread, [turns[1], turns[2]]));
        assert!(!grounded(spread, [turns[1]]));
        // A tie goes to the earlier turn.
        assert_eq!(
            grounding_sources("The dog", &["a dog", "the dog"]),
            Some(vec![0])
        );
        assert_eq!(
            grounding_sources("The user works at a hospital in Lyon", &turns),
            None
        );
        assert_eq!(grounding_sources("Ben adopted Pixel", &[]), None);
        assert_eq!(
            grounding_sources("the and for", &turns),
            None,
            "no content words"
        );
    }

    #[test]
    fn a_fragment_is_not_a_statement() {
        for fragment in [
            "Ben",
            "the company",
            "",
            "  Pixel  ",
            "The user's sister",
            "a b c",
            // "my wife": four letters of a script written without spaces.
            "\u{6211}\u{7684}\u{59BB}\u{5B50}",
            // Letter pairs are no words: a name alone beside words is still a fragment.
            "my wife 安娜",
            "the company 华为",
        ] {
            assert!(!is_statement(fragment), "{fragment:?}");
        }
        for fact in [
            "Ben has a dog named Pixel",
            // "my wife is called Ana".
            "\u{6211}\u{7684}\u{59BB}\u{5B50}\u{53EB}\u{5B89}\u{5A1C}",
            "Ana is vegetarian",
            "The user's sister Dana moved to Lisbon",
        ] {
            assert!(is_statement(fact), "{fact:?}");
        }
        // Words of punctuation alone are not words.
        assert!(!is_statement("Ana - vegetarian"));
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
