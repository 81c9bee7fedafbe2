//! Tool results kept with `save_as`, and the `"${name.path}"` references later arguments make to
//! them.

use serde_json::Value;

/// Looks up `name.field.0.field` in the saved results.
fn lookup(saved: &std::collections::HashMap<String, Value>, reference: &str) -> Option<Value> {
    let mut parts = reference.split('.');
    let mut value = saved.get(parts.next()?)?;
    for part in parts {
        value = match part.parse::<usize>() {
            Ok(index) => value.get(index)?,
            Err(_) => value.get(part)?,
        };
    }
    Some(value.clone())
}

/// Replaces every string `"${name.path}"` in `value` by the saved value it names.
pub(super) fn substitute(
    saved: &std::collections::HashMap<String, Value>,
    value: &Value,
) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => match text
            .strip_prefix("${")
            .and_then(|rest| rest.strip_suffix('}'))
        {
            Some(reference) => lookup(saved, reference)
                .ok_or_else(|| format!("nothing saved under `{reference}`"))?,
            None => value.clone(),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute(saved, item))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, item)| Ok((key.clone(), substitute(saved, item)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}
