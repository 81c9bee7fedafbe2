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

use mnemo_ner_api::{EntityType, ExtractedEntity};

use super::words::{
    ABBREVIATIONS, COMMON, FAMILY_TITLES, GREETINGS, LOCATION_CUES, NOT_PEOPLE, ORG_CUES,
    ORG_HEADS, ORG_SUFFIXES, PERSONAL_NOUNS, PERSON_CUES, PLACE_HEADS, PLACE_NOUNS_AFTER,
    PLACE_PREFIXES, RELATIONS, RELATION_ADJECTIVES, SAID_VERBS, STOP, TITLES,
};
use super::{normalise_space, PATTERN_PROVIDER};

/// Most words in a name; longer runs of capitalised words are titles or shouting.
const MAX_NAME_WORDS: usize = 3;
/// Most words in an organisation name before its suffix.
const MAX_ORG_WORDS: usize = 4;

/// Relation adjectives that are part of the relation (`best friend`, `direct report`).
const KEPT_ADJECTIVES: [&str; 6] = ["best", "direct", "childhood", "work", "school", "college"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Letters and digits, with inner apostrophes and hyphens (`O'Brien`, `Hannah's`, `co-worker`).
    Word,
    /// One punctuation character.
    Punct,
    /// A chunk holding `@`, `#` or `/` (addresses, mentions, URLs): never part of a name.
    Opaque,
}

#[derive(Debug)]
struct Token<'t> {
    text: &'t str,
    kind: Kind,
    start: usize,
    /// End of the word without a possessive `'s`.
    base_end: usize,
    /// Lowercase, `’` as `'`, without a possessive `'s`.
    base_lower: String,
    /// Lowercase, `’` as `'`, as written.
    lower: String,
    possessive: bool,
    /// Capitalised: an upper-case first letter and some lower-case letter (`Sarah`, `McKay`).
    capitalised: bool,
    /// Two or more letters, all upper case (`MIT`, `HR`).
    acronym: bool,
    sentence_start: bool,
}

