//! People and places: what a run of name words is, by the cues around it (a relation, a title, a
//! greeting, a verb, a possessive, a place's shape), and pairs such as `Sarah and John`.

use mnemo_ner_api::EntityType;

use super::tokens::{Kind, Token};
use super::{Finder, Run};
use crate::providers::words::{
    COMMON, FAMILY_TITLES, GREETINGS, LOCATION_CUES, NAMED_ANIMALS, NAMED_THINGS, NOT_PEOPLE,
    PERSONAL_NOUNS, PERSON_CUES, PLACE_HEADS, PLACE_NOUNS_AFTER, PLACE_PREFIXES, RELATIONS,
    RELATION_ADJECTIVES, SAID_VERBS, TITLES,
};

/// Most words in a name; longer runs of capitalised words are titles or shouting.
const MAX_NAME_WORDS: usize = 3;

/// Relation adjectives that are part of the relation (`best friend`, `direct report`).
const KEPT_ADJECTIVES: [&str; 6] = ["best", "direct", "childhood", "work", "school", "college"];

impl Finder<'_> {
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

    /// Whether the run is the name given to an animal or a thing, by the words before it:
    /// `my dog is called Pixel`, `my dog's called Pixel`, `our car was named Betsy` (an animal or
    /// a thing ([`NAMED_ANIMALS`], [`NAMED_THINGS`]) that is called so); `a cat named Luna`
    /// (an animal only: "a guy at the bar called Sofia" is a person); `my dog Pixel`, `Sarah's
    /// boat Seabird` (after a possessive: "the company Sarah founded" names a person).
    fn names_a_thing(&self, run: Run) -> bool {
        let Some(before) = run.first.checked_sub(1) else {
            return false;
        };
        let is = |index: Option<usize>, animals_only: bool| {
            self.word(index).is_some_and(|token| {
                NAMED_ANIMALS.contains(token.base_lower.as_str())
                    || (!animals_only && NAMED_THINGS.contains(token.base_lower.as_str()))
            })
        };
        if self.lower_is(Some(before), &["called", "named"]) {
            let verb = before.checked_sub(1);
            return match self.word(verb) {
                // `my dog's called Pixel`: the noun carries the verb.
                Some(token) if token.possessive => is(verb, false),
                Some(_) if self.lower_is(verb, &["is", "was", "are", "were"]) => {
                    is(verb.and_then(|verb| verb.checked_sub(1)), false)
                }
                _ => is(verb, true),
            };
        }
        let owner = before.checked_sub(1);
        let possessive = self.lower_is(owner, &["my", "our", "his", "her", "their", "your"])
            || self.word(owner).is_some_and(|token| token.possessive);
        possessive && is(Some(before), false)
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
    pub(super) fn classify_run(&mut self, run: Run) -> Option<(EntityType, f32)> {
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
        let person_ok = !after_article
            && !before_org
            && !any_brand
            && !place_shaped
            && !self.names_a_thing(run);
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
    pub(super) fn pairs(&mut self, runs: &[Run], kinds: &[Option<(EntityType, f32)>]) {
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
}
