//! A fact's life after it is stored: corrections, confirmation, conflicts, supersession, decay
//! and expiry. The SQLite store's lifecycle (`../sqlite/lifecycle.rs`) in PostgreSQL's words:
//! each method is one transaction under the advisory lock of the owner whose rows it changes,
//! or of the whole store when they may be anyone's (decay, expiry).

use std::collections::BTreeSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;
use serde_json::Value;
use sqlx::{PgExecutor, Postgres, Row, Transaction};

use super::vectors::drop_vectors;
use super::PostgresStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::{FactLifecycle, MemoryRecords};
use crate::store::rows::ts;
use crate::store::sql::insert_memory;
use crate::store::sql::WriteScope;
use crate::store::NewMemory;
use crate::types::{DecayReport, Memory, MemoryKind};

/// The owners a write changes, by their lock key ('' for memories of nobody); one owner's
/// writes take that owner's lock, several owners' the store's.
#[derive(Debug, Default)]
struct Owners(BTreeSet<String>);

impl Owners {
    fn add(&mut self, owner: Option<&str>) {
        self.0.insert(owner.unwrap_or_default().to_owned());
    }

    fn scope(&self) -> WriteScope<'_> {
        match (self.0.len(), self.0.first()) {
            (1, Some(owner)) => WriteScope::Owner(owner),
            _ => WriteScope::Store,
        }
    }
}

