//! Organisations: a legal suffix (`Acme Corp`), a school head (`Stanford University`,
//! `University of Toronto`) or a verb of work or study (`works at Google`).

use mnemo_ner_api::EntityType;

use super::Finder;
use crate::providers::words::ORG_CUES;

/// Most words in an organisation name before its suffix.
const MAX_ORG_WORDS: usize = 4;

impl Finder<'_> {
    /// Organisation words ending at `last`, walking left: (first index, number of words).
    fn org_words_ending_at(&self, last: usize) -> Option<usize> {
        let mut first = None;
        let mut index = last;
        let mut n_words = 0;
        loop {
            if self.is_org_word(index) && !self.tokens[index].possessive {
                first = Some(index);
                n_words += 1;
                if self.tokens[index].sentence_start || n_words == MAX_ORG_WORDS || index == 0 {
                    break;
                }
                index -= 1;
            } else if self.punct_is(Some(index), '&') && n_words > 0 && index > 0 {
                index -= 1;
            } else {
                break;
            }
        }
        first
    }

    /// Organisation words starting at `first`, walking right: the last index.
    fn org_words_starting_at(&self, first: usize) -> Option<usize> {
        let mut last = None;
        let mut index = first;
        let mut n_words = 0;
        while n_words < MAX_ORG_WORDS && self.is_org_word(index) {
            if index > first && self.tokens[index].sentence_start {
                break;
            }
            last = Some(index);
            n_words += 1;
            if self.tokens[index].possessive {
                break;
            }
            index += 1;
        }
        last
    }

    pub(super) fn organisations(&mut self) {
        for index in 0..self.tokens.len() {
            if self.is_org_suffix(index) {
                // `Acme Corp`, `Acme, Inc.`
                let mut before = index.checked_sub(1);
                if self.punct_is(before, ',') {
                    before = before.and_then(|b| b.checked_sub(1));
                }
                let Some(before) = before else { continue };
                if let Some(first) = self.org_words_ending_at(before) {
                    let start = self.tokens[first].start;
                    let end = self.tokens[index].base_end;
                    self.push(start, end, EntityType::Organization, 0.85, None);
                }
            } else if self.is_org_head(index) && self.tokens[index].capitalised {
                // `Stanford University`, `University of Toronto`, `MIT Media Lab`
                let left = index
                    .checked_sub(1)
                    .filter(|_| !self.tokens[index].sentence_start)
                    .and_then(|before| self.org_words_ending_at(before));
                let right =
                    if !self.tokens[index].possessive && self.lower_is(Some(index + 1), &["of"]) {
                        self.org_words_starting_at(index + 2)
                    } else {
                        None
                    };
                if left.is_none() && right.is_none() {
                    continue;
                }
                let start = self.tokens[left.unwrap_or(index)].start;
                let end = self.tokens[right.unwrap_or(index)].base_end;
                self.push(start, end, EntityType::Organization, 0.85, None);
            } else if self.is_org_word(index)
                && !self.is_org_word(index.wrapping_sub(1))
                && self.preceded_by(index, &ORG_CUES)
            {
                // `works at Google`, `graduated from MIT`
                let Some(mut last) = self.org_words_starting_at(index) else {
                    continue;
                };
                if !self.tokens[last].possessive
                    && (self.is_org_suffix(last + 1) || self.is_org_head(last + 1))
                {
                    last += 1;
                }
                let start = self.tokens[index].start;
                let end = self.tokens[last].base_end;
                self.push(start, end, EntityType::Organization, 0.75, None);
            }
        }
    }
}
