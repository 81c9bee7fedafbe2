//! Sentence keys: the turns a user spoke are also kept as one vector per sentence, so that a
//! question in the first person ("which airline did I fly with?") finds the one sentence of a
//! long turn that answers it, where the turn's own vector averages that sentence away.
//!
//! The indexer embeds the sentences of every user turn beside the turn itself (a turn of one
//! sentence is its own single key); the stores keep them with their memory and drop them with
//! it. Hybrid search reads them only for a query in the first person: that asks about the
//! user's own words, and a third-person question over a transcript ("what did Caroline
//! research?") is better served by the turn vectors (see docs/BENCHMARKS.md).

use regex::Regex;
use std::sync::LazyLock;

/// Shortest sentence kept as a key, in characters; shorter ones ("Yes.", "Thanks!") say too
/// little to be searched for on their own.
const MIN_SENTENCE_CHARS: usize = 12;

/// Longest sentence kept as a key, in characters; a longer one is cut (the model reads its
/// first 256 tokens anyway).
const MAX_SENTENCE_CHARS: usize = 1_000;

/// Most keys one turn gets; the rest of a very long turn is searched through the turn's own
/// vector.
pub(crate) const MAX_SENTENCES: usize = 64;

/// Words that put a question in the first person.
static FIRST_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(i|my|me|mine|myself|i'm|i've|i'd)\b")
        .unwrap_or_else(|error| unreachable!("a fixed pattern: {error}"))
});

/// Whether `query` asks in the first person (about the asker's own words).
pub(crate) fn in_first_person(query: &str) -> bool {
    FIRST_PERSON.is_match(query)
}

/// The sentence keys of `text`: split after `.`, `!` or `?` followed by white space, and at
/// line breaks; sentences shorter than [`MIN_SENTENCE_CHARS`] are left out, longer ones than
/// [`MAX_SENTENCE_CHARS`] cut, at most [`MAX_SENTENCES`]. A text of one sentence (or with none
/// long enough) is its own single key, whole and unchanged.
pub fn sentence_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut start = 0;
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let ends = c == '\n' || (c.is_whitespace() && matches!(previous, Some('.' | '!' | '?')));
        if ends {
            push_sentence(&mut keys, &text[start..at]);
            // A run of white space ends the sentence once.
            let mut next = at + c.len_utf8();
            while let Some((later, following)) = chars.peek().copied() {
                if !following.is_whitespace() {
                    break;
                }
                next = later + following.len_utf8();
                chars.next();
            }
            start = next;
            previous = None;
            continue;
        }
        previous = Some(c);
    }
    push_sentence(&mut keys, &text[start..]);
    keys.truncate(MAX_SENTENCES);
    if keys.len() <= 1 {
        // The whole text, as the turn itself was embedded: its vector is the turn's.
        return if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![text.to_owned()]
        };
    }
    keys
}

fn push_sentence(keys: &mut Vec<String>, sentence: &str) {
    let sentence = sentence.trim();
    if sentence.chars().count() >= MIN_SENTENCE_CHARS {
        keys.push(sentence.chars().take(MAX_SENTENCE_CHARS).collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_after_sentence_ends_and_at_line_breaks() {
        let keys = sentence_keys(
            "I flew to Lisbon with TAP last May.  Late, too! Was it the crew?\n\
             Anyway the hotel near the river was lovely",
        );
        assert_eq!(
            keys,
            [
                "I flew to Lisbon with TAP last May.",
                "Was it the crew?",
                "Anyway the hotel near the river was lovely",
            ]
        );
    }

    #[test]
    fn a_short_or_single_sentence_text_is_its_own_key() {
        assert_eq!(sentence_keys("  I like tea.  "), ["  I like tea.  "]);
        assert_eq!(sentence_keys("Yes. No. Ok."), ["Yes. No. Ok."]);
        assert!(sentence_keys(" \n ").is_empty());
    }

    #[test]
    fn cuts_long_sentences_and_keeps_at_most_the_limit() {
        let long = "word ".repeat(400);
        let keys = sentence_keys(&format!("{long}. And one more sentence here."));
        assert_eq!(keys[0].chars().count(), MAX_SENTENCE_CHARS);
        let many: String = (0..100)
            .map(|n| format!("This is sentence {n}. "))
            .collect();
        assert_eq!(sentence_keys(&many).len(), MAX_SENTENCES);
    }

    #[test]
    fn tells_first_person_questions() {
        assert!(in_first_person("Which airline did I fly with?"));
        assert!(in_first_person("What's my sister's name"));
        assert!(in_first_person("where did I'm going"));
        assert!(!in_first_person("What did Caroline research?"));
        assert!(!in_first_person("Is it time for the mission?"));
    }
}
