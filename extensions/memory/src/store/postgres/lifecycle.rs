//! PostgreSQL's part of a fact's lifecycle, which is written once in `store/sql/lifecycle.rs`:
//! `supersedes` written into a memory's attributes as SQLite's `json_set` writes it, and a decay
//! run written in one statement.

use serde_json::Value;
use sqlx::PgConnection;

use crate::error::{MemoryError, Result};
use crate::store::sql::Decayed;

/// A JSON object's members in their written order (serde_json's own map sorts them), so that
/// setting one key keeps the others where they were, as SQLite's `json_set` does.
struct Members(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, Value>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// SQLite's `json_set(text, '$.<key>', value)` on a JSON object: the key's value replaced where
/// it stands, or the key appended, written compact. `None` when `text` is JSON but not an
/// object, which `json_set` leaves as it is.
fn json_set(text: &str, key: &str, value: Value) -> std::result::Result<Option<String>, String> {
    let parsed: Value = serde_json::from_str(text).map_err(|error| error.to_string())?;
    if !parsed.is_object() {
        return Ok(None);
    }
    let Members(mut members) = serde_json::from_str(text).map_err(|error| error.to_string())?;
    match members.iter_mut().find(|(name, _)| name == key) {
        Some((_, old)) => *old = value,
        None => members.push((key.to_owned(), value)),
    }
    let written: Vec<String> = members
        .into_iter()
        .map(|(name, value)| format!("{}:{value}", Value::String(name)))
        .collect();
    Ok(Some(format!("{{{}}}", written.join(","))))
}

/// Records `supersedes: old_id` in the attributes of memory `id`, as SQLite's
/// `json_set(attributes, '$.supersedes', old_id)` does; a memory that does not exist, or whose
/// attributes are not an object, is left alone.
pub(super) async fn set_supersedes(tx: &mut PgConnection, id: &str, old_id: &str) -> Result<()> {
    let attributes: Option<String> =
        sqlx::query_scalar("SELECT attributes FROM memories WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(attributes) = attributes else {
        return Ok(());
    };
    let updated = json_set(&attributes, "supersedes", Value::String(old_id.to_owned()))
        .map_err(|error| MemoryError::Corrupt(format!("attributes of `{id}`: {error}")))?;
    if let Some(updated) = updated {
        sqlx::query("UPDATE memories SET attributes = $1 WHERE id = $2")
            .bind(updated)
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Writes a decay run at `now` in one statement rather than one per fact, inside `tx`.
pub(super) async fn write_decay(
    tx: &mut PgConnection,
    decayed: &[Decayed],
    now: i64,
) -> Result<()> {
    let ids: Vec<&str> = decayed.iter().map(|fact| fact.id.as_str()).collect();
    let confidences: Vec<f64> = decayed.iter().map(|fact| fact.confidence).collect();
    let fadings: Vec<bool> = decayed.iter().map(|fact| fact.faded).collect();
    sqlx::query(
        "UPDATE memories m SET confidence = d.confidence, decayed_at = $4, \
         faded_at = CASE WHEN d.faded THEN $4 ELSE m.faded_at END \
         FROM UNNEST($1::text[], $2::float8[], $3::bool[]) AS d (id, confidence, faded) \
         WHERE m.id = d.id",
    )
    .bind(&ids)
    .bind(&confidences)
    .bind(&fadings)
    .bind(now)
    .execute(tx)
    .await?;
    Ok(())
}
