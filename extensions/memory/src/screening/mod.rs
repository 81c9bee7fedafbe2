//! Screening text for memory poisoning: text that carries instructions aimed at the agent that
//! will read it back (overrides, a new role, standing orders about "the user", sending data
//! away, asking for its prompt), imitations of tool calls and chat-format markers, and
//! characters that hide text from the person reading the memory.
//!
//! [`screen`] runs on the hot path of every write, without a model: a scan for hidden
//! characters (`hidden.rs`), HTML entities decoded (model servers' chat formats write `&#34;`),
//! then one `RegexSet` over the pattern families (`patterns.rs`). It says why, or nothing.
//! It is a filter of known shapes, not a proof of safety: docs/RELIABILITY.md says what it does
//! not catch, and `mnemo eval-screening` measures it on `tests/data/injection/`.

mod hidden;
mod patterns;

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
    if let Some((reason, matched)) = patterns::PATTERNS.first_match(&decoded) {
        return Some(Finding {
            reason,
            evidence: shorten(matched),
        });
    }
    // What a model reads as easily as plain text: digits for letters, and base64.
    for variant in [unleet(&decoded), base64_text(&decoded)]
        .into_iter()
        .flatten()
    {
        if let Some((reason, matched)) = patterns::PATTERNS.first_match(&variant) {
            return Some(Finding {
                reason,
                evidence: format!("encoded: {}", shorten(matched)),
            });
        }
    }
    None
}

/// `text` with the digits and signs that stand for letters in words that mix them with letters
/// (`1gn0r3 4ll`) read as those letters; `None` when no word does.
fn unleet(text: &str) -> Option<String> {
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

/// `text` with the HTML entities of quotes, brackets and ampersands decoded (`&#34;`, `&#x22;`,
/// `&quot;`, `&lt;`, `&gt;`, `&amp;`, `&apos;`, `&#39;`); other text as it is.
pub fn decode_entities(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        match entity(tail) {
            Some((decoded, length)) => {
                out.push(decoded);
                rest = &tail[length..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The character of the entity `text` starts with, and the entity's length in bytes.
fn entity(text: &str) -> Option<(char, usize)> {
    let end = text
        .char_indices()
        .take(12)
        .find(|&(_, c)| c == ';')
        .map(|(at, _)| at)?;
    let name = &text[1..end];
    let decoded = match name {
        "quot" => '"',
        "apos" => '\'',
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)?
        }
    };
    Some((decoded, end + 1))
}

#[cfg(test)]
mod tests;
