//! Weighted cues: the family-level signs of text that speaks to the agent, each alone too weak
//! to hold a text back, together enough. A cue is a short case-insensitive regular expression
//! with a weight and the reason it points to; each is tried once on the text, and each cue
//! found counts once (two cues on exactly the same words count as the heavier), and only with
//! the cues near it: the heaviest run that starts within [`CUE_WINDOW`] bytes. Cues that a text
//! *discusses* injection (a researcher, an article, "an attack sample is …"), that the user
//! speaks of their own words ("my previous message", "instructions I gave you") or that the AI
//! speaks as itself ("as an AI assistant, I …") weigh against, over the whole text.
//!
//! The cue list was written from the attack families of `tests/data/injection/PROVENANCE.md`
//! and tuned on `dev.jsonl`, `train.jsonl` and ordinary conversations (half of the turns of
//! LoCoMo and LongMemEval dev, docs/BENCHMARKS.md), never on `test.jsonl`.

use std::sync::LazyLock;

use regex::Regex;

use super::prefilter::Prefilter;
use super::{cue_list, Reason};

/// The score from which a text is held back.
pub(crate) const THRESHOLD: i32 = 4;

/// Verbs that move data somewhere, in the languages the screen reads.
const SEND: &str = "send|forward|post|upload|e-?mail|text|sms|share|copy|leak|exfiltrate|transmit|\
push|sync|export|put|include|add|append|attach|bcc|cc|deliver|submit|write|dump|publish|paste|mail|\
call|fetch|browse|visit|open|load|render|resolve|ping|encode";

/// Determiners that make a noun the user's data rather than a thing of the writer's.
const WHOSE: &str =
    "the\\s+user'?s|users'|user's|their|his|her|all(?:\\s+(?:of\\s+)?(?:the|their|his|her))?|\
every|each|saved|stored|entire|whole|the\\s+full|full|the\\s+complete";

/// The user's data an exfiltration is after.
const DATA: &str = "conversations?|chats?|chat\\s+(?:history|logs?)|history|memories|memory|notes|\
contacts?(?:\\s+list)?|passwords?|passcodes?|api\\s+keys?|keys|tokens?|credentials|secrets?|\
credit\\s+card(?:\\s+numbers?)?|card\\s+numbers?|addresses|(?:home\\s+)?address|phone\\s+numbers?|\
date\\s+of\\s+birth|(?:one-time|verification|2fa)\\s+codes?|schedule|calendar|emails?|messages?|inbox|\
files|documents|location|full\\s+name|personal\\s+(?:data|information|details)|logs?|summary|\
everything\\s+you\\s+know";

/// Where exfiltrated data goes: a link, an email address, a phone number, a named drop.
const DESTINATION: &str = "https?://|www\\.|[\\w.+-]+@[\\w-]+\\.\\w|\\+\\d[\\d\\s-]{6,}\\d|\\bwebhook|\
\\bpastebin|\\bgist\\b|\\bdns\\b|\\b[\\w-]+\\.(?:example|com|net|org|io|xyz|ru|top|biz|info|site|app)\\b";

/// Where an imperative starts: the start of a clause, or after a word that introduces one.
const CLAUSE: &str =
    "(?:^|[\\n.!?:;,(\\-]\\s*|\\b(?:and|then|always|just|simply|only|please|must|should|\
also|instead|quietly|silently)\\s+)";

/// Names of the reader a note can be addressed to.
const AGENT: &str =
    "ai|a\\.i\\.|assistants?|agents?|llms?|language\\s+models?|chatbots?|bots?|models?|\
gpt|chatgpt|claude|gemini|copilot|ki-\\w+|ki|ia|asistente(?:\\s+de\\s+ia)?";

/// Rules, prompts and settings an override or a leak names.
const RULES: &str = "instructions?|directives?|directions|guidance|guidelines|rules?|polic(?:y|ies)|\
restrictions?|constraints?|filters?|guardrails?|safeguards?|safety\\s+(?:layer|rules|checks|settings|measures)|\
programming|prompts?|preamble|setup|configuration|settings|orders|commands|limits|limitations|principles|\
alignment|ethics|system\\s+message";

