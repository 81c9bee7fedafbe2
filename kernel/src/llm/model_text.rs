//! What a model server's text needs before it is shown or stored: the HTML entities some chat
//! formats write decoded (llama.cpp's wrote `&#34;` for every quote of a small model's reply),
//! and a final reply that only imitates a tool call recognised, so that it is neither shown
//! to the user nor stored as the agent's answer.

use std::borrow::Cow;

use serde_json::Value;

/// `text` with the HTML entities of quotes, brackets and ampersands decoded (`&#34;`, `&#x22;`,
/// `&quot;`, `&lt;`, `&gt;`, `&amp;`, `&apos;`, `&#39;`, and any other numeric entity); other
/// text as it is.
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

/// Markers of a tool call written as text in the chat formats small models are trained on.
const CALL_MARKERS: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<|tool_call",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "<function_calls>",
    "<function=",
    "<tool_use>",
    "to=functions.",
    "<｜tool▁call",
];

/// Whether a model's final reply is an imitation of a tool call rather than an answer:
/// `functions.remember: {…}`, a chat format's call markers, a ReAct `Action:` with its input,
/// or a JSON object naming a tool and its arguments, once its HTML entities are decoded. Prose
/// that mentions a function is not one.
pub fn imitates_tool_call(reply: &str) -> bool {
    let decoded = decode_entities(reply);
    let text = decoded.trim();
    if CALL_MARKERS.iter().any(|marker| text.contains(marker)) {
        return true;
    }
    if text.lines().any(|line| calls_a_function(line.trim_start())) {
        return true;
    }
    if text.starts_with("Action:") && text.contains("Action Input:") {
        return true;
    }
    let body = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|inner| inner.trim_end().strip_suffix("```"))
        .unwrap_or(text);
    match serde_json::from_str::<Value>(body.trim()) {
        Ok(Value::Object(object)) => names_a_call(&object),
        Ok(Value::Array(items)) => items.iter().filter_map(Value::as_object).any(names_a_call),
        _ => false,
    }
}

/// `functions.NAME:` or `functions.NAME(` at the start of `line`.
fn calls_a_function(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("functions.") else {
        return false;
    };
    let name_end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    name_end > 0
        && matches!(
            rest[name_end..].trim_start().chars().next(),
            Some(':' | '(')
        )
}

/// Whether a JSON object is a tool call: a name and its arguments, or a list of calls.
fn names_a_call(object: &serde_json::Map<String, Value>) -> bool {
    let named = ["name", "tool", "function", "tool_name"]
        .iter()
        .any(|key| object.contains_key(*key));
    let with_arguments = ["arguments", "parameters", "args", "input"]
        .iter()
        .any(|key| object.contains_key(*key));
    (named && with_arguments) || object.contains_key("tool_calls")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_decoded_and_other_ampersands_kept() {
        assert_eq!(
            decode_entities("{&#34;content&#34;: &quot;tea &amp; cake&quot;}"),
            "{\"content\": \"tea & cake\"}"
        );
        assert_eq!(
            decode_entities("Tom & Jerry &unknown; &#x27;"),
            "Tom & Jerry &unknown; '"
        );
    }

    #[test]
    fn imitated_calls_are_told_from_answers() {
        for imitation in [
            "functions.remember: {&#34;content&#34;: &#34;I am part of your team&#34;}",
            "functions.search_memory({\"query\": \"tea\"})",
            "<tool_call>{\"name\": \"remember\", \"arguments\": {}}</tool_call>",
            "{\"name\": \"remember\", \"arguments\": {\"content\": \"x\"}}",
            "```json\n{\"tool\": \"forget_memory\", \"args\": {\"id\": \"ep_1\"}}\n```",
            "Action: search_memory\nAction Input: tea",
            "[TOOL_CALLS] [{\"name\": \"remember\"}]",
        ] {
            assert!(imitates_tool_call(imitation), "{imitation}");
        }
        for answer in [
            "Noted: you like green tea.",
            "I can call functions.remember for you if you like.",
            "{\"name\": \"Ana\", \"city\": \"Lisbon\"}",
            "Action: none needed, you are all set.",
        ] {
            assert!(!imitates_tool_call(answer), "{answer}");
        }
    }
}
