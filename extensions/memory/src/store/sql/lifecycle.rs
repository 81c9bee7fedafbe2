//! A fact's life after it is stored, for both backends: corrections, confirmation, conflicts,
//! supersession, decay and expiry. Each method is one transaction under the turn of the owner
//! whose rows it changes, or of the whole store when they may be anyone's (decay, expiry, or
//! several owners' rows). Dropping vectors, writing `supersedes` into a memory's attributes and
//! writing a decay run differ per database: they are [`SqlStore`] hooks.

use std::collections::BTreeSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;
use serde_json::Value;
use sqlx::QueryBuilder;

use super::retire::{forgotten_ids, soft_delete};
use super::{insert_memory, Bind, Driver, Run, SqlStore, WriteScope};
use crate::error::{MemoryError, Result};
use crate::store::backend::{FactLifecycle, MemoryRecords};
use crate::store::rows::{ts, MEMORY_COLUMNS};
use crate::store::NewMemory;
use crate::types::{DecayAction, DecayReport, Memory, MemoryKind, Origin, CONTRADICTS};

/// Appends `, valid_to = …` to an `UPDATE memories SET …`: the memory updated stops being true
/// where `new_id`, which replaces it, starts (unless its validity was closed before).
fn close_validity_at<D: Driver>(builder: &mut QueryBuilder<D>, new_id: &str) {
    builder
        .push(
            ", valid_to = COALESCE(valid_to, (SELECT COALESCE(n.valid_from, n.event_time) \
             FROM memories n WHERE n.id = ",
        )
        .text(new_id)
        .push("))");
}

/// The ids in `fact`'s `contradicts` list.
pub(crate) fn contested_ids(fact: &Memory) -> Vec<String> {
    fact.attributes
        .get(CONTRADICTS)
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A fact's decay in one run: its new confidence, and whether it fell below the threshold.
#[derive(Debug)]
pub(crate) struct Decayed {
    /// The fact.
    pub(crate) id: String,
    /// Its confidence after the run.
    pub(crate) confidence: f64,
    /// Whether it fades now (below the threshold under [`DecayAction::Archive`]; a fact
    /// soft-deleted instead does not fade).
    pub(crate) faded: bool,
}

/// The owners a write changes ('' for memories of nobody); one owner's writes take that
/// owner's turn, several owners' the store's.
#[derive(Debug, Default)]
pub(super) struct Owners(BTreeSet<String>);

impl Owners {
    /// Adds `owner`.
    pub(super) fn add(&mut self, owner: Option<&str>) {
        self.0.insert(owner.unwrap_or_default().to_owned());
    }

    /// The turn a write of these owners takes.
    pub(super) fn scope(&self) -> WriteScope<'_> {
        match (self.0.len(), self.0.first()) {
            (1, Some(owner)) => WriteScope::Owner(owner),
            _ => WriteScope::Store,
        }
    }
}

/// The owners of the memories `ids` (those that exist).
pub(super) async fn owners_of<S: SqlStore>(store: &S, ids: &[String]) -> Result<Owners> {
    let mut owners = Owners::default();
    for chunk in ids.chunks(500) {
        let mut query =
            QueryBuilder::<S::Db>::new("SELECT DISTINCT user_id FROM memories WHERE id IN ");
        query.text_list(chunk);
        for row in store.read(query).await? {
            owners.add(S::Db::opt_text(&row, "user_id")?.as_deref());
        }
    }
    Ok(owners)
}

