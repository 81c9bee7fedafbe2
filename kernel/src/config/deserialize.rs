//! Deserialising a table into a config type with the problem of every key reported, not only
//! the first: for the kernel's sections and every `[extensions.<name>]`.

use serde::de::DeserializeOwned;

/// `[key]` of the file, with every problem of its keys added to `problems`. When some keys are
/// bad, the section as the other keys give it, so that their values can be checked too.
pub(super) fn section<T: DeserializeOwned + Default>(
    root: &toml::Table,
    key: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    let table = match root.get(key)? {
        toml::Value::Table(table) => table,
        other => {
            problems.push(format!(
                "key `{key}`: expected a table, found {}",
                other.type_str()
            ));
            return None;
        }
    };
    let (parsed, found) = deserialize_all::<T>(table);
    for problem in found {
        let full = problem
            .path
            .map_or_else(|| key.to_owned(), |path| format!("{key}.{path}"));
        problems.push(format!("key `{full}`: {}", problem.reason));
    }
    parsed
}

/// One problem [`deserialize_all`] found.
pub(super) struct KeyProblem {
    /// Where, as `key` or `key.inner.0`; `None` for the table as a whole.
    pub(super) path: Option<String>,
    /// Why, in serde's words.
    pub(super) reason: String,
}

/// Deserialises `table` into `T`, collecting the problem of every key rather than stopping at
/// the first: each key an error names is set aside and the others are tried again, so a section
/// with two wrong-typed keys reports both. Returns what the keys without problems give (`None`
/// when even they do not make a `T`, as when a required key is missing) and the problems.
pub(super) fn deserialize_all<T: DeserializeOwned>(
    table: &toml::Table,
) -> (Option<T>, Vec<KeyProblem>) {
    let mut table = table.clone();
    let mut problems = Vec::new();
    let mut set_aside: Vec<String> = Vec::new();
    // Each round sets one key aside, so this ends; the bound is a guard.
    for _ in 0..=table.len() {
        let err = match serde_path_to_error::deserialize::<_, T>(toml::Value::Table(table.clone()))
        {
            Ok(parsed) => return (Some(parsed), problems),
            Err(err) => err,
        };
        let path = err.path().to_string();
        let inner = err.into_inner();
        let reason = inner.message().trim().to_owned();
        // The key at fault: the path's first segment, or the key an `unknown field` names.
        let key = match err_first_key(&path) {
            Some(key) if table.contains_key(key) => Some(key.to_owned()),
            _ => named_in(&reason, "unknown field `").filter(|key| table.contains_key(key)),
        };
        let Some(key) = key else {
            // A required key that was set aside is not missing: its problem is listed already.
            if named_in(&reason, "missing field `").is_some_and(|key| set_aside.contains(&key)) {
                return (None, problems);
            }
            problems.push(KeyProblem {
                path: (path != ".").then_some(path),
                reason,
            });
            return (None, problems);
        };
        table.remove(&key);
        problems.push(KeyProblem {
            path: Some(if path == "." { key.clone() } else { path }),
            reason,
        });
        set_aside.push(key);
    }
    (None, problems)
}

/// The first key of a `serde_path_to_error` path (`a.b[0]` gives `a`), if it starts with one.
fn err_first_key(path: &str) -> Option<&str> {
    if path == "." {
        return None;
    }
    let end = path.find(['.', '[']).unwrap_or(path.len());
    Some(&path[..end]).filter(|key| !key.is_empty())
}

/// The key named in serde's `unknown field `name`, expected …` or `missing field `name``, when
/// `reason` starts with `prefix` (up to the opening backtick).
fn named_in(reason: &str, prefix: &str) -> Option<String> {
    let rest = reason.strip_prefix(prefix)?;
    rest.split_once('`').map(|(key, _)| key.to_owned())
}
