//! Forgetting that keeps the row, and bringing a soft-deleted memory back ([`SoftForget`]),
//! written once for both backends. Soft-deleting is the write expiry makes (`valid_until`, the
//! vectors dropped); restoring undoes it and queues the memory for its vector again.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::lifecycle::owners_of;
use super::{forgotten, Bind, Run, SqlStore, FORGOTTEN_COLUMNS};
use crate::error::Result;
use crate::store::backend::SoftForget;
use crate::store::rows::ts;
use crate::types::MemoryForgotten;

#[async_trait]
impl<S: SqlStore> SoftForget for S {
    async fn retire(&self, ids: &[String], at: DateTime<Utc>) -> Result<Vec<MemoryForgotten>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let owners = owners_of(self, ids).await?;
        let mut tx = self.write(owners.scope()).await?;
        let mut retired = Vec::new();
        for chunk in ids.chunks(500) {
            let mut retire = QueryBuilder::<S::Db>::new("UPDATE memories SET valid_until = ");
            retire
                .int(ts(at))
                .push(" WHERE valid_until IS NULL AND id IN ")
                .text_list(chunk)
                .push(format!(" RETURNING {FORGOTTEN_COLUMNS}"));
            for row in S::Db::rows(&mut tx, retire).await? {
                retired.push(forgotten::<S::Db>(&row)?);
            }
        }
        let retired_ids: Vec<String> = retired.iter().map(|m| m.memory_id.clone()).collect();
        self.drop_vectors(&mut tx, &retired_ids).await?;
        tx.commit().await?;
        self.vectors_dropped(&retired_ids);
        Ok(retired)
    }

    async fn restore(&self, id: &str) -> Result<bool> {
        let owners = owners_of(self, &[id.to_owned()]).await?;
        let mut tx = self.write(owners.scope()).await?;
        let mut restore = QueryBuilder::<S::Db>::new(
            "UPDATE memories SET valid_until = NULL WHERE valid_until IS NOT NULL AND id = ",
        );
        restore.text(id);
        if S::Db::execute(&mut tx, restore).await? == 0 {
            return Ok(false);
        }
        let mut queue = QueryBuilder::<S::Db>::new(
            "INSERT INTO embedding_queue (memory_id, enqueued_at) \
             SELECT id, created_at FROM memories WHERE id = ",
        );
        queue.text(id).push(" ON CONFLICT (memory_id) DO NOTHING");
        S::Db::execute(&mut tx, queue).await?;
        tx.commit().await?;
        Ok(true)
    }
}
