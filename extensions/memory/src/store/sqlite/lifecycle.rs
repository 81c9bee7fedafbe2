//! A fact's life after it is stored: corrections, confirmation, conflicts, supersession,
//! decay and expiry.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;
use serde_json::Value;
use sqlx::Row;

use super::MemoryStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::{FactLifecycle, MemoryRecords};
use crate::store::rows::ts;
use crate::store::sql::insert_memory;
use crate::store::NewMemory;
use crate::types::{DecayReport, Memory, MemoryKind};

impl MemoryStore {
    pub(super) async fn active_fact_of(&self, id: &str, user_id: Option<&str>) -> Result<Memory> {
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
impl FactLifecycle for MemoryStore {
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
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        // Retire the old fact only if it is still active: a concurrent correction wins once.
        let retired =
            sqlx::query("UPDATE memories SET valid_until = ? WHERE id = ? AND valid_until IS NULL")
                .bind(ts(replacement.created_at))
                .bind(&old.id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if retired != 1 {
            return Err(MemoryError::NotFound(format!("no active fact `{old_id}`")));
        }
        self.drop_vector(&mut tx, &old.id).await?;
        let new_id = insert_memory::<Self>(&mut tx, &replacement, entities).await?;
        // Provenance both ways: the new fact names the old (`corrects`), the old its successor.
        sqlx::query("UPDATE memories SET superseded_by_id = ? WHERE id = ?")
            .bind(&new_id)
            .bind(&old.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.forget_vectors(std::slice::from_ref(&old.id));
        Ok(new_id)
    }

    async fn confirm(&self, id: &str, user_id: Option<&str>) -> Result<()> {
        self.active_fact_of(id, user_id).await?;
        let _write = self.write_lock.lock().await;
        sqlx::query("UPDATE memories SET decay_rate = 0.0, confidence = 1.0 WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn resolve_conflict(&self, old_id: &str, new_id: &str) -> Result<()> {
        if self.get(old_id).await?.is_none() || self.get(new_id).await?.is_none() {
            return Err(MemoryError::NotFound(format!(
                "resolve_conflict needs both `{old_id}` and `{new_id}`"
            )));
        }
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE memories SET confidence = 0.3 WHERE id = ?")
            .bind(old_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE memories SET attributes = json_set(attributes, '$.supersedes', ?) WHERE id = ?",
        )
        .bind(old_id)
        .bind(new_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn decay(&self, threshold: f64, now: DateTime<Utc>) -> Result<DecayReport> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query(
            "SELECT id, confidence, decay_rate, created_at, last_accessed, decayed_at FROM memories \
             WHERE kind = 'fact' AND valid_until IS NULL AND faded_at IS NULL AND decay_rate > 0",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut report = DecayReport::default();
        let now_ts = ts(now);
        for row in rows {
            let id: String = row.try_get("id")?;
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
            let days = (now_ts - from).max(0) as f64 / 86_400.0;
            if days <= 0.0 {
                continue;
            }
            let decayed_confidence = confidence * (-rate * days).exp();
            // Below the threshold a fact fades: out of the context, kept whole (text, entity
            // links, vector) so that search finds it and a recall brings it back.
            let faded = decayed_confidence < threshold;
            sqlx::query(
                "UPDATE memories SET confidence = ?, decayed_at = ?, \
                 faded_at = CASE WHEN ? THEN ? ELSE faded_at END WHERE id = ?",
            )
            .bind(decayed_confidence)
            .bind(now_ts)
            .bind(faded)
            .bind(now_ts)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
            if faded {
                report.faded += 1;
            } else {
                report.decayed += 1;
            }
        }
        tx.commit().await?;
        Ok(report)
    }

    async fn supersede(&self, old_ids: &[String], new_id: &str, at: DateTime<Utc>) -> Result<()> {
        if old_ids.is_empty() {
            return Ok(());
        }
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        for old_id in old_ids {
            sqlx::query(
                "UPDATE memories SET superseded_at = ?, superseded_by_id = ? WHERE id = ? AND superseded_at IS NULL",
            )
            .bind(ts(at))
            .bind(new_id)
            .bind(old_id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE memories SET attributes = json_set(attributes, '$.supersedes', ?) WHERE id = ?",
        )
        .bind(old_ids[0].clone())
        .bind(new_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn expire(&self, now: DateTime<Utc>) -> Result<u64> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM memories WHERE valid_until IS NULL AND expires_at IS NOT NULL AND expires_at <= ?",
        )
        .bind(ts(now))
        .fetch_all(&mut *tx)
        .await?;
        for id in &ids {
            sqlx::query("UPDATE memories SET valid_until = expires_at WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            self.drop_vector(&mut tx, id).await?;
        }
        tx.commit().await?;
        self.forget_vectors(&ids);
        Ok(ids.len() as u64)
    }
}