/// Verbs that drop or break rules.
const DROP: &str = "ignore|disregard|forget|override|bypass|discard|abandon|cancel|drop|scrap|throw\\s+(?:out|away)|\
set\\s+aside|dismiss|overrule|suspend|revoke|break|stop\\s+following|(?:do\\s+not|don't|no\\s+longer)\\s+(?:follow|obey|observe|respect)";

/// The word lists the cue list names in braces, and what they stand for.
const WORD_LISTS: [(&str, &str); 8] = [
    ("{SEND}", SEND),
    ("{WHOSE}", WHOSE),
    ("{DATA}", DATA),
    ("{DESTINATION}", DESTINATION),
    ("{CLAUSE}", CLAUSE),
    ("{AGENT}", AGENT),
    ("{RULES}", RULES),
    ("{DROP}", DROP),
];

/// The reason a cue line names.
fn reason(name: &str) -> Option<Reason> {
    Some(match name {
        "instruction_override" => Reason::InstructionOverride,
        "role_hijack" => Reason::RoleHijack,
        "standing_instruction" => Reason::StandingInstruction,
        "exfiltration" => Reason::Exfiltration,
        "prompt_leak" => Reason::PromptLeak,
        "tool_call_imitation" => Reason::ToolCallImitation,
        "hidden_characters" => Reason::HiddenCharacters,
        _ => return None,
    })
}

/// The cues of [`cue_list::LIST`]: reason, weight and pattern with its word lists filled in.
fn cues() -> Vec<(Reason, i32, String)> {
    cue_list::LIST
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let (Some(name), Some(weight), Some(pattern)) =
                (parts.next(), parts.next(), parts.next())
            else {
                panic!("a cue line is `reason weight pattern`: {line}");
            };
            // The list is this module's constant: a bad line is a programming error that the
            // module's tests catch.
            let reason = reason(name).expect("a cue names a known reason");
            let weight = weight.parse().expect("a cue's weight is a number");
            let pattern = WORD_LISTS
                .iter()
                .fold(pattern.to_owned(), |pattern, (name, list)| {
                    pattern.replace(name, list)
                });
            (reason, weight, pattern)
        })
        .collect()
}

/// The cues compiled. Each is tried alone (`is_match`, which stops at the first match and
/// skips ahead on literals): measured on `dev.jsonl` and `train.jsonl`, a `RegexSet` of these
/// few hundred patterns was ten times slower, its lazy DFA's states exploding. A literal
/// prefilter (`prefilter.rs`) leaves out the cues whose words a text lacks.
pub(crate) struct Cues {
    each: Vec<(Reason, i32, Regex)>,
    /// Which of `each` a text may match, from the words it holds.
    filter: Prefilter,
}

/// What [`Cues::score`] found in a text.
#[derive(Debug)]
pub(crate) struct Score {
    /// The sum of the weights of the cues the text holds, each once.
    pub(crate) total: i32,
    /// Whether a cue weighing against (discussion, quotation, the user's own words) is present.
    pub(crate) framed: bool,
    /// Whether the text speaks of code it shows (a parser, a template, the user's own agent),
    /// so that tool-call shapes in it are examples, not calls.
    pub(crate) code_framed: bool,
    /// The heaviest cue found, as its reason and the words it matched.
    pub(crate) strongest: Option<(Reason, String)>,
}

pub(crate) static CUES: LazyLock<Cues> = LazyLock::new(|| {
    let mut sources = Vec::new();
    let each = cues()
        .into_iter()
        .map(|(reason, weight, pattern)| {
            let source = super::patterns::written(&pattern);
            // The cues are this module's constants: a bad one is a programming error that the
            // module's tests catch.
            let regex = Regex::new(&source).expect("screening cues are valid");
            sources.push(source);
            (reason, weight, regex)
        })
        .collect();
    Cues {
        each,
        filter: Prefilter::new(&sources),
    }
});

impl Cues {
    /// How many of the expressions the prefilter can leave out, and how many there are.
    #[cfg(test)]
    pub(crate) fn filter_stats(&self) -> (usize, usize) {
        (self.filter.filtered(), self.each.len())
    }

    /// The indices of the cues `text` holds.
    fn matches<'a>(&'a self, text: &'a str) -> impl Iterator<Item = usize> + 'a {
        let candidates = self.filter.candidates(text);
        self.each
            .iter()
            .enumerate()
            .filter(move |(index, (_, _, regex))| {
                candidates.may_match(*index) && regex.is_match(text)
            })
            .map(|(index, _)| index)
    }

