//! A literal prefilter for the screen's regular expressions, so that of the few hundred
//! patterns and cues only those whose words a text holds are tried on it.
//!
//! Each expression is read (with `regex-syntax`, the parser `regex` itself uses) for the sets
//! of strings a match of it must contain: `\b(?:ignore|disregard)\s+all\b` contains one of
//! {`ignore`, `disregard`} and contains `all`. One Aho-Corasick automaton over all those
//! strings reads the text once (ASCII letters in either case, as the expressions are
//! case-insensitive); an expression none of whose sets can be met is not tried, so the verdict
//! is the one trying them all would give. Two cases make the filter step aside and every
//! expression be tried: an expression nothing is required of, and a text holding a non-ASCII
//! character that case-folds onto an ASCII letter (the Kelvin sign for `k`, the long `ſ` for
//! `s`), which the automaton's ASCII case folding would not see.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};

/// The most strings a set of exact strings may hold before it is given up as too wide.
const MAX_SET: usize = 64;
/// The most characters a class may hold to be read as a set of one-character strings.
const MAX_CLASS: usize = 8;
/// The most strings an alternation's set of required strings may hold.
const MAX_ALTERNATION: usize = 512;

/// Strings, one of which a match holds; ASCII letters lowercased.
type Strings = Vec<Vec<u8>>;

/// The prefilter of a list of expressions: which of them a text may match.
pub(crate) struct Prefilter {
    /// The required strings of all the expressions, each once.
    automaton: AhoCorasick,
    /// For each string of the automaton, the sets it meets.
    sets_of: Vec<Vec<usize>>,
    /// For each expression, the sets all of which a text must meet for it to be tried.
    needs: Vec<Vec<usize>>,
    /// How many sets there are.
    set_count: usize,
    /// Non-ASCII characters that case-fold onto an ASCII letter of a required string.
    folds: Vec<char>,
}

#[cfg(test)]
thread_local! {
    /// Set by the tests to try every expression on this thread: the verdicts the filter must
    /// leave as they are.
    pub(crate) static BYPASS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Which expressions [`Prefilter::candidates`] lets through for one text.
pub(crate) struct Candidates<'p> {
    /// The prefilter asked.
    filter: &'p Prefilter,
    /// Which sets the text meets; `None` when every expression is to be tried.
    met: Option<Vec<bool>>,
}

impl Candidates<'_> {
    /// Whether expression `index` may match the text (and must be tried).
    pub(crate) fn may_match(&self, index: usize) -> bool {
        match &self.met {
            None => true,
            Some(met) => self.filter.needs[index].iter().all(|&set| met[set]),
        }
    }
}

/// What the reading of the expressions collects.
#[derive(Default)]
struct Reading {
    /// Non-ASCII characters in a case-insensitive class read as its ASCII letter.
    folds: Vec<char>,
}

impl Prefilter {
    /// The prefilter of `patterns`, as passed to `Regex::new`, in order. A pattern the parser
    /// refuses requires nothing (it is always tried).
    pub(crate) fn new<S: AsRef<str>>(patterns: &[S]) -> Self {
        let mut reading = Reading::default();
        let mut ids: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut sets_of: Vec<Vec<usize>> = Vec::new();
        let mut needs = Vec::with_capacity(patterns.len());
        let mut set_count = 0;
        for pattern in patterns {
            let sets = regex_syntax::ParserBuilder::new()
                .build()
                .parse(pattern.as_ref())
                .map(|hir| reading.required(&hir))
                .unwrap_or_default();
            let mut need = Vec::new();
            for set in sets.into_iter().filter(selective) {
                let set_id = set_count;
                set_count += 1;
                need.push(set_id);
                for string in set {
                    let id = *ids.entry(string.clone()).or_insert_with(|| {
                        strings.push(string);
                        sets_of.push(Vec::new());
                        strings.len() - 1
                    });
                    sets_of[id].push(set_id);
                }
            }
            needs.push(need);
        }
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&strings)
            // Failing only past the automaton's size limits, which a few thousand short
            // strings are far from: a programming error the module's tests catch.
            .expect("the screening prefilter builds");
        reading.folds.sort_unstable();
        reading.folds.dedup();
        Self {
            automaton,
            sets_of,
            needs,
            set_count,
            folds: reading.folds,
        }
    }

    /// Which expressions may match `text`: one pass of the automaton.
    pub(crate) fn candidates(&self, text: &str) -> Candidates<'_> {
        #[cfg(test)]
        if BYPASS.with(std::cell::Cell::get) {
            return Candidates {
                filter: self,
                met: None,
            };
        }
        if !text.is_ascii() && text.chars().any(|c| self.folds.contains(&c)) {
            return Candidates {
                filter: self,
                met: None,
            };
        }
        let mut met = vec![false; self.set_count];
        for found in self.automaton.find_overlapping_iter(text) {
            for &set in &self.sets_of[found.pattern().as_usize()] {
                met[set] = true;
            }
        }
        Candidates {
            filter: self,
            met: Some(met),
        }
    }

    /// How many of the expressions have something required of them (for the tests).
    #[cfg(test)]
    pub(crate) fn filtered(&self) -> usize {
        self.needs.iter().filter(|need| !need.is_empty()).count()
    }
}

