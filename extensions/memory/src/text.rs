//! The words of a text as both search and storage read them: split on anything but letters and
//! digits, lowercased, with the words too common to help ranking known. A leaf module: it uses
//! nothing else of this crate, so that storage reads words without depending on search.

/// Most terms taken from one query; the rest are ignored (bounds the cost of a huge query).
pub(crate) const MAX_TERMS: usize = 32;
/// Longest term kept, in characters.
pub(crate) const MAX_TERM_CHARS: usize = 64;

/// Words too common to help ranking; dropped unless the query has nothing else.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "is", "it", "its", "me",
    "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "they", "this",
    "to", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with",
    "you", "your",
];

/// The words of `text`, lowercased, in order, without duplicates.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let word: String = word
            .chars()
            .take(MAX_TERM_CHARS)
            .collect::<String>()
            .to_lowercase();
        if !seen.contains(&word) {
            seen.push(word);
        }
        if seen.len() >= MAX_TERMS * 4 {
            break;
        }
    }
    seen
}

/// True for words too common to help ranking.
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// The words of an entity's name that memories are linked through by phrase: `None` when the
/// name has no word, or only one that is shorter than 3 characters or too common.
pub(crate) fn name_words(name: &str) -> Option<Vec<String>> {
    let words = terms(name);
    let too_weak = words.is_empty()
        || (words.len() == 1 && (words[0].chars().count() < 3 || is_stopword(&words[0])));
    (!too_weak).then_some(words)
}

/// Most word runs of one text tried against the owner's known entities.
pub(crate) const MAX_MENTIONS: usize = 256;

/// The runs of one to three words of `text` that could name a known entity, without single
/// words shorter than 3 characters or too common; at most [`MAX_MENTIONS`], in order.
pub(crate) fn mentions(text: &str) -> Vec<String> {
    let words = terms(text);
    let mut mentions: Vec<String> = Vec::new();
    for size in 1..=3 {
        for window in words.windows(size) {
            if size == 1 && (window[0].chars().count() < 3 || is_stopword(&window[0])) {
                continue;
            }
            let mention = window.join(" ");
            if !mentions.contains(&mention) {
                mentions.push(mention);
            }
        }
    }
    mentions.truncate(MAX_MENTIONS);
    mentions
}
