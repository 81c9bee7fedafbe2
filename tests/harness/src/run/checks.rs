//! Comparing what a step saw with what the scenario expects (texts that must or must not
//! appear), and the shortened texts the log and the failures show.

use serde_json::Value;

use crate::parse::Expect;

pub(super) fn lower_contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// The texts of a search-like result: an array, or an object with `results`; each item's
/// `content`, or the item itself.
pub(super) fn result_texts(value: &Value) -> Vec<String> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::Object(object) => match object.get("results").and_then(Value::as_array) {
            Some(items) => items.as_slice(),
            None => return vec![value.to_string()],
        },
        other => return vec![other.to_string()],
    };
    items
        .iter()
        .map(|item| match item.get("content").and_then(Value::as_str) {
            Some(content) => content.to_owned(),
            None => item
                .as_str()
                .map_or_else(|| item.to_string(), str::to_owned),
        })
        .collect()
}

/// Checks `text` against an expectation's text parts; returns the failures.
pub(super) fn check_text(expect: &Expect, text: &str, problems: &mut Vec<String>) {
    for needle in &expect.contains {
        if !lower_contains(text, needle) {
            problems.push(format!("missing {needle:?}"));
        }
    }
    for needle in &expect.not_contains {
        if lower_contains(text, needle) {
            problems.push(format!("unexpected {needle:?}"));
        }
    }
    let lower = text.to_lowercase();
    let mut from = 0;
    for needle in &expect.in_order {
        match lower
            .get(from..)
            .and_then(|rest| rest.find(&needle.to_lowercase()))
        {
            Some(at) => from += at + needle.to_lowercase().len(),
            None => {
                problems.push(format!("{needle:?} missing after what comes before it"));
                break;
            }
        }
    }
}

pub(super) fn shorten(text: &str) -> String {
    const LIMIT: usize = 160;
    let flat = text.replace('\n', " ⏎ ");
    match flat.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// One indented line per text, shortened, for the scenario's log.
pub(super) fn listing(texts: &[impl AsRef<str>]) -> String {
    texts
        .iter()
        .map(|text| format!("\n  - {}", shorten(text.as_ref())))
        .collect()
}

/// What is wrong with `texts` (search results, stored memories, each a `what`): a text of
/// `contains` that none holds, or one of `not_contains` that some holds (case-insensitive).
pub(super) fn text_problems(
    texts: &[impl AsRef<str>],
    contains: &[String],
    not_contains: &[String],
    what: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for needle in contains {
        if !texts
            .iter()
            .any(|text| lower_contains(text.as_ref(), needle))
        {
            problems.push(format!("no {what} contains {needle:?}"));
        }
    }
    for needle in not_contains {
        if texts
            .iter()
            .any(|text| lower_contains(text.as_ref(), needle))
        {
            problems.push(format!("a {what} contains {needle:?}"));
        }
    }
    problems
}
