//! Forgetting that keeps the row, and bringing a soft-deleted memory back ([`SoftForget`]),
//! written once for both backends. Soft-deleting is the write expiry makes (`valid_until`, the
//! vectors dropped), and decay under `decay_action = "soft_delete"` makes it through
//! [`soft_delete`] too; restoring undoes it and queues the memory for its vector again, and
//! for a soft forget undoes what the forget took with it (its receipt says what).
//! Releasing lifts a quarantine (see `crate::screening`): the row was kept whole, so nothing
//! else changes.

use async_trait::async_trait;

use sqlx::{Database, QueryBuilder};

use serde_json::Value;

use super::lifecycle::owners_of;
use super::{forgotten, Bind, Dialect, Driver, Run, SqlStore, FORGOTTEN_COLUMNS};
use crate::error::Result;
use crate::store::backend::SoftForget;
use crate::store::rows::json_list;
use crate::types::{ForgetReceipt, MemoryForgotten, ReceiptEntry, Restoration};

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
    async fn restore(&self, id: &str) -> Result<Restoration> {
        let owners = owners_of(self, &[id.to_owned()]).await?;
        let mut tx = self.write(owners.scope()).await?;
        let mut asked = QueryBuilder::<S::Db>::new(
            "SELECT valid_until FROM memories WHERE valid_until IS NOT NULL AND id = ",
        );
        asked.text(id);
        let Some(row) = S::Db::rows(&mut tx, asked).await?.into_iter().next() else {
            return Ok(Restoration::default());
        };
        let retired_at = S::Db::int(&row, "valid_until")?;
        let undone = soft_forget_of::<S::Db>(&mut tx, id, retired_at).await?;
        // What the forget soft-deleted with it, still as it left them.
        let mut ids = vec![id.to_owned()];
        if let Some(receipt) = &undone {
            ids.extend(
                receipt
                    .removed
                    .iter()
                    .filter(|entry| entry.kind != "entity" && entry.id != id)
                    .map(|entry| entry.id.clone()),
            );
        }
        let mut restoration = Restoration::default();
        for chunk in ids.chunks(500) {
            let mut restore = QueryBuilder::<S::Db>::new(
                "UPDATE memories SET valid_until = NULL WHERE valid_until = ",
            );
            restore
                .int(retired_at)
                .push(" AND id IN ")
                .text_list(chunk)
                .push(" RETURNING id");
            for row in S::Db::rows(&mut tx, restore).await? {
                restoration.restored.push(S::Db::text(&row, "id")?);
            }
            // Each waits for its vector again (those of the chunk active now).
            let mut queue = QueryBuilder::<S::Db>::new(
                "INSERT INTO embedding_queue (memory_id, enqueued_at) \
                 SELECT id, created_at FROM memories WHERE valid_until IS NULL AND id IN ",
            );
            queue
                .text_list(chunk)
                .push(" ON CONFLICT (memory_id) DO NOTHING");
            S::Db::execute(&mut tx, queue).await?;
        }
        // The one asked for first, the rest in the receipt's order.
        restoration
            .restored
            .sort_by_key(|restored| ids.iter().position(|id| id == restored));
        for changed in undone.iter().flat_map(|receipt| &receipt.changed) {
            if give_sources_back::<S::Db>(&mut tx, changed).await? {
                restoration.sources_back.push(changed.id.clone());
            }
        }
        tx.commit().await?;
        Ok(restoration)
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

/// The soft forget that asked for `id` alone and soft-deleted it at `retired_at` (its receipt),
/// if that is how it was retired; not one that expiry, a correction or decay made, nor one of
/// several memories asked for at once (what it took with it cannot be told apart).
async fn soft_forget_of<D: Dialect>(
    connection: &mut D::Connection,
    id: &str,
    retired_at: i64,
) -> Result<Option<ForgetReceipt>> {
    let mut query =
        QueryBuilder::<D>::new("SELECT receipt FROM forget_receipts WHERE created_at = ");
    query.int(retired_at);
    for row in D::rows(connection, query).await? {
        // Another forget's receipt of the same second that cannot be read is not this one's
        // concern: it is reported, and passed over.
        let receipt: ForgetReceipt = match serde_json::from_str(&D::text(&row, "receipt")?) {
            Ok(receipt) => receipt,
            Err(error) => {
                tracing::warn!(%error, "a forget receipt cannot be read; passed over");
                continue;
            }
        };
        if receipt.action == "forget_soft" && receipt.requested == [id] {
            return Ok(Some(receipt));
        }
    }
    Ok(None)
}

/// Puts back into the provenance of the fact `changed` names the sources the forget took from
/// it (those active again that it does not hold already); whether any went back.
async fn give_sources_back<D: Dialect>(
    connection: &mut D::Connection,
    changed: &ReceiptEntry,
) -> Result<bool> {
    let mut query = QueryBuilder::<D>::new("SELECT source_ids FROM memories WHERE id = ");
    query.text(changed.id.as_str());
    let Some(row) = D::rows(connection, query).await?.into_iter().next() else {
        return Ok(false);
    };
    let mut sources = json_list(&D::text(&row, "source_ids")?, "source_ids")?;
    let lost: Vec<String> = changed
        .lost_sources
        .iter()
        .filter(|lost| !sources.contains(lost))
        .cloned()
        .collect();
    if lost.is_empty() {
        return Ok(false);
    }
    // Only those active again: a source purged or retired since stays out.
    let mut active =
        QueryBuilder::<D>::new("SELECT id FROM memories WHERE valid_until IS NULL AND ");
    D::push_one_of(&mut active, "id", &lost);
    let active: Vec<String> = D::rows(connection, active)
        .await?
        .iter()
        .map(|row| D::text(row, "id"))
        .collect::<Result<_>>()?;
    let missing: Vec<String> = lost.into_iter().filter(|id| active.contains(id)).collect();
    if missing.is_empty() {
        return Ok(false);
    }
    sources.extend(missing);
    let mut update = QueryBuilder::<D>::new("UPDATE memories SET source_ids = ");
    update
        .text(Value::from(sources).to_string())
        .push(" WHERE id = ")
        .text(changed.id.as_str());
    D::execute(connection, update).await?;
    Ok(true)
}