    /// Every cue `text` holds, in the order of the list: reason, weight, where it starts and the
    /// words it matched (the plain reading, quotations left in).
    pub(crate) fn each_found(&self, text: &str) -> Vec<(Reason, i32, usize, String)> {
        self.matches(text)
            .filter_map(|index| {
                let (reason, weight, regex) = &self.each[index];
                let at = regex.find(text)?;
                Some((*reason, *weight, at.start(), at.as_str().to_owned()))
            })
            .collect()
    }

    /// The score of `text`: one pass of the set, each matching cue counted once. What stands
    /// inside quotation marks is someone quoting, and left out, unless the text is JSON, whose
    /// strings are quoted whoever speaks.
    pub(crate) fn score(&self, text: &str) -> Score {
        let unquoted = unquote(text);
        let text = unquoted.as_deref().unwrap_or(text);
        let mut total = 0;
        let mut framed = false;
        let mut code_framed = false;
        // The positive cues found: weight, where, and which.
        let mut found: Vec<(i32, usize, usize, usize)> = Vec::new();
        for index in self.matches(text) {
            let (reason, weight, regex) = &self.each[index];
            if *weight < 0 {
                total += weight;
                framed |= *weight <= -2;
                code_framed |= *reason == Reason::ToolCallImitation;
            } else if let Some(at) = regex.find(text) {
                // Where it first appears. Every place it appears was measured on 2026-12-04:
                // no attack more held back, more ordinary answers held back (docs/BENCHMARKS.md).
                found.push((*weight, at.start(), at.end(), index));
            }
        }
        // Two cues on exactly the same words are one sign: the heavier counts.
        found.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut counted: Vec<(i32, usize, usize, usize)> = Vec::with_capacity(found.len());
        for &cue in &found {
            if !counted
                .iter()
                .any(|kept| (kept.1, kept.2) == (cue.1, cue.2))
            {
                counted.push(cue);
            }
        }
        let nearest = nearest_cues(&mut counted);
        total += nearest.iter().map(|cue| cue.0).sum::<i32>();
        let strongest = nearest
            .iter()
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|&(_, start, end, index)| (self.each[index].0, text[start..end].to_owned()));
        Score {
            total,
            framed,
            code_framed,
            strongest,
        }
    }
}

/// How far apart, in bytes, cues may start and still count together: an instruction is a
/// sentence or two, while a long answer or document gathers weak cues far apart ("take notes" in
/// one tip, "your training" in another) that say nothing together.
pub(crate) const CUE_WINDOW: usize = 300;

/// The cues of `found` (weight, start, end, index; each cue once, where it first appears) that
/// count: the heaviest run of them that starts within [`CUE_WINDOW`] bytes. Sorts `found` by
/// where each starts.
fn nearest_cues(found: &mut [(i32, usize, usize, usize)]) -> &[(i32, usize, usize, usize)] {
    found.sort_by_key(|cue| cue.1);
    let mut sum = 0;
    let mut first = 0;
    let mut best = (0, 0, 0);
    for last in 0..found.len() {
        sum += found[last].0;
        while found[last].1 - found[first].1 > CUE_WINDOW {
            sum -= found[first].0;
            first += 1;
        }
        if sum > best.0 {
            best = (sum, first, last + 1);
        }
    }
    &found[best.1..best.2]
}

/// `text` with what stands inside quotation marks left out (the marks kept); `None` when
/// nothing is quoted, or when the text is JSON (`"key":`).
fn unquote(text: &str) -> Option<String> {
    if !text.contains(['"', '\'', '\u{201C}', '\u{AB}', '\u{2018}', '\u{201E}'])
        || JSON_KEY.is_match(text)
    {
        return None;
    }
    let spans = super::patterns::quoted_spans(text);
    if spans.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (start, end) in spans {
        // Keep the opening mark (its width in bytes) and the closing one.
        let open = text[start..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&text[from..start + open]);
        out.push(' ');
        from = end;
    }
    out.push_str(&text[from..]);
    Some(out)
}

/// A JSON object key, `"name":`.
static JSON_KEY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""\w+"\s*:"#).expect("a constant pattern"));
