//! Query shaping for conversations: the people a conversation is between.
//!
//! A conversation's speakers are named everywhere in it, so a question naming one of them ("what
//! are Caroline's plans?") says *whose* memory is wanted, not *what* it is about. Two things
//! follow, both measured on LoCoMo (docs/BENCHMARKS.md):
//! - the text embedded for the vector list leaves their names out: in a small embedding model a
//!   name pulls the query towards every turn that greets or mentions the person, whatever it
//!   says (vector recall@10 0.42 with the names, 0.55 without);
//! - a turn the one named person spoke (`Caroline: …`, the transcript convention episodes
//!   follow) ranks higher.
//!
//! Who counts as a speaker is decided by the entity table, like inverse document frequency: a
//! person linked to so many memories that the entity list leaves them out (see
//! `entities::QueryEntities`), and who speaks in them: one of their newest memories is a turn
//! they spoke. Someone only talked about, however often, keeps their name in the query.

use crate::text::{is_stopword, terms};

/// Longest speaker label read at the start of a turn, in characters.
const MAX_LABEL_CHARS: usize = 64;

/// `query` without the words of `names` (whole words, case-insensitive, with a possessive
/// `'s`), or `None` when nothing would change or nothing but stop words would be left: then the
/// query is embedded as it is.
pub(crate) fn without_names(query: &str, names: &[String]) -> Option<String> {
    let name_words: Vec<Vec<String>> = names
        .iter()
        .map(|name| terms(name))
        .filter(|words| !words.is_empty())
        .collect();
    if name_words.is_empty() {
        return None;
    }
    // Words with their byte ranges, so the query keeps its own spelling and punctuation.
    let mut words: Vec<(usize, usize, String)> = Vec::new();
    let mut start = None;
    for (index, character) in query.char_indices().chain([(query.len(), ' ')]) {
        match (character.is_alphanumeric(), start) {
            (true, None) => start = Some(index),
            (false, Some(from)) => {
                words.push((from, index, query[from..index].to_lowercase()));
                start = None;
            }
            _ => {}
        }
    }
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut position = 0;
    while position < words.len() {
        let matched = name_words.iter().find(|name| {
            name.len() <= words.len() - position
                && name
                    .iter()
                    .zip(&words[position..])
                    .all(|(want, (_, _, word))| want == word)
        });
        match matched {
            Some(name) => {
                let from = words[position].0;
                let mut to = words[position + name.len() - 1].1;
                // "Caroline's": the possessive goes with the name.
                if let Some((next_from, next_to, word)) = words.get(position + name.len()) {
                    if word == "s" && query[to..*next_from].chars().all(|c| "'’".contains(c)) {
                        to = *next_to;
                        position += 1;
                    }
                }
                cut.push((from, to));
                position += name.len();
            }
            None => position += 1,
        }
    }
    if cut.is_empty() {
        return None;
    }
    let mut shaped = String::with_capacity(query.len());
    let mut kept_from = 0;
    for (from, to) in cut {
        shaped.push_str(&query[kept_from..from]);
        kept_from = to;
    }
    shaped.push_str(&query[kept_from..]);
    let shaped = shaped.split_whitespace().collect::<Vec<_>>().join(" ");
    terms(&shaped)
        .iter()
        .any(|word| !is_stopword(word))
        .then_some(shaped)
}

/// True when `content` is a turn `speaker` spoke: it starts with `speaker`, then `:`
/// (case-insensitive).
pub(crate) fn spoken_by(content: &str, speaker: &str) -> bool {
    let head: String = content.chars().take(MAX_LABEL_CHARS).collect();
    head.split_once(':')
        .is_some_and(|(label, _)| label.trim().eq_ignore_ascii_case(speaker.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::strings as names;

    #[test]
    fn names_and_their_possessives_are_left_out() {
        assert_eq!(
            without_names(
                "What are Caroline's plans for the summer?",
                &names(&["Caroline"])
            )
            .as_deref(),
            Some("What are plans for the summer?")
        );
        assert_eq!(
            without_names(
                "When did caroline go to the support group with Mel Jones?",
                &names(&["Caroline", "Mel Jones"])
            )
            .as_deref(),
            Some("When did go to the support group with ?")
        );
    }

    #[test]
    fn a_query_left_without_content_is_not_shaped() {
        assert_eq!(
            without_names("Who is Caroline?", &names(&["Caroline"])),
            None
        );
        assert_eq!(
            without_names("What about hiking?", &names(&["Caroline"])),
            None
        );
        assert_eq!(without_names("Caroline hiking", &names(&[])), None);
        // A name inside another word is not a name.
        assert_eq!(without_names("Carolines hike", &names(&["Caroline"])), None);
    }

    #[test]
    fn a_speaker_label_must_start_the_turn() {
        assert!(spoken_by("Caroline: I went hiking.", "caroline"));
        assert!(spoken_by("Mel Jones : hi", "Mel Jones"));
        assert!(!spoken_by("Melanie: Caroline: that is you", "Caroline"));
        assert!(!spoken_by("I told Caroline: no", "Caroline"));
        assert!(!spoken_by("Caroline went hiking", "Caroline"));
        assert!(!spoken_by("", "Caroline"));
    }
}
