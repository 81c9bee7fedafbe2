//! The subset of JSON Schema the kernel checks tool arguments against before a call.
//!
//! Checked: `type` (one or a list), `required`, `properties`, `additionalProperties: false`,
//! `enum`, `items`, `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, and nesting at most
//! 32 deep everywhere, free-form values included. Anything else in a
//! schema is documentation for the model and is not enforced here.

use serde_json::Value;

const MAX_DEPTH: usize = 32;

/// Checks `arguments` against `schema`; the error names the argument and the problem.
pub(crate) fn check(schema: &Value, arguments: &Value) -> Result<(), String> {
    check_nesting(arguments)?;
    check_at(schema, arguments, "", 0)
}

/// Refuses an object or array nested deeper than [`MAX_DEPTH`] anywhere in the arguments, in
/// declared properties and in free-form values alike (an `object` schema without `properties`
/// accepts any JSON, which the schema walk below never enters). Iterative, so any nesting is
/// safe to look at; the error names the top-level argument.
fn check_nesting(arguments: &Value) -> Result<(), String> {
    let top_level: Vec<(&Value, &str)> = match arguments {
        Value::Object(object) => object
            .iter()
            .map(|(name, value)| (value, name.as_str()))
            .collect(),
        other => vec![(other, "")],
    };
    let mut stack: Vec<(&Value, usize, &str)> = top_level
        .into_iter()
        .map(|(value, name)| (value, 1, name))
        .collect();
    while let Some((value, depth, name)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(object) => Box::new(object.values()),
            _ => continue,
        };
        if depth > MAX_DEPTH {
            return Err(format!(
                "{} is nested more than {MAX_DEPTH} levels deep; the limit is {MAX_DEPTH}",
                describe(name)
            ));
        }
        stack.extend(children.map(|child| (child, depth + 1, name)));
    }
    Ok(())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn matches_type(expected: &str, value: &Value) -> bool {
    let actual = type_name(value);
    actual == expected || (expected == "number" && actual == "integer")
}

fn describe(path: &str) -> String {
    if path.is_empty() {
        "arguments".to_owned()
    } else {
        format!("argument `{path}`")
    }
}

fn check_at(schema: &Value, value: &Value, path: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{} is nested too deeply", describe(path)));
    }
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(expected) = schema.get("type") {
        let allowed: Vec<&str> = match expected {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|name| matches_type(name, value)) {
            return Err(format!(
                "{}: expected {}, found {}",
                describe(path),
                allowed.join(" or "),
                type_name(value)
            ));
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum") {
        if !options.contains(value) {
            let listed: Vec<String> = options.iter().map(Value::to_string).collect();
            return Err(format!(
                "{}: must be one of {}",
                describe(path),
                listed.join(", ")
            ));
        }
    }
    match value {
        Value::Number(number) => {
            let number = number.as_f64().unwrap_or(f64::NAN);
            if let Some(minimum) = schema.get("minimum").and_then(Value::as_f64) {
                if number < minimum {
                    return Err(format!("{}: must be at least {minimum}", describe(path)));
                }
            }
            if let Some(maximum) = schema.get("maximum").and_then(Value::as_f64) {
                if number > maximum {
                    return Err(format!("{}: must be at most {maximum}", describe(path)));
                }
            }
        }
        Value::String(text) => {
            let length = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
                if length < min {
                    return Err(format!(
                        "{}: must be at least {min} characters",
                        describe(path)
                    ));
                }
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
                if length > max {
                    return Err(format!(
                        "{}: {length} characters, the limit is {max}",
                        describe(path)
                    ));
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if (items.len() as u64) < min {
                    return Err(format!(
                        "{}: must have at least {min} items",
                        describe(path)
                    ));
                }
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if items.len() as u64 > max {
                    return Err(format!(
                        "{}: {} items, the limit is {max}",
                        describe(path),
                        items.len()
                    ));
                }
            }
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check_at(item_schema, item, &format!("{path}[{index}]"), depth + 1)?;
                }
            }
        }
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if object.get(name).is_none_or(Value::is_null) {
                        return Err(format!("missing required {}", describe(&join(path, name))));
                    }
                }
            }
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            for (name, item) in object {
                match properties.and_then(|properties| properties.get(name)) {
                    Some(property) => check_at(property, item, &join(path, name), depth + 1)?,
                    None if closed => {
                        let known: Vec<&str> = properties
                            .map(|properties| properties.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        return Err(format!(
                            "unknown {}, expected one of: {}",
                            describe(&join(path, name)),
                            known.join(", ")
                        ));
                    }
                    None => {}
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 10},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "kind": {"type": "string", "enum": ["fact", "episode"]},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_valid_arguments() {
        check(
            &schema(),
            &json!({"query": "coffee", "limit": 5, "tags": ["a"]}),
        )
        .unwrap();
    }

    #[test]
    fn names_the_offending_argument() {
        let cases = [
            (json!({}), "missing required argument `query`"),
            (
                json!({"query": 3}),
                "argument `query`: expected string, found integer",
            ),
            (
                json!({"query": "x", "limit": "5"}),
                "argument `limit`: expected integer",
            ),
            (
                json!({"query": "x", "limit": 500}),
                "argument `limit`: must be at most 50",
            ),
            (
                json!({"query": "x", "kind": "dream"}),
                "argument `kind`: must be one of",
            ),
            (
                json!({"query": "x", "colour": 1}),
                "unknown argument `colour`",
            ),
            (
                json!({"query": "x", "tags": [1]}),
                "argument `tags[0]`: expected string",
            ),
            (
                json!({"query": "x", "tags": ["a", "b", "c"]}),
                "3 items, the limit is 2",
            ),
            (
                json!({"query": "01234567890"}),
                "11 characters, the limit is 10",
            ),
            (
                json!({"query": "x", "tags": []}),
                "must have at least 1 items",
            ),
            (json!("coffee"), "arguments: expected object, found string"),
        ];
        for (arguments, expected) in cases {
            let err = check(&schema(), &arguments).unwrap_err();
            assert!(err.contains(expected), "{arguments}: {err}");
        }
    }

    /// A free-form argument (`object` without `properties`) is held to the same nesting limit
    /// as declared ones: the schema walk never enters it.
    #[test]
    fn free_form_arguments_are_nested_at_most_the_limit() {
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object"}}});
        let nested = |levels: usize| {
            let mut value = json!("leaf");
            for _ in 1..levels {
                value = Value::Array(vec![value]);
            }
            json!({"metadata": {"deep": value}})
        };
        assert!(check(&schema, &nested(MAX_DEPTH)).is_ok());
        let err = check(&schema, &nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(
            err.contains("argument `metadata`") && err.contains("32"),
            "{err}"
        );
    }
}
