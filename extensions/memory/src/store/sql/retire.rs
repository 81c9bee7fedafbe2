//! Forgetting that keeps the row, and bringing a soft-deleted memory back ([`SoftForget`]),
//! written once for both backends. Soft-deleting is the write expiry makes (`valid_until`, the
//! vectors dropped), and decay under `decay_action = "soft_delete"` makes it through
//! [`soft_delete`] too; restoring undoes it and queues the memory for its vector again.
//! Releasing lifts a quarantine (see `crate::screening`): the row was kept whole, so nothing
//! else changes.

use async_trait::async_trait;

use sqlx::{Database, QueryBuilder};

use super::lifecycle::owners_of;
use super::{forgotten, Bind, Run, SqlStore, FORGOTTEN_COLUMNS};
use crate::error::Result;
use crate::store::backend::SoftForget;

use crate::types::MemoryForgotten;

/// Soft-deletes the active memories among `ids` at `at` on `connection`, inside the caller's
/// transaction: `valid_until` set, vectors and sentence keys dropped. The caller tells the store
/// with `vectors_dropped` once it has committed. Returns what was soft-deleted; the write a
/// forget under `forget = "soft"` and a decay under `decay_action = "soft_delete"` share.
pub(crate) async fn soft_delete<S: SqlStore>(
    store: &S,
    connection: &mut <S::Db as Database>::Connection,
    ids: &[String],
    at: i64,
) -> Result<Vec<MemoryForgotten>> {
    let mut retired = Vec::new();
    for chunk in ids.chunks(500) {
        let mut retire = QueryBuilder::<S::Db>::new("UPDATE memories SET valid_until = ");
        retire
            .int(at)
            .push(" WHERE valid_until IS NULL AND id IN ")
            .text_list(chunk)
            .push(format!(" RETURNING {FORGOTTEN_COLUMNS}"));
        for row in S::Db::rows(connection, retire).await? {
            retired.push(forgotten::<S::Db>(&row)?);
        }
    }
    if !retired.is_empty() {
        let retired_ids = forgotten_ids(&retired);
        store.drop_vectors(connection, &retired_ids).await?;
    }
    Ok(retired)
}

/// The memory ids of `forgotten`.
pub(crate) fn forgotten_ids(forgotten: &[MemoryForgotten]) -> Vec<String> {
    forgotten.iter().map(|m| m.memory_id.clone()).collect()
}

#[async_trait]
impl<S: SqlStore> SoftForget for S {
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

    async fn release(&self, id: &str) -> Result<bool> {
        let owners = owners_of(self, &[id.to_owned()]).await?;
        let mut tx = self.write(owners.scope()).await?;
        let mut release = QueryBuilder::<S::Db>::new(
            "UPDATE memories SET quarantine = NULL WHERE quarantine IS NOT NULL AND id = ",
        );
        release.text(id);
        let released = S::Db::execute(&mut tx, release).await? == 1;
        tx.commit().await?;
        Ok(released)
    }
}
