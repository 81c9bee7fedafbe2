//! The pattern provider's tokens: words (with their possessive and capitalisation), punctuation
//! and opaque chunks, each marked where a sentence starts.

use crate::providers::words::ABBREVIATIONS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Letters and digits, with inner apostrophes and hyphens (`O'Brien`, `Hannah's`, `co-worker`).
    Word,
    /// One punctuation character.
    Punct,
    /// A chunk holding `@`, `#` or `/` (addresses, mentions, URLs): never part of a name.
    Opaque,
}

#[derive(Debug)]
pub(super) struct Token<'t> {
    pub(super) text: &'t str,
    pub(super) kind: Kind,
    pub(super) start: usize,
    /// End of the word without a possessive `'s`.
    pub(super) base_end: usize,
    /// Lowercase, `’` as `'`, without a possessive `'s`.
    pub(super) base_lower: String,
    /// Lowercase, `’` as `'`, as written.
    pub(super) lower: String,
    pub(super) possessive: bool,
    /// Capitalised: an upper-case first letter and some lower-case letter (`Sarah`, `McKay`).
    pub(super) capitalised: bool,
    /// Two or more letters, all upper case (`MIT`, `HR`).
    pub(super) acronym: bool,
    pub(super) sentence_start: bool,
}

impl Token<'_> {
    pub(super) fn is_word(&self) -> bool {
        self.kind == Kind::Word
    }

    pub(super) fn is_punct(&self, c: char) -> bool {
        self.kind == Kind::Punct && self.text.starts_with(c)
    }

    pub(super) fn base(&self) -> &str {
        &self.text[..self.base_end - self.start]
    }
}

fn make_token(text: &str, start: usize, end: usize, kind: Kind) -> Token<'_> {
    let word = &text[start..end];
    let lower = word.to_lowercase().replace('’', "'");
    let (possessive, base_end) = if kind != Kind::Word {
        (false, end)
    } else if let Some(base) = word.strip_suffix("'s").or_else(|| word.strip_suffix("’s")) {
        (!base.is_empty(), start + base.len())
    } else {
        (false, end)
    };
    let base = &text[start..base_end];
    let base_lower = if possessive {
        base.to_lowercase().replace('’', "'")
    } else {
        lower.clone()
    };
    let capitalised = kind == Kind::Word
        && base.chars().next().is_some_and(char::is_uppercase)
        && base.chars().any(char::is_lowercase);
    let acronym = kind == Kind::Word
        && base.chars().count() >= 2
        && base.chars().all(|c| c.is_alphabetic() && c.is_uppercase());
    Token {
        text: word,
        kind,
        start,
        base_end,
        base_lower,
        lower,
        possessive,
        capitalised,
        acronym,
        sentence_start: false,
    }
}

fn is_opaque(chunk: &str) -> bool {
    chunk.contains(['@', '#', '/']) || chunk.to_ascii_lowercase().contains("www.")
}

fn tokenize_chunk<'t>(text: &'t str, start: usize, end: usize, tokens: &mut Vec<Token<'t>>) {
    let chunk = &text[start..end];
    if is_opaque(chunk) {
        let inner_start = chunk.len() - chunk.trim_start_matches(['(', '[', '"', '\'']).len();
        let inner_end = chunk
            .trim_end_matches(['.', ',', '!', '?', ';', ':', ')', ']', '"', '\''])
            .len()
            .max(inner_start);
        for (offset, c) in chunk[..inner_start].char_indices() {
            let at = start + offset;
            tokens.push(make_token(text, at, at + c.len_utf8(), Kind::Punct));
        }
        if inner_end > inner_start {
            tokens.push(make_token(
                text,
                start + inner_start,
                start + inner_end,
                Kind::Opaque,
            ));
        }
        for (offset, c) in chunk[inner_end..].char_indices() {
            let at = start + inner_end + offset;
            tokens.push(make_token(text, at, at + c.len_utf8(), Kind::Punct));
        }
        return;
    }
    let chars: Vec<(usize, char)> = chunk.char_indices().collect();
    let mut index = 0;
    while index < chars.len() {
        let (offset, c) = chars[index];
        if c.is_alphanumeric() {
            index += 1;
            loop {
                if index < chars.len() && chars[index].1.is_alphanumeric() {
                    index += 1;
                } else if index + 1 < chars.len()
                    && matches!(chars[index].1, '\'' | '’' | '-')
                    && chars[index + 1].1.is_alphanumeric()
                {
                    index += 2;
                } else {
                    break;
                }
            }
            let word_end = chars.get(index).map_or(chunk.len(), |&(at, _)| at);
            tokens.push(make_token(
                text,
                start + offset,
                start + word_end,
                Kind::Word,
            ));
        } else {
            let at = start + offset;
            tokens.push(make_token(text, at, at + c.len_utf8(), Kind::Punct));
            index += 1;
        }
    }
}

pub(super) fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut new_line_before = Vec::new();
    let mut chunk_start: Option<usize> = None;
    let mut saw_new_line = true;
    for (at, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        if c.is_whitespace() {
            if let Some(start) = chunk_start.take() {
                let before = tokens.len();
                tokenize_chunk(text, start, at, &mut tokens);
                new_line_before
                    .extend((before..tokens.len()).map(|index| index == before && saw_new_line));
                saw_new_line = false;
            }
            if c == '\n' {
                saw_new_line = true;
            }
        } else if chunk_start.is_none() {
            chunk_start = Some(at);
        }
    }
    // Sentence starts: the first word, a word after a new line, or after `.`, `!`, `?`, `:`
    // (not the full stop of `Dr.` or of an initial).
    let mut at_start = true;
    for index in 0..tokens.len() {
        if new_line_before.get(index).copied().unwrap_or(false) {
            at_start = true;
        }
        match tokens[index].kind {
            Kind::Word | Kind::Opaque => {
                tokens[index].sentence_start = at_start;
                at_start = false;
            }
            Kind::Punct => {
                let c = tokens[index].text.chars().next().unwrap_or(' ');
                if "!?:".contains(c) {
                    at_start = true;
                } else if c == '.' {
                    let abbreviation = index > 0 && {
                        let before = &tokens[index - 1];
                        before.is_word()
                            && (ABBREVIATIONS.contains(before.lower.as_str())
                                || before.text.chars().count() == 1)
                    };
                    if !abbreviation {
                        at_start = true;
                    }
                }
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_possessives_and_sentence_starts() {
        let tokens = tokenize("Hi. Dr. Patel met Hannah’s mum at ops@x.io, then\nLeft.");
        let words: Vec<(&str, bool)> = tokens
            .iter()
            .filter(|t| t.kind != Kind::Punct)
            .map(|t| (t.base(), t.sentence_start))
            .collect();
        assert_eq!(
            words,
            vec![
                ("Hi", true),
                ("Dr", true),
                ("Patel", false),
                ("met", false),
                ("Hannah", false),
                ("mum", false),
                ("at", false),
                ("ops@x.io", false),
                ("then", false),
                ("Left", true),
            ]
        );
        assert!(tokens
            .iter()
            .any(|t| t.possessive && t.base_lower == "hannah"));
    }
}
