//! Screening text for memory poisoning: text that carries instructions aimed at the agent that
//! will read it back (overrides, a new role, standing orders about "the user", sending data
//! away, asking for its prompt), imitations of tool calls and chat-format markers, and
//! characters that hide text from the person reading the memory.
//!
//! [`screen`] runs on the hot path of every write, without a model: a scan for hidden
//! characters (`hidden.rs`), HTML entities decoded (model servers' chat formats write `&#34;`),
//! then two readings of the text: the pattern families (`patterns.rs`), shapes that alone hold
//! a text back, and weighted cues (`cues.rs`, listed in `cue_list.rs`), family-level signs
//! that hold it back when their weights reach a threshold. A literal prefilter
//! (`prefilter.rs`) tries only the expressions whose words a reading holds. Cues that the text
//! discusses or quotes injection, or that the user speaks of their own words, weigh against,
//! and make a pattern count as a cue. Spellings a model reads through (leetspeak, look-alike letters,
//! spelled-out words, base64; `variants.rs`) are read again the same way. It says why, or
//! nothing. It is a filter of known shapes, not a proof of safety: docs/RELIABILITY.md says
//! what it does not catch, and `mnemo eval-screening` measures it on `tests/data/injection/`.

mod cue_list;
mod cues;
mod hidden;
mod patterns;
mod prefilter;
mod variants;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// Why a text was held back from the agent's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Characters that hide text: tag characters, zero-width characters inside words,
    /// bidirectional overrides.
    HiddenCharacters,
    /// Tells the agent to drop its instructions or take new ones.
    InstructionOverride,
    /// Gives the agent another role, or imitates a system or administrator message.
    RoleHijack,
    /// A standing order about "the user", or a note addressed to the AI that reads it.
    StandingInstruction,
    /// Tells the agent to send the user's data, or to load a link that would carry it away.
    Exfiltration,
    /// Asks the agent for its system prompt or instructions.
    PromptLeak,
    /// Imitates a tool call, a function call or a chat format's markers.
    ToolCallImitation,
}

impl Reason {
    /// The reason's name, as stored and shown (`instruction_override`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HiddenCharacters => "hidden_characters",
            Self::InstructionOverride => "instruction_override",
            Self::RoleHijack => "role_hijack",
            Self::StandingInstruction => "standing_instruction",
            Self::Exfiltration => "exfiltration",
            Self::PromptLeak => "prompt_leak",
            Self::ToolCallImitation => "tool_call_imitation",
        }
    }
}

/// What [`screen`] found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Why the text is held back.
    pub reason: Reason,
    /// What matched, shortened to 80 characters, or what hides text.
    pub evidence: String,
}

/// The longest evidence kept, in characters.
const EVIDENCE_CHARS: usize = 80;

/// Screens `text`: why it should be held back from the agent's context, or `None`.
pub fn screen(text: &str) -> Option<Finding> {
    let scan = hidden::scan(text);
    if let Some(hiding) = scan.hiding {
        return Some(Finding {
            reason: Reason::HiddenCharacters,
            evidence: hiding.to_owned(),
        });
    }
    let visible = scan.revealed.map_or(Cow::Borrowed(text), Cow::Owned);
    let decoded = decode_entities(&visible);
    if let Some(finding) = judge(&decoded) {
        return Some(finding);
    }
    // What a model reads as easily as plain text: digits for letters, look-alike letters,
    // words spelled out letter by letter, and base64; each read only if the one before it
    // found nothing.
    let readings: [fn(&str) -> Option<String>; 4] =
        [unleet, variants::unconfuse, variants::unspell, base64_text];
    readings
        .iter()
        .filter_map(|reading| reading(&decoded))
        .find_map(|variant| judge(&variant))
        .map(|finding| Finding {
            reason: finding.reason,
            evidence: format!("encoded: {}", finding.evidence),
        })
}

/// The verdict on one reading of a text: a pattern of a family outright, unless the text
/// discusses or quotes injection, in which case the pattern adds to the cues' score; otherwise
/// the cues' score against [`cues::THRESHOLD`].
fn judge(text: &str) -> Option<Finding> {
    let score = cues::CUES.score(text);
    // A tool-call shape in a text about the user's own code is an example, not a call.
    let strong = patterns::PATTERNS.first_match(text).filter(|(reason, _)| {
        !(score.code_framed && matches!(reason, Reason::ToolCallImitation | Reason::RoleHijack))
    });
    // Framed by discussion or the user's own words, a pattern counts half the threshold.
    let total = score.total
        + match (&strong, score.framed) {
            (None, _) => 0,
            (Some(_), false) => cues::THRESHOLD,
            (Some(_), true) => cues::THRESHOLD / 2,
        };
    if let Some((reason, matched)) = strong {
        if total >= cues::THRESHOLD {
            return Some(Finding {
                reason,
                evidence: shorten(matched),
            });
        }
    }
    if total < cues::THRESHOLD {
        return None;
    }
    let (reason, matched) = score.strongest?;
    Some(Finding {
        reason,
        evidence: shorten(&matched),
    })
}

