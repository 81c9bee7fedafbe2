//! Reading JSON out of what a language model wrote: a bare object, a fenced ```json block, or the
//! first balanced `{...}` (or `[...]`) inside prose. Used by consolidation, reflection and LLM NER.

use serde_json::Value;

/// Deepest nesting accepted; deeper input is refused rather than parsed.
const MAX_DEPTH: usize = 64;

/// The first JSON object or array in `text`, read tolerantly; `None` if there is none.
///
/// Tried in order: the whole text; each fenced code block (```json … ``` or ``` … ```); each
/// balanced `{…}` or `[…]` span, outermost first, skipping brackets inside strings. When none
/// reads, the same again with HTML entities decoded (a chat format that wrote `&#34;` for
/// every quote).
pub fn extract_json(text: &str) -> Option<Value> {
    extract_json_as_written(text).or_else(|| {
        let decoded = super::model_text::decode_entities(text);
        match decoded {
            std::borrow::Cow::Owned(decoded) => extract_json_as_written(&decoded),
            std::borrow::Cow::Borrowed(_) => None,
        }
    })
}

/// [`extract_json`] on the text as the model wrote it.
fn extract_json_as_written(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    // Unclosed brackets count as depth too, which also bounds the span search below.
    if depth_of(trimmed) > MAX_DEPTH {
        return None;
    }
    if let Some(value) = parse_container(trimmed) {
        return Some(value);
    }
    for block in fenced_blocks(trimmed) {
        if let Some(value) = parse_container(block.trim()) {
            return Some(value);
        }
    }
    let bytes = trimmed.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let Some(offset) = trimmed[start..].find(['{', '[']) else {
            break;
        };
        let open = start + offset;
        if let Some(close) = balanced_end(&trimmed[open..]) {
            if let Some(value) = parse_container(&trimmed[open..open + close]) {
                return Some(value);
            }
        }
        start = open + 1;
    }
    None
}

fn parse_container(text: &str) -> Option<Value> {
    if !(text.starts_with('{') || text.starts_with('[')) || depth_of(text) > MAX_DEPTH {
        return None;
    }
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(|value| value.is_object() || value.is_array())
}

/// Whether a scan is inside a JSON string literal, so brackets in strings are not counted.
#[derive(Default)]
struct StringState {
    inside: bool,
    escaped: bool,
}

impl StringState {
    /// Feeds one character; true when it belongs to a string literal (quotes included).
    fn feed(&mut self, c: char) -> bool {
        if self.inside {
            match (self.escaped, c) {
                (true, _) => self.escaped = false,
                (false, '\\') => self.escaped = true,
                (false, '"') => self.inside = false,
                _ => {}
            }
            return true;
        }
        self.inside = c == '"';
        self.inside
    }
}

fn depth_of(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut strings = StringState::default();
    for c in text.chars() {
        if strings.feed(c) {
            continue;
        }
        match c {
            '{' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let body = &after[body_start..];
        let Some(close) = body.find("```") else {
            blocks.push(body);
            break;
        };
        blocks.push(&body[..close]);
        rest = &body[close + 3..];
    }
    blocks
}

/// Byte length of the balanced bracket span starting at `text[0]`, if it closes.
fn balanced_end(text: &str) -> Option<usize> {
    let mut stack = Vec::new();
    let mut strings = StringState::default();
    for (index, c) in text.char_indices() {
        if strings.feed(c) {
            continue;
        }
        match c {
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                if stack.pop() != Some(c) {
                    return None;
                }
                if stack.is_empty() {
                    return Some(index + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_shapes_models_write() {
        assert_eq!(extract_json(r#"{"a": 1}"#), Some(json!({"a": 1})));
        assert_eq!(
            extract_json("Here you go:\n```json\n{\"facts\": [\"x\"]}\n```\nAnything else?"),
            Some(json!({"facts": ["x"]}))
        );
        assert_eq!(
            extract_json(
                "Sure! The answer is {\"ok\": true, \"note\": \"a } in a string\"} as asked."
            ),
            Some(json!({"ok": true, "note": "a } in a string"}))
        );
        assert_eq!(extract_json("[1, 2]"), Some(json!([1, 2])));
        assert_eq!(
            extract_json("broken {\"a\": } then {\"b\": 2}"),
            Some(json!({"b": 2}))
        );
        // A chat format's entities, read only when the text does not read as it is.
        assert_eq!(
            extract_json("{&#34;facts&#34;: [&quot;tea &amp; cake&quot;]}"),
            Some(json!({"facts": ["tea & cake"]}))
        );
        assert_eq!(
            extract_json(r#"{"fact": "Tom &amp; Jerry"}"#),
            Some(json!({"fact": "Tom &amp; Jerry"}))
        );
    }

    #[test]
    fn refuses_what_is_not_there_or_too_deep() {
        assert_eq!(extract_json(""), None);
        assert_eq!(extract_json("no json here"), None);
        assert_eq!(extract_json("\"just a string\""), None);
        assert_eq!(extract_json("{unclosed"), None);
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert_eq!(extract_json(&deep), None);
    }
}
