//! The `pattern` provider: people, organisations and places from the phrasings people use in chat,
//! without a model. Precision over recall: a capitalised word is a name only with a cue.
//!
//! People: a relation (`my wife Sarah`, `my boss, Michael`, `Sarah, my wife`, `my wife's name is
//! Anna`; the relation is kept for `my`/`our`), a title (`Dr. Patel`, `Uncle Bob`), a greeting
//! (`Hi Mark`), a verb of contact before (`met with Priya`, `told Sam`) or of speech after
//! (`Olivia said`), a possessive (`Nina's birthday`), a pair (`Sarah and John`, `Jamie and I`),
//! or two or three capitalised words that are not a sentence start alone (`Tom Hardy`).
//! Organisations: a legal suffix (`Acme Corp`, `Umbrella GmbH`), a school head (`Stanford
//! University`, `University of Toronto`) or a verb of work or study (`works at Google`, `graduated
//! from MIT`). Places: a verb or noun of travel and living before (`moved to Lisbon`, `I live in
//! Berlin`, `I'm from Porto`, `conference in Amsterdam`), `the Berlin office`, or the shape of a
//! place name (`New York`, `Baker Street`).
//!
//! Not names: days, months, `I`, greetings, family words (`Mom`), titles, holidays, languages, and
//! a capitalised common word at the start of a sentence. Lowercase names are missed (recall).

mod names;
mod organisations;
#[cfg(test)]
mod tests;
mod tokens;

use mnemo_ner_api::{EntityType, ExtractedEntity};

use super::words::{COMMON, ORG_HEADS, ORG_SUFFIXES, PLACE_PREFIXES, STOP};
use super::{normalise_space, PATTERN_PROVIDER};
use tokens::{tokenize, Token};

/// A run of name words: token indices `first..=last`.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: usize,
    last: usize,
}

impl Run {
    fn len(self) -> usize {
        self.last - self.first + 1
    }
}

struct Finder<'t> {
    text: &'t str,
    tokens: Vec<Token<'t>>,
    found: Vec<ExtractedEntity>,
}

impl<'t> Finder<'t> {
    fn new(text: &'t str) -> Self {
        Self {
            text,
            tokens: tokenize(text),
            found: Vec::new(),
        }
    }

    fn token(&self, index: Option<usize>) -> Option<&Token<'t>> {
        index.and_then(|index| self.tokens.get(index))
    }

    fn word(&self, index: Option<usize>) -> Option<&Token<'t>> {
        self.token(index).filter(|token| token.is_word())
    }

    fn lower_is(&self, index: Option<usize>, words: &[&str]) -> bool {
        self.word(index)
            .is_some_and(|token| words.contains(&token.lower.as_str()))
    }

    fn punct_is(&self, index: Option<usize>, c: char) -> bool {
        self.token(index).is_some_and(|token| token.is_punct(c))
    }

    fn is_org_suffix(&self, index: usize) -> bool {
        let Some(token) = self.word(Some(index)) else {
            return false;
        };
        let base = token.base();
        ORG_SUFFIXES.contains(base) && (base != "Co" || self.punct_is(Some(index + 1), '.'))
    }

    fn is_org_head(&self, index: usize) -> bool {
        self.word(Some(index))
            .is_some_and(|token| ORG_HEADS.contains(token.base()))
    }

    /// A common word written capitalised because it starts a sentence (`Honestly`, `Book`), except
    /// the first word of a place name (`New York is lovely`).
    fn is_common_sentence_start(&self, index: usize) -> bool {
        let token = &self.tokens[index];
        token.sentence_start
            && COMMON.contains(token.base_lower.as_str())
            && !(PLACE_PREFIXES.contains(token.base_lower.as_str())
                && self
                    .word(Some(index + 1))
                    .is_some_and(|next| next.capitalised && !next.sentence_start))
    }

    /// A word that can be part of a person's or a place's name.
    fn is_name_word(&self, index: usize) -> bool {
        let Some(token) = self.word(Some(index)) else {
            return false;
        };
        token.capitalised
            && !STOP.contains(token.base_lower.as_str())
            && !self.is_common_sentence_start(index)
            && !self.is_org_suffix(index)
            && !self.is_org_head(index)
    }

    /// A word that can be part of an organisation's name (acronyms too).
    fn is_org_word(&self, index: usize) -> bool {
        let Some(token) = self.word(Some(index)) else {
            return false;
        };
        (token.capitalised || token.acronym)
            && !STOP.contains(token.base_lower.as_str())
            && !(token.sentence_start && COMMON.contains(token.base_lower.as_str()))
    }

    /// Maximal runs of adjacent name words; a possessive word ends its run.
    fn name_runs(&self) -> Vec<Run> {
        let mut runs = Vec::new();
        let mut index = 0;
        while index < self.tokens.len() {
            if !self.is_name_word(index) {
                index += 1;
                continue;
            }
            let first = index;
            while !self.tokens[index].possessive
                && index + 1 < self.tokens.len()
                && self.is_name_word(index + 1)
                && !self.tokens[index + 1].sentence_start
            {
                index += 1;
            }
            runs.push(Run { first, last: index });
            index += 1;
        }
        runs
    }

    /// Whether the words right before `index` are one of `phrases`.
    fn preceded_by(&self, index: usize, phrases: &[Vec<&str>]) -> bool {
        phrases.iter().any(|phrase| {
            index >= phrase.len()
                && phrase.iter().enumerate().all(|(offset, word)| {
                    let token = &self.tokens[index - phrase.len() + offset];
                    token.is_word() && token.lower == *word
                })
        })
    }

    fn push(
        &mut self,
        start: usize,
        end: usize,
        entity_type: EntityType,
        confidence: f32,
        relation: Option<String>,
    ) {
        let surface = &self.text[start..end];
        self.found.push(ExtractedEntity {
            surface: surface.to_owned(),
            canonical: normalise_space(surface),
            entity_type,
            start,
            end,
            confidence,
            relation,
            provider: PATTERN_PROVIDER.to_owned(),
        });
    }

    fn push_run(
        &mut self,
        run: Run,
        entity_type: EntityType,
        confidence: f32,
        relation: Option<String>,
    ) {
        let start = self.tokens[run.first].start;
        let end = self.tokens[run.last].base_end;
        self.push(start, end, entity_type, confidence, relation);
    }

    fn run(mut self) -> Vec<ExtractedEntity> {
        let runs = self.name_runs();
        let kinds: Vec<Option<(EntityType, f32)>> =
            runs.iter().map(|&run| self.classify_run(run)).collect();
        self.pairs(&runs, &kinds);
        self.organisations();
        self.found
    }
}

/// The pattern provider.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PatternProvider;

impl PatternProvider {
    /// Every guess, possibly overlapping (the merge keeps the best).
    pub(crate) fn extract(self, text: &str) -> Vec<ExtractedEntity> {
        Finder::new(text).run()
    }
}