/// What the plain reading of `text` holds, one line each, in the text's order: the pattern
/// that holds it back outright (`reason pattern: words`) and every cue (`reason +2 @at: words`).
/// `mnemo eval-screening --misses` lists it beside each text screened wrongly.
pub fn explain(text: &str) -> Vec<String> {
    let decoded = decode_entities(text);
    let mut lines: Vec<(usize, String)> = cues::CUES
        .each_found(&decoded)
        .into_iter()
        .map(|(reason, weight, at, words)| {
            (
                at,
                format!("{} {weight:+} @{at}: {}", reason.as_str(), shorten(&words)),
            )
        })
        .collect();
    lines.sort_by_key(|line| line.0);
    if let Some((reason, words)) = patterns::PATTERNS.first_match(&decoded) {
        lines.insert(
            0,
            (
                0,
                format!("{} pattern: {}", reason.as_str(), shorten(words)),
            ),
        );
    }
    lines.into_iter().map(|(_, line)| line).collect()
}

/// The fewest words mixing letters with digits that make a text worth reading as leetspeak.
const LEET_WORDS: usize = 3;

/// `text` with the digits and signs that stand for letters in words that mix them with letters
/// (`1gn0r3 4ll`) read as those letters; `None` when no word does.
fn unleet(text: &str) -> Option<String> {
    // A version number, "2FA" or a link is not leetspeak: it takes a few such words.
    let leet_words = text
        .split_whitespace()
        .filter(|word| {
            word.chars()
                .any(|c| matches!(c, '0' | '1' | '3' | '4' | '5' | '7' | '@' | '$'))
                && word.chars().any(|c| c.is_ascii_alphabetic())
                && !word.contains("://")
        })
        .count();
    if leet_words < LEET_WORDS {
        return None;
    }
    let mut changed = false;
    let words: Vec<String> = text
        .split_whitespace()
        .map(|word| {
            let mixed = word
                .chars()
                .any(|c| c.is_ascii_digit() || c == '@' || c == '$')
                && word.chars().any(|c| c.is_ascii_alphabetic());
            if !mixed {
                return word.to_owned();
            }
            changed = true;
            word.chars()
                .map(|c| match c {
                    '0' => 'o',
                    '1' => 'i',
                    '3' => 'e',
                    '4' | '@' => 'a',
                    '5' | '$' => 's',
                    '7' => 't',
                    other => other,
                })
                .collect()
        })
        .collect();
    changed.then(|| words.join(" "))
}

/// The shortest run of base64 worth decoding, in characters.
const BASE64_RUN: usize = 20;

/// The text that base64 runs in `text` decode to, where they decode to readable text; `None`
/// when none does.
fn base64_text(text: &str) -> Option<String> {
    let decoded: Vec<String> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '(' | ')' | ',' | ':'))
        .filter(|word| word.len() >= BASE64_RUN)
        .filter_map(base64_decode)
        .filter_map(|bytes| String::from_utf8(bytes).ok())
        .filter(|decoded| {
            let readable = decoded
                .chars()
                .filter(|c| !c.is_control() || c.is_whitespace())
                .count();
            readable * 10 >= decoded.chars().count() * 9
                && decoded.chars().filter(|c| c.is_alphabetic()).count() * 2 >= decoded.len()
        })
        .collect();
    (!decoded.is_empty()).then(|| decoded.join("\n"))
}

/// The bytes of a base64 word (standard or URL-safe alphabet, padding optional); `None` if it
/// is not one.
fn base64_decode(word: &str) -> Option<Vec<u8>> {
    let body = word.trim_end_matches('=');
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for byte in body.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// `text` with its whitespace runs as one space, cut to [`EVIDENCE_CHARS`].
fn shorten(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let joined = words.join(" ");
    match joined.char_indices().nth(EVIDENCE_CHARS) {
        Some((at, _)) => format!("{}…", &joined[..at]),
        None => joined,
    }
}

/// `text` with the HTML entities a model server's chat format may write decoded, as the kernel
/// decodes a model's replies (`mnemo_kernel::decode_entities`).
pub use mnemo_kernel::decode_entities;

#[cfg(test)]
mod tests;