/// Whether a set of required strings is worth a place in the automaton: one whose strings are
/// all single letters, digits, spaces or common punctuation is met by nearly every text.
fn selective(set: &Strings) -> bool {
    !set.is_empty()
        && set.iter().all(|string| {
            !string.is_empty()
                && (string.len() >= 2
                    || !(string[0].is_ascii_alphanumeric()
                        || string[0].is_ascii_whitespace()
                        || b".,;:!?-'()".contains(&string[0])))
        })
}

/// `bytes` with its ASCII letters lowercased.
fn lowered(bytes: &[u8]) -> Vec<u8> {
    bytes.to_ascii_lowercase()
}

/// Every string of `left` followed by one of `right`; `None` past [`MAX_SET`].
fn product(left: &Strings, right: &Strings) -> Option<Strings> {
    if left.len() * right.len() > MAX_SET {
        return None;
    }
    let mut out: Strings = Vec::with_capacity(left.len() * right.len());
    for first in left {
        for second in right {
            let mut joined = first.clone();
            joined.extend_from_slice(second);
            if !out.contains(&joined) {
                out.push(joined);
            }
        }
    }
    Some(out)
}

/// How good a set of required strings is at ruling texts out: its shortest string's length,
/// then fewer strings.
fn quality(set: &Strings) -> (usize, std::cmp::Reverse<usize>) {
    (
        set.iter().map(Vec::len).min().unwrap_or(0),
        std::cmp::Reverse(set.len()),
    )
}