impl Token<'_> {
    fn is_word(&self) -> bool {
        self.kind == Kind::Word
    }

    fn is_punct(&self, c: char) -> bool {
        self.kind == Kind::Punct && self.text.starts_with(c)
    }

    fn base(&self) -> &str {
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

fn tokenize(text: &str) -> Vec<Token<'_>> {
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

    /// `my wife`, `our older son`, `his boss`, `Sarah's friend` ending at `noun`: the relation
    /// (for `my`/`our` only) and the confidence.
    fn relation_phrase_ending_at(&self, noun: usize) -> Option<(Option<String>, f32)> {
        let token = self.word(Some(noun))?;
        if token.possessive || !RELATIONS.contains(token.lower.as_str()) {
            return None;
        }
        let mut relation = token.lower.clone();
        let mut index = noun.checked_sub(1)?;
        let mut n_adjectives = 0;
        while n_adjectives < 2 {
            let Some(adjective) = self.word(Some(index)) else {
                break;
            };
            if !RELATION_ADJECTIVES.contains(adjective.lower.as_str()) {
                break;
            }
            if KEPT_ADJECTIVES.contains(&adjective.lower.as_str()) {
                relation = format!("{} {relation}", adjective.lower);
            }
            index = index.checked_sub(1)?;
            n_adjectives += 1;
        }
        let determiner = self.word(Some(index))?;
        match determiner.lower.as_str() {
            "my" | "our" => Some((Some(relation), 0.9)),
            "his" | "her" | "their" | "your" => Some((None, 0.85)),
            _ if determiner.possessive => Some((None, 0.85)),
            _ => None,
        }
    }

    /// `my boss, Dr. Smith` before the run.
    fn relation_before(&self, run: Run) -> Option<(Option<String>, f32)> {
        let mut index = run.first.checked_sub(1)?;
        let is_title = |index: usize| {
            self.word(Some(index))
                .is_some_and(|token| TITLES.contains(token.lower.as_str()))
        };
        if self.punct_is(Some(index), '.') && index >= 1 && is_title(index - 1) {
            index = index.checked_sub(2)?;
        } else if is_title(index) {
            index = index.checked_sub(1)?;
        }
        if self.punct_is(Some(index), ',') {
            index = index.checked_sub(1)?;
        }
        self.relation_phrase_ending_at(index)
    }

    /// `Sarah, my wife` after the run.
    fn relation_after(&self, run: Run) -> Option<(Option<String>, f32)> {
        if !self.punct_is(Some(run.last + 1), ',') {
            return None;
        }
        let determiner = run.last + 2;
        if !self.lower_is(
            Some(determiner),
            &["my", "our", "his", "her", "their", "your"],
        ) {
            return None;
        }
        (determiner + 1..=determiner + 3).find_map(|noun| {
            self.relation_phrase_ending_at(noun)
                .filter(|_| self.tokens[determiner + 1..noun].iter().all(Token::is_word))
        })
    }

    /// `my name is Tom`, `my wife's name is Anna`, `his name's Raj`.
    fn name_is(&self, run: Run) -> Option<(Option<String>, f32)> {
        let before = |back: usize| run.first.checked_sub(back);
        let owner = if self.lower_is(before(1), &["is"])
            && self.word(before(2)).is_some_and(|t| t.lower == "name")
        {
            before(3)
        } else if self
            .word(before(1))
            .is_some_and(|t| t.possessive && t.base_lower == "name")
        {
            before(2)
        } else {
            return None;
        };
        let owner_token = self.word(owner)?;
        if ["my", "his", "her", "their", "our", "your"].contains(&owner_token.lower.as_str()) {
            return Some((None, 0.85));
        }
        if owner_token.possessive && RELATIONS.contains(owner_token.base_lower.as_str()) {
            let determiner = owner.and_then(|owner| owner.checked_sub(1));
            if self.lower_is(determiner, &["my", "our"]) {
                return Some((Some(owner_token.base_lower.clone()), 0.9));
            }
            return Some((None, 0.85));
        }
        owner_token.possessive.then_some((None, 0.85))
    }

    /// `Hi Mark,`, `Thanks, Anna!` at the start of a sentence.
    fn greeted(&self, run: Run) -> bool {
        let mut index = run.first.checked_sub(1);
        if self.punct_is(index, ',') {
            index = index.and_then(|index| index.checked_sub(1));
        }
        let Some(greeting) = self.word(index) else {
            return false;
        };
        let before = index.and_then(|index| index.checked_sub(1));
        let is_greeting = GREETINGS.contains(greeting.lower.as_str())
            || (greeting.lower == "you" && self.lower_is(before, &["thank"]));
        let near_start = greeting.sentence_start
            || self.word(before).is_some_and(|token| {
                token.sentence_start && ["good", "thank", "oh"].contains(&token.lower.as_str())
            });
        is_greeting && near_start && self.ends_clause(run)
    }

    /// The run is followed by the end of the text or by punctuation, and is not possessive.
    fn ends_clause(&self, run: Run) -> bool {
        let ends = match self.token(Some(run.last + 1)) {
            None => true,
            Some(token) => token.kind == Kind::Punct && ",.!?;:)".contains(token.text),
        };
        ends && !self.tokens[run.last].possessive
    }

    /// `Caroline: I went hiking.`: a transcript's speaker label, opening the text, of name
    /// words none of which is a common word (`Note:`, `Update:` are not people) or reads as a
    /// reply's opening word (`Noted:`, `Warning:`, `Basically:`, `Done:`).
    fn speaker_label(&self, run: Run) -> bool {
        const REPLY_WORDS: [&str; 10] = [
            "done", "sure", "okay", "ok", "great", "thanks", "yes", "agreed", "correct", "ps",
        ];
        let not_a_name = |word: &str| {
            COMMON.contains(word)
                || REPLY_WORDS.contains(&word)
                || ["ed", "ing", "ly"].iter().any(|end| word.ends_with(end))
        };
        run.first == 0
            && self.punct_is(Some(run.last + 1), ':')
            && self.token(Some(run.last + 2)).is_some()
            && !(run.first..=run.last).any(|index| not_a_name(&self.tokens[index].base_lower))
    }

    /// `Thanks so much, Priya!`: one name after a comma, ending the sentence.
    fn vocative(&self, run: Run) -> bool {
        let ends_sentence = match self.token(Some(run.last + 1)) {
            None => true,
            Some(token) => token.kind == Kind::Punct && "!?.".contains(token.text),
        };
        run.len() == 1
            && self.punct_is(run.first.checked_sub(1), ',')
            && ends_sentence
            && self.ends_clause(run)
            && !COMMON.contains(self.tokens[run.first].base_lower.as_str())
    }

    /// `Dr. Patel`, `Mrs Okafor`; `Uncle Bob` (with the relation unless it is someone else's).
    fn title_before(&self, run: Run) -> Option<(Option<String>, f32)> {
        let before = run.first.checked_sub(1)?;
        if let Some(title) = self.word(Some(before)) {
            if FAMILY_TITLES.contains(title.lower.as_str()) && title.capitalised {
                let determiner = before.checked_sub(1);
                let relation = (!self.lower_is(determiner, &["his", "her", "their", "your"]))
                    .then(|| title.lower.clone());
                return Some((relation, 0.85));
            }
        }
        let title_index = if self.punct_is(Some(before), '.') {
            before.checked_sub(1)?
        } else {
            before
        };
        let title = self.word(Some(title_index))?;
        TITLES.contains(title.lower.as_str()).then_some((None, 0.9))
    }

    /// What a run of name words is, by its own words and its neighbours; the best guess is pushed.
    fn classify_run(&mut self, run: Run) -> Option<(EntityType, f32)> {
        if run.len() > MAX_NAME_WORDS {
            return None;
        }
        let first = &self.tokens[run.first];
        let last = &self.tokens[run.last];
        let first_lower = first.base_lower.clone();
        let last_lower = last.base_lower.clone();
        let possessive = last.possessive;
        let after = run.last + 1;
        let before = run.first.checked_sub(1);
        let after_article = self.lower_is(before, &["a", "an", "the"]);
        let before_org = self.is_org_suffix(after) || self.is_org_head(after);
        let any_brand = (run.first..=run.last)
            .any(|index| NOT_PEOPLE.contains(self.tokens[index].base_lower.as_str()));
        let place_shaped = run.len() >= 2
            && (PLACE_PREFIXES.contains(first_lower.as_str())
                || PLACE_HEADS.contains(last_lower.as_str()));
        let person_ok = !after_article && !before_org && !any_brand && !place_shaped;
        let place_ok = !before_org && !any_brand && !possessive;

        let mut guesses: Vec<(EntityType, f32, Option<String>)> = Vec::new();
        if person_ok {
            for (relation, confidence) in [
                self.relation_before(run),
                self.relation_after(run),
                self.name_is(run),
                self.title_before(run),
            ]
            .into_iter()
            .flatten()
            {
                guesses.push((EntityType::Person, confidence, relation));
            }
            if self.greeted(run) || self.preceded_by(run.first, &PERSON_CUES) {
                guesses.push((EntityType::Person, 0.75, None));
            }
            let said = self
                .word(Some(after))
                .is_some_and(|token| SAID_VERBS.contains(token.lower.as_str()));
            let and_i = self.lower_is(Some(after), &["and"])
                && self
                    .token(Some(after + 1))
                    .is_some_and(|token| token.text == "I");
            let me_and = self.lower_is(before, &["and"])
                && self.lower_is(before.and_then(|b| b.checked_sub(1)), &["me"]);
            if said || and_i || me_and || self.vocative(run) {
                guesses.push((EntityType::Person, 0.7, None));
            }
            if self.speaker_label(run) {
                guesses.push((EntityType::Person, 0.8, None));
            }
            if possessive
                && self
                    .word(Some(after))
                    .is_some_and(|token| PERSONAL_NOUNS.contains(token.lower.as_str()))
            {
                guesses.push((EntityType::Person, 0.75, None));
            }
            if run.len() >= 2 && !COMMON.contains(first_lower.as_str()) {
                guesses.push((EntityType::Person, 0.7, None));
            }
        }
        if place_ok {
            if self.preceded_by(run.first, &LOCATION_CUES) {
                guesses.push((EntityType::Location, 0.8, None));
            }
            if place_shaped {
                guesses.push((EntityType::Location, 0.7, None));
            }
            if after_article
                && self
                    .word(Some(after))
                    .is_some_and(|token| PLACE_NOUNS_AFTER.contains(token.lower.as_str()))
            {
                guesses.push((EntityType::Location, 0.65, None));
            }
        }
        // The most confident guess; between equals, one that knows the relation.
        let best = guesses.into_iter().max_by(|a, b| {
            a.1.total_cmp(&b.1)
                .then_with(|| a.2.is_some().cmp(&b.2.is_some()))
        })?;
        let kind = (best.0, best.1);
        self.push_run(run, best.0, best.1, best.2);
        Some(kind)
    }

    /// `Sarah and John`: a pair takes the type of a partner that had a cue, else both are people.
    fn pairs(&mut self, runs: &[Run], kinds: &[Option<(EntityType, f32)>]) {
        for (pair_index, pair) in runs.windows(2).enumerate() {
            let (left, right) = (pair[0], pair[1]);
            if right.first != left.last + 2
                || !self.lower_is(Some(left.last + 1), &["and", "&"])
                || left.len() > MAX_NAME_WORDS
                || right.len() > MAX_NAME_WORDS
                || self.tokens[left.last].possessive
            {
                continue;
            }
            let plain = |finder: &Self, run: Run| {
                (run.first..=run.last).all(|index| {
                    let lower = finder.tokens[index].base_lower.as_str();
                    !COMMON.contains(lower) && !NOT_PEOPLE.contains(lower)
                }) && !finder.lower_is(run.first.checked_sub(1), &["a", "an", "the"])
            };
            if !plain(self, left) || !plain(self, right) {
                continue;
            }
            let cued = kinds[pair_index].or(kinds[pair_index + 1]);
            let entity_type = cued.map_or(EntityType::Person, |(entity_type, _)| entity_type);
            let confidence = if cued.is_some() { 0.7 } else { 0.65 };
            if kinds[pair_index].is_none() {
                self.push_run(left, entity_type, confidence, None);
            }
            if kinds[pair_index + 1].is_none() {
                self.push_run(right, entity_type, confidence, None);
            }
        }
    }

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

    fn organisations(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// (surface, type, relation) after the merge, in text order.
    fn found(text: &str) -> Vec<(String, EntityType, Option<String>)> {
        crate::merge::merge(PatternProvider.extract(text))
            .into_iter()
            .map(|e| (e.surface, e.entity_type, e.relation))
            .collect()
    }

    fn person(name: &str) -> (String, EntityType, Option<String>) {
        (name.to_owned(), EntityType::Person, None)
    }

    fn related(name: &str, relation: &str) -> (String, EntityType, Option<String>) {
        (
            name.to_owned(),
            EntityType::Person,
            Some(relation.to_owned()),
        )
    }

    fn of(name: &str, entity_type: EntityType) -> (String, EntityType, Option<String>) {
        (name.to_owned(), entity_type, None)
    }

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

    #[test]
    fn a_speaker_label_names_a_person() {
        assert_eq!(
            found("Caroline: I went to a support group yesterday."),
            vec![person("Caroline")]
        );
        assert_eq!(found("Mel Jones: see you then"), vec![person("Mel Jones")]);
        // Only before more text, and not a common word.
        assert_eq!(found("Note: buy milk"), vec![]);
        assert_eq!(found("Update: the build is green"), vec![]);
        assert_eq!(found("Noted: vegetarian-friendly and mild."), vec![]);
        assert_eq!(found("Warning: the oven is hot"), vec![]);
        assert_eq!(found("Honestly: no idea"), vec![]);
        assert_eq!(found("Done: all three tickets"), vec![]);
        assert_eq!(found("Caroline:"), vec![]);
    }

    #[test]
    fn relations_before_and_after() {
        assert_eq!(
            found("My wife Sarah wants to go."),
            vec![related("Sarah", "wife")]
        );
        assert_eq!(
            found("My boss, Michael, keeps calling."),
            vec![related("Michael", "boss")]
        );
        assert_eq!(
            found("my sister Dana Kim is here"),
            vec![related("Dana Kim", "sister")]
        );
        assert_eq!(
            found("I saw my best friend Ana."),
            vec![related("Ana", "best friend")]
        );
        assert_eq!(
            found("My landlord, Mr. Novak, still hasn't"),
            vec![related("Novak", "landlord")]
        );
        assert_eq!(
            found("I called my therapist Dr. Alvarez"),
            vec![related("Alvarez", "therapist")]
        );
        assert_eq!(
            found("Sarah, my wife, says hi"),
            vec![related("Sarah", "wife")]
        );
        assert_eq!(
            found("My wife's name is Anna, by the way."),
            vec![related("Anna", "wife")]
        );
        assert_eq!(found("his wife Maria called"), vec![person("Maria")]);
        assert_eq!(
            found("My older brother Leo"),
            vec![related("Leo", "brother")]
        );
        assert_eq!(
            found("Uncle Bob is visiting"),
            vec![related("Bob", "uncle")]
        );
    }

    #[test]
    fn cues_for_people() {
        assert_eq!(
            found("I had lunch with Tom Hardy yesterday."),
            vec![person("Tom Hardy")]
        );
        assert_eq!(
            found("I met with Priya and Omar."),
            vec![person("Priya"), person("Omar")]
        );
        assert_eq!(
            found("Sarah and John are coming."),
            vec![person("Sarah"), person("John")]
        );
        assert_eq!(found("Olivia said it was fine."), vec![person("Olivia")]);
        assert_eq!(found("Hi Mark, thanks!"), vec![person("Mark")]);
        assert_eq!(found("Thank you, Anna!"), vec![person("Anna")]);
        assert_eq!(found("Thanks so much, Priya!"), vec![person("Priya")]);
        assert_eq!(found("Can you pay Lucas back?"), vec![person("Lucas")]);
        assert_eq!(found("Dr. Patel said so."), vec![person("Patel")]);
        for text in [
            "I saw Dr. Patel today",
            "I saw Mrs Okafor today",
            "I saw Prof. Li Wei",
        ] {
            let entities = crate::merge::merge(PatternProvider.extract(text));
            assert_eq!(entities.len(), 1, "{text}: {entities:?}");
            assert_eq!(
                entities[0].confidence, 0.9,
                "{text}: a title is a strong cue"
            );
        }
        assert_eq!(found("It is at Hannah's place."), vec![person("Hannah")]);
        assert_eq!(found("Jamie and I adopted a cat."), vec![person("Jamie")]);
        assert_eq!(
            found("The new hire, Wei Zhang, starts."),
            vec![person("Wei Zhang")]
        );
    }

    #[test]
    fn capitalised_words_that_are_not_names() {
        for text in [
            "I think I'll take Monday off.",
            "Next Tuesday I have a call with the bank.",
            "June is my favourite month.",
            "Remind me to call Grandma on Sunday.",
            "Christmas at my parents' place was lovely.",
            "Do you think I should learn Spanish or French?",
            "Please note: The Q3 review got pushed back.",
            "I'm reading Thinking, Fast and Slow right now.",
            "Mark my words, this will ship late.",
            "Happy New Year!",
            "Ok so I talked to HR and they said it's fine.",
            "I had a call with Google and Microsoft.",
            "Hey, how are you?",
            "Yesterday Was Rough And Long Anyway",
            "I watched Star Wars with the kids.",
        ] {
            assert_eq!(found(text), vec![], "{text}");
        }
    }

    #[test]
    fn organisations() {
        assert_eq!(
            found("Acme Corp finally paid."),
            vec![of("Acme Corp", EntityType::Organization)]
        );
        assert_eq!(
            found("I'm interviewing with Globex Inc on Thursday."),
            vec![of("Globex Inc", EntityType::Organization)]
        );
        assert_eq!(
            found("She did her PhD at the University of Toronto."),
            vec![of("University of Toronto", EntityType::Organization)]
        );
        assert_eq!(
            found("Harvard University rejected me but I got into Boston College."),
            vec![
                of("Harvard University", EntityType::Organization),
                of("Boston College", EntityType::Organization)
            ]
        );
        assert_eq!(
            found("My husband works at Google."),
            vec![of("Google", EntityType::Organization)]
        );
        assert_eq!(
            found("I graduated from MIT in 2015."),
            vec![of("MIT", EntityType::Organization)]
        );
        assert_eq!(
            found("We signed with Johnson & Johnson Ltd."),
            vec![of("Johnson & Johnson Ltd", EntityType::Organization)]
        );
        assert_eq!(found("The University is closed."), vec![]);
    }

    #[test]
    fn places() {
        assert_eq!(
            found("We moved to Lisbon last year."),
            vec![of("Lisbon", EntityType::Location)]
        );
        assert_eq!(
            found("I'm from Porto, but I live in Berlin now."),
            vec![
                of("Porto", EntityType::Location),
                of("Berlin", EntityType::Location)
            ]
        );
        assert_eq!(
            found("I'm flying to New York on Friday."),
            vec![of("New York", EntityType::Location)]
        );
        assert_eq!(
            found("We met at the Berlin office."),
            vec![of("Berlin", EntityType::Location)]
        );
        assert_eq!(
            found("I lived in London and Paris."),
            vec![
                of("London", EntityType::Location),
                of("Paris", EntityType::Location)
            ]
        );
        assert_eq!(found("I'm going to Sarah's party."), vec![person("Sarah")]);
        assert_eq!(
            found("New York is lovely."),
            vec![of("New York", EntityType::Location)]
        );
    }

    #[test]
    fn offsets_are_bytes_of_the_original_text() {
        let text = "Café talk: my friend Zoë Ångström’s dog";
        let entities = crate::merge::merge(PatternProvider.extract(text));
        assert_eq!(entities.len(), 1);
        let entity = &entities[0];
        assert_eq!(&text[entity.start..entity.end], "Zoë Ångström");
        assert_eq!(entity.relation.as_deref(), Some("friend"));
    }
}
