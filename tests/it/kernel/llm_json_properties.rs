//! Property tests of the tolerant LLM-JSON reader: it never panics, and a JSON value a model
//! wrote bare, fenced or inside prose comes back exactly.

use mnemo_kernel::extract_json;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Any JSON value a model might write, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    prop::collection::vec((any::<String>(), json_value()), 0..6)
        .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>()))
}

/// Prose without brackets, braces, quotes or backticks, as a model writes around its JSON.
fn prose() -> impl Strategy<Value = String> {
    any::<String>().prop_map(|text| {
        text.chars()
            .filter(|c| !matches!(c, '{' | '}' | '[' | ']' | '"' | '`'))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_is_read_without_a_panic(text in any::<String>()) {
        let _ = extract_json(&text);
    }

    #[test]
    fn text_made_of_json_punctuation_is_read_without_a_panic(
        pieces in prop::collection::vec(
            prop::sample::select(vec!["{", "}", "[", "]", "\"", "\\", ":", ",", "```", "json", "\n", "a", "1"]),
            0..200,
        )
    ) {
        let _ = extract_json(&pieces.concat());
    }

    #[test]
    fn an_object_comes_back_bare_fenced_or_inside_prose(
        value in object(),
        before in prose(),
        after in prose(),
        pretty in any::<bool>(),
    ) {
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            value.to_string()
        };
        prop_assert_eq!(extract_json(&text), Some(value.clone()));
        prop_assert_eq!(extract_json(&format!("```json\n{text}\n```")), Some(value.clone()));
        prop_assert_eq!(extract_json(&format!("{before}\n{text}\n{after}")), Some(value));
    }
}