impl Reading {
    /// The strings `hir` matches exactly, if they are few (ASCII letters lowercased; a
    /// case-insensitive letter's class read as the letter).
    fn exact(&mut self, hir: &Hir) -> Option<Strings> {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => Some(vec![Vec::new()]),
            HirKind::Literal(literal) => Some(vec![lowered(&literal.0)]),
            HirKind::Class(Class::Unicode(class)) => {
                let chars: Vec<char> = class
                    .ranges()
                    .iter()
                    .flat_map(|range| range.start()..=range.end())
                    .take(MAX_CLASS + 1)
                    .collect();
                if chars.len() > MAX_CLASS {
                    return None;
                }
                let ascii: Vec<char> = chars.iter().copied().filter(char::is_ascii).collect();
                if let [first, second] = ascii[..] {
                    if first.is_ascii_alphabetic() && first.eq_ignore_ascii_case(&second) {
                        // A letter's case-insensitive class; the other characters that fold
                        // onto it turn the filter off where a text holds them.
                        self.folds
                            .extend(chars.iter().copied().filter(|c| !c.is_ascii()));
                        return Some(vec![vec![first.to_ascii_lowercase() as u8]]);
                    }
                }
                let mut out: Strings = Vec::new();
                for c in chars {
                    let string = lowered(c.encode_utf8(&mut [0; 4]).as_bytes());
                    if !out.contains(&string) {
                        out.push(string);
                    }
                }
                Some(out)
            }
            HirKind::Class(Class::Bytes(class)) => {
                let bytes: Vec<u8> = class
                    .ranges()
                    .iter()
                    .flat_map(|range| range.start()..=range.end())
                    .take(MAX_CLASS + 1)
                    .collect();
                if bytes.len() > MAX_CLASS {
                    return None;
                }
                let mut out: Strings = Vec::new();
                for byte in bytes {
                    let string = vec![byte.to_ascii_lowercase()];
                    if !out.contains(&string) {
                        out.push(string);
                    }
                }
                Some(out)
            }
            HirKind::Capture(capture) => self.exact(&capture.sub),
            HirKind::Repetition(repetition) => {
                let sub = self.exact(&repetition.sub)?;
                match (repetition.min, repetition.max) {
                    (0, Some(1)) => {
                        let mut out = vec![Vec::new()];
                        out.extend(sub.into_iter().filter(|s| !s.is_empty()));
                        Some(out)
                    }
                    (min, Some(max)) if min == max && min <= 3 => {
                        (0..min).try_fold(vec![Vec::new()], |acc, _| product(&acc, &sub))
                    }
                    _ => None,
                }
            }
            HirKind::Concat(children) => {
                children.iter().try_fold(vec![Vec::new()], |acc, child| {
                    product(&acc, &self.exact(child)?)
                })
            }
            HirKind::Alternation(branches) => {
                let mut out: Strings = Vec::new();
                for branch in branches {
                    for string in self.exact(branch)? {
                        if !out.contains(&string) {
                            out.push(string);
                        }
                    }
                    if out.len() > MAX_SET {
                        return None;
                    }
                }
                Some(out)
            }
        }
    }

    /// Sets of strings a match of `hir` holds: of each set, one string at least.
    fn required(&mut self, hir: &Hir) -> Vec<Strings> {
        if let Some(exact) = self.exact(hir) {
            if exact.iter().all(|string| !string.is_empty()) {
                return vec![exact];
            }
        }
        match hir.kind() {
            HirKind::Capture(capture) => self.required(&capture.sub),
            HirKind::Repetition(repetition) if repetition.min >= 1 => {
                self.required(&repetition.sub)
            }
            HirKind::Concat(children) => {
                let mut sets = Vec::new();
                // A run of exact children, as the strings they match one after the other.
                let mut run: Strings = vec![Vec::new()];
                for child in children {
                    if let Some(exact) = self.exact(child) {
                        if let Some(joined) = product(&run, &exact) {
                            run = joined;
                            continue;
                        }
                        sets.extend(Some(run).filter(|run| run.iter().all(|s| !s.is_empty())));
                        run = exact;
                        continue;
                    }
                    sets.extend(Some(run).filter(|run| run.iter().all(|s| !s.is_empty())));
                    run = vec![Vec::new()];
                    sets.extend(self.required(child));
                }
                sets.extend(Some(run).filter(|run| run.iter().all(|s| !s.is_empty())));
                sets
            }
            HirKind::Alternation(branches) => {
                let mut union: Strings = Vec::new();
                for branch in branches {
                    let Some(best) = self
                        .required(branch)
                        .into_iter()
                        .filter(selective)
                        .max_by_key(quality)
                    else {
                        return Vec::new();
                    };
                    for string in best {
                        if !union.contains(&string) {
                            union.push(string);
                        }
                    }
                }
                if union.len() > MAX_ALTERNATION {
                    return Vec::new();
                }
                vec![union]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Prefilter;

    /// The required sets of one pattern, as strings.
    fn required(pattern: &str) -> Vec<Vec<String>> {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .unwrap();
        super::Reading::default()
            .required(&hir)
            .into_iter()
            .filter(super::selective)
            .map(|set| {
                set.into_iter()
                    .map(|s| String::from_utf8(s).unwrap())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_pattern_requires_its_words() {
        assert_eq!(
            required(r"(?i)(?-u:\b)(?:ignore|disregard)\s+all(?-u:\b)"),
            vec![vec!["ignore", "disregard"], vec!["all"]]
        );
        // An optional part requires nothing; what follows it still does.
        assert_eq!(
            required(r"(?i)(?:^|[\n.,]\s*)(?:say|tell)\b"),
            vec![vec!["say", "tell"]]
        );
        // Letters are read in either case, the other characters as they are.
        assert_eq!(
            required("(?i)r\u{E8}gles"),
            vec![vec!["r\u{C8}gles", "r\u{E8}gles"]]
        );
        assert!(required(r"(?i)\w+\s*:").is_empty());
    }

    #[test]
    fn only_the_expressions_whose_words_are_there_are_tried() {
        let filter = Prefilter::new(&[r"(?i)ignore\s+all", r"(?i)\w+", r"(?i)send\s+it"]);
        let candidates = filter.candidates("Please IGNORE ALL of that");
        assert!(candidates.may_match(0));
        assert!(candidates.may_match(1));
        assert!(!candidates.may_match(2));
        // The Kelvin sign folds onto `k`, which the automaton would not see: all are tried.
        let filter = Prefilter::new(&[r"(?i)kill"]);
        assert!(!filter.candidates("ill").may_match(0));
        assert!(filter.candidates("\u{212A}ill").may_match(0));
    }
}