/// The owners of the memories `ids` (those that exist).
async fn owners_of(executor: impl PgExecutor<'_>, ids: &[String]) -> Result<Owners> {
    let found: Vec<Option<String>> =
        sqlx::query_scalar("SELECT DISTINCT user_id FROM memories WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(executor)
            .await?;
    let mut owners = Owners::default();
    for owner in &found {
        owners.add(owner.as_deref());
    }
    Ok(owners)
}

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
async fn set_supersedes(tx: &mut Transaction<'_, Postgres>, id: &str, old_id: &str) -> Result<()> {
    let attributes: Option<String> =
        sqlx::query_scalar("SELECT attributes FROM memories WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut **tx)
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
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

impl PostgresStore {
    /// The active fact `id`, of `user_id` when given.
    async fn active_fact_of(&self, id: &str, user_id: Option<&str>) -> Result<Memory> {
        match self.get(id).await? {
            Some(memory)
                if memory.kind == MemoryKind::Fact
                    && memory.valid_until.is_none()
                    && (user_id.is_none() || memory.user_id.as_deref() == user_id) =>
            {
                Ok(memory)
            }
            _ => Err(MemoryError::NotFound(format!("no active fact `{id}`"))),
        }
    }
}

#[async_trait]
impl FactLifecycle for PostgresStore {
    async fn correct(
        &self,
        old_id: &str,
        user_id: Option<&str>,
        replacement: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        let old = self.active_fact_of(old_id, user_id).await?;
        let mut replacement = replacement.clone();
        if !replacement.source_ids.contains(&old.id) {
            replacement.source_ids.push(old.id.clone());
        }
        replacement
            .attributes
            .insert("corrects".to_owned(), Value::String(old.id.clone()));
        // The old fact's owner and the correction's (the same, but for a caller who moves a fact).
        let mut owners = Owners::default();
        owners.add(old.user_id.as_deref());
        owners.add(replacement.user_id.as_deref());
        let mut tx = self.begin_write(owners.scope()).await?;
        // Retire the old fact only if it is still active: a concurrent correction wins once.
        let retired = sqlx::query(
            "UPDATE memories SET valid_until = $1 WHERE id = $2 AND valid_until IS NULL",
        )
        .bind(ts(replacement.created_at))
        .bind(&old.id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if retired != 1 {
            return Err(MemoryError::NotFound(format!("no active fact `{old_id}`")));
        }
        drop_vectors(&mut tx, std::slice::from_ref(&old.id)).await?;
        let new_id = insert_memory::<Self>(&mut tx, &replacement, entities).await?;
        // Provenance both ways: the new fact names the old (`corrects`), the old its successor.
        sqlx::query("UPDATE memories SET superseded_by_id = $1 WHERE id = $2")
            .bind(&new_id)
            .bind(&old.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(new_id)
    }

    async fn confirm(&self, id: &str, user_id: Option<&str>) -> Result<()> {
        let fact = self.active_fact_of(id, user_id).await?;
        let mut owners = Owners::default();
        owners.add(fact.user_id.as_deref());
        // Under the lock, so that a decay run does not write back the confidence it read before.
        let mut tx = self.begin_write(owners.scope()).await?;
        sqlx::query("UPDATE memories SET decay_rate = 0.0, confidence = 1.0 WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn resolve_conflict(&self, old_id: &str, new_id: &str) -> Result<()> {
        let (Some(old), Some(new)) = (self.get(old_id).await?, self.get(new_id).await?) else {
            return Err(MemoryError::NotFound(format!(
                "resolve_conflict needs both `{old_id}` and `{new_id}`"
            )));
        };
        let mut owners = Owners::default();
        owners.add(old.user_id.as_deref());
        owners.add(new.user_id.as_deref());
        let mut tx = self.begin_write(owners.scope()).await?;
        sqlx::query("UPDATE memories SET confidence = 0.3 WHERE id = $1")
            .bind(old_id)
            .execute(&mut *tx)
            .await?;
        set_supersedes(&mut tx, new_id, old_id).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn decay(&self, threshold: f64, now: DateTime<Utc>) -> Result<DecayReport> {
        let mut tx = self.begin_write(WriteScope::Store).await?;
        let rows = sqlx::query(
            "SELECT id, confidence, decay_rate, created_at, last_accessed, decayed_at FROM memories \
             WHERE kind = 'fact' AND valid_until IS NULL AND faded_at IS NULL AND decay_rate > 0",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut report = DecayReport::default();
        let now_ts = ts(now);
        let mut ids = Vec::new();
        let mut confidences = Vec::new();
        let mut fadings = Vec::new();
        for row in rows {
            let confidence: f64 = row.try_get("confidence")?;
            let rate: f64 = row.try_get("decay_rate")?;
            let created: i64 = row.try_get("created_at")?;
            let accessed: Option<i64> = row.try_get("last_accessed")?;
            let decayed: Option<i64> = row.try_get("decayed_at")?;
            let from = [Some(created), accessed, decayed]
                .into_iter()
                .flatten()
                .max()
                .unwrap_or(created);
            // Computed here rather than in SQL, so that both stores give the same bits.
            let days = (now_ts - from).max(0) as f64 / 86_400.0;
            if days <= 0.0 {
                continue;
            }
            let decayed_confidence = confidence * (-rate * days).exp();
            // Below the threshold a fact fades: out of the context, kept whole (text, entity
            // links, vector) so that search finds it and a recall brings it back.
            let faded = decayed_confidence < threshold;
            if faded {
                report.faded += 1;
            } else {
                report.decayed += 1;
            }
            ids.push(row.try_get::<String, _>("id")?);
            confidences.push(decayed_confidence);
            fadings.push(faded);
        }
        if ids.is_empty() {
            return Ok(report);
        }
        // One statement for the whole run rather than one per fact.
        sqlx::query(
            "UPDATE memories m SET confidence = d.confidence, decayed_at = $4, \
             faded_at = CASE WHEN d.faded THEN $4 ELSE m.faded_at END \
             FROM UNNEST($1::text[], $2::float8[], $3::bool[]) AS d (id, confidence, faded) \
             WHERE m.id = d.id",
        )
        .bind(&ids)
        .bind(&confidences)
        .bind(&fadings)
        .bind(now_ts)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(report)
    }

    async fn supersede(&self, old_ids: &[String], new_id: &str, at: DateTime<Utc>) -> Result<()> {
        let Some(first) = old_ids.first() else {
            return Ok(());
        };
        let mut involved = old_ids.to_vec();
        involved.push(new_id.to_owned());
        // Owners never change, so they can be read before the lock.
        let owners = owners_of(&self.pool, &involved).await?;
        let mut tx = self.begin_write(owners.scope()).await?;
        sqlx::query(
            "UPDATE memories SET superseded_at = $1, superseded_by_id = $2 \
             WHERE id = ANY($3) AND superseded_at IS NULL",
        )
        .bind(ts(at))
        .bind(new_id)
        .bind(old_ids)
        .execute(&mut *tx)
        .await?;
        set_supersedes(&mut tx, new_id, first).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn expire(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.begin_write(WriteScope::Store).await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "UPDATE memories SET valid_until = expires_at WHERE valid_until IS NULL \
             AND expires_at IS NOT NULL AND expires_at <= $1 RETURNING id",
        )
        .bind(ts(now))
        .fetch_all(&mut *tx)
        .await?;
        drop_vectors(&mut tx, &ids).await?;
        tx.commit().await?;
        Ok(ids.len() as u64)
    }
}