/// The active fact `id`, of `user_id` when given.
async fn active_fact_of<S: MemoryRecords>(
    store: &S,
    id: &str,
    user_id: Option<&str>,
) -> Result<Memory> {
    match store.get(id).await? {
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

/// Writes a decay run at `now` one fact at a time, on `connection` inside the caller's
/// transaction.
pub(crate) async fn write_decay_each<D: Driver>(
    connection: &mut D::Connection,
    decayed: &[Decayed],
    now: i64,
) -> Result<()> {
    for fact in decayed {
        let mut update = QueryBuilder::<D>::new("UPDATE memories SET confidence = ");
        update
            .float(fact.confidence)
            .push(", decayed_at = ")
            .int(now)
            .push(", faded_at = CASE WHEN ")
            .int(i64::from(fact.faded))
            .push(" = 1 THEN ")
            .int(now)
            .push(" ELSE faded_at END WHERE id = ")
            .text(&fact.id);
        D::execute(connection, update).await?;
    }
    Ok(())
}

#[async_trait]
impl<S: SqlStore + MemoryRecords> FactLifecycle for S {
    async fn correct(
        &self,
        old_id: &str,
        user_id: Option<&str>,
        replacement: &NewMemory,
        entities: &[ExtractedEntity],
    ) -> Result<String> {
        let old = active_fact_of(self, old_id, user_id).await?;
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
        let mut tx = self.write(owners.scope()).await?;
        // Retire the old fact only if it is still active: a concurrent correction wins once.
        // A corrected fact was never true: its validity closes where it opened.
        let mut retire = QueryBuilder::<S::Db>::new("UPDATE memories SET valid_until = ");
        retire
            .int(ts(replacement.created_at))
            .push(", valid_to = COALESCE(valid_from, event_time) WHERE id = ")
            .text(&old.id)
            .push(" AND valid_until IS NULL");
        if S::Db::execute(&mut tx, retire).await? != 1 {
            return Err(MemoryError::NotFound(format!("no active fact `{old_id}`")));
        }
        self.drop_vectors(&mut tx, std::slice::from_ref(&old.id))
            .await?;
        let new_id = insert_memory::<S>(&mut tx, &replacement, entities).await?;
        // Provenance both ways: the new fact names the old (`corrects`), the old its successor.
        let mut link = QueryBuilder::<S::Db>::new("UPDATE memories SET superseded_by_id = ");
        link.text(&new_id).push(" WHERE id = ").text(&old.id);
        S::Db::execute(&mut tx, link).await?;
        tx.commit().await?;
        self.vectors_dropped(std::slice::from_ref(&old.id));
        Ok(new_id)
    }

    async fn confirm(&self, id: &str, user_id: Option<&str>) -> Result<Vec<String>> {
        let fact = active_fact_of(self, id, user_id).await?;
        let mut owners = Owners::default();
        owners.add(fact.user_id.as_deref());
        // Under the turn, so that a decay run does not write back the confidence it read before.
        let mut tx = self.write(owners.scope()).await?;
        // Read again under the owner's turn: a contest recorded meanwhile is resolved too.
        let mut read = QueryBuilder::<S::Db>::new(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = "
        ));
        read.text(id);
        let fact = match S::Db::rows(&mut tx, read).await?.first() {
            Some(row) => S::Db::memory(row)?,
            None => fact,
        };
        let mut attributes = fact.attributes.clone();
        let contested = contested_ids(&fact);
        attributes.remove(CONTRADICTS);
        let mut origin = fact.origin;
        if origin.is_model_made() {
            attributes.insert(
                "confirmed_origin".to_owned(),
                Value::String(origin.as_str().to_owned()),
            );
            origin = Origin::Told;
        }
        let mut protect = QueryBuilder::<S::Db>::new(
            "UPDATE memories SET decay_rate = 0.0, confidence = 1.0, origin = ",
        );
        protect.text(origin.as_str());
        // The attributes are written again only when they change, which keeps their order.
        if attributes != fact.attributes {
            protect
                .push(", attributes = ")
                .text(Value::Object(attributes).to_string());
        }
        protect.push(" WHERE id = ").text(id);
        S::Db::execute(&mut tx, protect).await?;
        // The stated facts it contradicts, still in force, give way now.
        let mut superseded = Vec::new();
        for old_id in contested {
            let mut lower = QueryBuilder::<S::Db>::new("UPDATE memories SET confidence = 0.3");
            close_validity_at(&mut lower, id);
            lower
                .push(" WHERE valid_until IS NULL AND superseded_at IS NULL AND id = ")
                .text(&old_id);
            if S::Db::execute(&mut tx, lower).await? == 1 {
                S::set_supersedes(&mut tx, id, &old_id).await?;
                superseded.push(old_id);
            }
        }
        tx.commit().await?;
        Ok(superseded)
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
        let mut tx = self.write(owners.scope()).await?;
        let mut lower = QueryBuilder::<S::Db>::new("UPDATE memories SET confidence = 0.3");
        close_validity_at(&mut lower, new_id);
        lower.push(" WHERE id = ").text(old_id);
        S::Db::execute(&mut tx, lower).await?;
        S::set_supersedes(&mut tx, new_id, old_id).await?;
        tx.commit().await
    }

    async fn contest(&self, old_id: &str, new_id: &str) -> Result<()> {
        let Some(new) = self.get(new_id).await? else {
            return Err(MemoryError::NotFound(format!("no fact `{new_id}`")));
        };
        if self.get(old_id).await?.is_none() {
            return Err(MemoryError::NotFound(format!("no fact `{old_id}`")));
        }
        let mut owners = Owners::default();
        owners.add(new.user_id.as_deref());
        let mut tx = self.write(owners.scope()).await?;
        // Read again under the owner's turn, so that two contests do not lose one another.
        let mut read = QueryBuilder::<S::Db>::new("SELECT attributes FROM memories WHERE id = ");
        read.text(new_id);
        let rows = S::Db::rows(&mut tx, read).await?;
        let Some(row) = rows.first() else {
            return Err(MemoryError::NotFound(format!("no fact `{new_id}`")));
        };
        let text = S::Db::text(row, "attributes")?;
        let mut attributes: serde_json::Map<String, Value> = serde_json::from_str(&text)
            .map_err(|err| MemoryError::Corrupt(format!("attributes: {err}")))?;
        let mut ids: Vec<Value> = attributes
            .get(CONTRADICTS)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !ids.iter().any(|id| id.as_str() == Some(old_id)) {
            ids.push(Value::String(old_id.to_owned()));
        }
        attributes.insert(CONTRADICTS.to_owned(), Value::Array(ids));
        let mut write = QueryBuilder::<S::Db>::new("UPDATE memories SET attributes = ");
        write
            .text(Value::Object(attributes).to_string())
            .push(" WHERE id = ")
            .text(new_id);
        S::Db::execute(&mut tx, write).await?;
        tx.commit().await
    }

    async fn decay(
        &self,
        threshold: f64,
        action: DecayAction,
        now: DateTime<Utc>,
    ) -> Result<DecayReport> {
        let mut tx = self.write(WriteScope::Store).await?;
        let mut select = QueryBuilder::<S::Db>::new(
            "SELECT id, confidence, decay_rate, created_at, last_accessed, decayed_at \
             FROM memories WHERE kind = 'fact' AND valid_until IS NULL AND decay_rate > 0",
        );
        // A faded fact is not decayed again; soft-deleting takes those an earlier run faded too
        // (their confidence is below the threshold already), so that switching the action
        // leaves no fact half-forgotten.
        if action == DecayAction::Archive {
            select.push(" AND faded_at IS NULL");
        }
        let rows = S::Db::rows(&mut tx, select).await?;
        let mut report = DecayReport::default();
        let now_ts = ts(now);
        let mut decayed = Vec::new();
        let mut deleted = Vec::new();
        for row in &rows {
            let confidence = S::Db::float(row, "confidence")?;
            let rate = S::Db::float(row, "decay_rate")?;
            let created = S::Db::int(row, "created_at")?;
            let accessed = S::Db::opt_int(row, "last_accessed")?;
            let decayed_at = S::Db::opt_int(row, "decayed_at")?;
            let from = [Some(created), accessed, decayed_at]
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
            let id = S::Db::text(row, "id")?;
            let below = decayed_confidence < threshold;
            // Below the threshold a fact fades: out of the context, kept whole (text, entity
            // links, vector) so that search finds it and a recall brings it back. Or, as the
            // reference design does, it is soft-deleted below (`valid_until`, vector dropped).
            let faded = below && action == DecayAction::Archive;
            match (below, action) {
                (false, _) => report.decayed += 1,
                (true, DecayAction::Archive) => report.faded += 1,
                (true, DecayAction::SoftDelete) => {
                    report.soft_deleted += 1;
                    deleted.push(id.clone());
                }
            }
            decayed.push(Decayed {
                id,
                confidence: decayed_confidence,
                faded,
            });
        }
        if !decayed.is_empty() {
            S::write_decay(&mut tx, &decayed, now_ts).await?;
        }
        let deleted = soft_delete(self, &mut tx, &deleted, now_ts).await?;
        tx.commit().await?;
        self.vectors_dropped(&forgotten_ids(&deleted));
        Ok(report)
    }

    async fn supersede(&self, old_ids: &[String], new_id: &str, at: DateTime<Utc>) -> Result<()> {
        let Some(first) = old_ids.first() else {
            return Ok(());
        };
        let mut involved = old_ids.to_vec();
        involved.push(new_id.to_owned());
        // Owners never change, so they can be read before the turn.
        let owners = owners_of(self, &involved).await?;
        let mut tx = self.write(owners.scope()).await?;
        for chunk in old_ids.chunks(500) {
            let mut update = QueryBuilder::<S::Db>::new("UPDATE memories SET superseded_at = ");
            update
                .int(ts(at))
                .push(", superseded_by_id = ")
                .text(new_id);
            close_validity_at(&mut update, new_id);
            update
                .push(" WHERE superseded_at IS NULL AND id IN ")
                .text_list(chunk);
            S::Db::execute(&mut tx, update).await?;
        }
        S::set_supersedes(&mut tx, new_id, first).await?;
        tx.commit().await
    }

    async fn expire(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.write(WriteScope::Store).await?;
        let mut retire = QueryBuilder::<S::Db>::new(
            "UPDATE memories SET valid_until = expires_at WHERE valid_until IS NULL \
             AND expires_at IS NOT NULL AND expires_at <= ",
        );
        retire.int(ts(now)).push(" RETURNING id");
        let ids = S::Db::rows(&mut tx, retire)
            .await?
            .iter()
            .map(|row| S::Db::text(row, "id"))
            .collect::<Result<Vec<_>>>()?;
        self.drop_vectors(&mut tx, &ids).await?;
        tx.commit().await?;
        self.vectors_dropped(&ids);
        Ok(ids.len() as u64)
    }
}
