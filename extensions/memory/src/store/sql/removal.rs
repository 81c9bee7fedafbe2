//! Removing memories for good, for both backends ([`MemoryRemoval`]): purging some of them and
//! erasing everything about a user, with what a removed memory is announced as and the cached
//! vectors of removed texts. Each backend keeps, as [`SqlStore`] hooks, how it erases a user's
//! vectors ([`SqlStore::erase_user_vectors`]), what ends a removal inside its transaction
//! ([`SqlStore::begin_removal`] and [`SqlStore::end_removal`]: SQLite merges its full-text
//! index or marks the merge due, and moves the vector generation on) and after it
//! ([`SqlStore::removal_committed`]: SQLite moves its vector mirror along, PostgreSQL takes the
//! planner's statistics again after an erasure).

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Database, QueryBuilder};

use super::lineage;
use super::retire::soft_delete;
use super::{
    remove_memberships, revoke_user_keys, Bind, Dialect, Driver, Run, SqlStore, WriteScope,
};
use crate::error::{MemoryError, Result};
use crate::store::backend::MemoryRemoval;
use crate::store::rows::{cached_hashes, new_id, ts};
use crate::store::{Erasure, ForgetRequest, Forgetting};
use crate::types::{ForgetReceipt, MemoryForgotten, MemoryKind, ReceiptEntry, UserErased};

#[async_trait]
impl<S: SqlStore> MemoryRemoval for S {
    async fn forget(&self, request: &ForgetRequest<'_>) -> Result<Forgetting> {
        if request.ids.is_empty() {
            return Ok(Forgetting {
                forgotten: Vec::new(),
                receipt: empty_receipt(request, request.user_id.map(str::to_owned)),
            });
        }
        // The ids, and what is derived from them, may be anyone's: the whole store waits.
        let mut tx = self.write(WriteScope::Store).await?;
        let traced = lineage::trace::<S::Db>(&mut tx, request.ids, request.soft).await?;
        let ids = traced.removed_ids();
        let mut artefacts = lineage::count_artefacts::<S::Db>(&mut tx, &ids).await?;
        artefacts.insert(
            "vectors".to_owned(),
            self.count_vectors(&mut tx, &ids).await?,
        );
        let mut removed = traced.removed.clone();
        let (forgotten, generation) = if request.soft {
            // The rows stay, with their text, full-text entry and entity links, for an admin
            // to restore.
            for kept in [
                "memory_rows",
                "full_text_entries",
                "entity_links",
                "cached_vectors",
            ] {
                artefacts.remove(kept);
            }
            let retired = soft_delete(self, &mut tx, &ids, ts(request.at)).await?;
            artefacts.insert("memory_rows_soft_deleted".to_owned(), retired.len() as u64);
            (retired, None)
        } else {
            let mentioned = lineage::entities_of::<S::Db>(&mut tx, &ids).await?;
            self.begin_removal(&mut tx, ids.len()).await?;
            let purged = purge_memories(self, &mut tx, &ids).await?;
            removed
                .extend(lineage::remove_unmentioned_entities::<S::Db>(&mut tx, &mentioned).await?);
            let generation = self.end_removal(&mut tx, None, !purged.is_empty()).await?;
            (purged, generation)
        };
        lineage::write_changes::<S::Db>(&mut tx, &traced.changed).await?;
        artefacts.insert("query_vectors".to_owned(), request.query_vectors);
        artefacts.insert("copies_announced".to_owned(), forgotten.len() as u64);
        let owner = request.user_id.map(str::to_owned).or_else(|| {
            traced
                .owners
                .first()
                .filter(|owner| !owner.is_empty())
                .cloned()
        });
        let receipt = ForgetReceipt {
            removed,
            changed: traced
                .changed
                .iter()
                .map(|(entry, _)| entry.clone())
                .collect(),
            artefacts,
            ..empty_receipt(request, owner)
        };
        store_receipt::<S::Db>(&mut tx, &receipt).await?;
        tx.commit().await?;
        if request.soft {
            self.vectors_dropped(&ids);
        } else {
            self.removal_committed(&ids, generation, false).await;
        }
        Ok(Forgetting { forgotten, receipt })
    }

    async fn receipts(&self, user_id: Option<&str>, limit: usize) -> Result<Vec<ForgetReceipt>> {
        let mut query = QueryBuilder::<S::Db>::new("SELECT receipt FROM forget_receipts");
        if let Some(user_id) = user_id {
            query.push(" WHERE user_id = ").text(user_id);
        }
        query
            .push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .count(limit);
        self.read(query)
            .await?
            .iter()
            .map(|row| {
                serde_json::from_str(&S::Db::text(row, "receipt")?)
                    .map_err(|error| MemoryError::Corrupt(format!("forget receipt: {error}")))
            })
            .collect()
    }

    /// Set-based, not a few statements per memory: a user with 100k memories is erased in
    /// seconds rather than a minute of held writers. What references a row goes before it
    /// (foreign keys).
    async fn erase_user(&self, user_id: &str) -> Result<Erasure> {
        let mut tx = self.write(WriteScope::Owner(user_id)).await?;
        let mut query =
            QueryBuilder::<S::Db>::new("SELECT id, kind FROM memories WHERE user_id = ");
        query.text(user_id);
        let rows = S::Db::rows(&mut tx, query).await?;
        let mut removed = Vec::with_capacity(rows.len());
        for row in &rows {
            removed.push(ReceiptEntry::new(
                S::Db::text(row, "id")?,
                S::Db::text(row, "kind")?,
                "erased",
            ));
        }
        let ids: Vec<String> = removed.iter().map(|entry| entry.id.clone()).collect();
        let mut artefacts = lineage::count_artefacts::<S::Db>(&mut tx, &ids).await?;
        artefacts.insert(
            "vectors".to_owned(),
            self.count_vectors(&mut tx, &ids).await?,
        );
        let mut query = QueryBuilder::<S::Db>::new("SELECT id FROM entities WHERE owner_id = ");
        query.text(user_id);
        for row in S::Db::rows(&mut tx, query).await? {
            removed.push(ReceiptEntry::new(
                S::Db::text(&row, "id")?,
                "entity",
                "erased",
            ));
        }
        let session_ids = user_sessions::<S::Db>(&mut tx, user_id).await?;
        forget_user_cached_vectors::<S::Db>(&mut tx, user_id).await?;
        self.erase_user_vectors(&mut tx, user_id, ids.len()).await?;
        // Each condition its own statement, so that each can use its index.
        let of_user = "memory_id IN (SELECT id FROM memories WHERE user_id = ";
        for (table, condition, end) in [
            ("ingested_events", "user_id = ", ""),
            ("ingested_events", of_user, ")"),
            ("memory_entities", of_user, ")"),
            ("embedding_queue", of_user, ")"),
            // A memory's sentence keys go with it; this also drops any left behind under the
            // user's name.
            ("memory_sentence_vectors", "user_id = ", ""),
        ] {
            let mut delete =
                QueryBuilder::<S::Db>::new(format!("DELETE FROM {table} WHERE {condition}"));
            delete.text(user_id).push(end);
            S::Db::execute(&mut tx, delete).await?;
        }
        let now = Utc::now();
        self.begin_removal(&mut tx, ids.len()).await?;
        erase_owned_rows::<S::Db>(&mut tx, user_id, now).await?;
        // The user's earlier receipts go; the erasure's own is the one kept.
        let mut receipts =
            QueryBuilder::<S::Db>::new("DELETE FROM forget_receipts WHERE user_id = ");
        receipts.text(user_id);
        S::Db::execute(&mut tx, receipts).await?;
        let receipt = ForgetReceipt {
            id: new_id("rcpt"),
            action: "erase_user".to_owned(),
            user_id: Some(user_id.to_owned()),
            at: now,
            requested: Vec::new(),
            removed,
            changed: Vec::new(),
            artefacts,
        };
        store_receipt::<S::Db>(&mut tx, &receipt).await?;
        let generation = self
            .end_removal(&mut tx, Some(user_id), !ids.is_empty())
            .await?;
        tx.commit().await?;
        self.removal_committed(&ids, generation, true).await;
        Ok(Erasure {
            erased: UserErased {
                user_id: user_id.to_owned(),
                session_ids,
                memories_removed: ids.len() as u64,
            },
            receipt,
        })
    }
}

/// The receipt of `request` before anything is removed, for `user_id`.
fn empty_receipt(request: &ForgetRequest<'_>, user_id: Option<String>) -> ForgetReceipt {
    ForgetReceipt {
        id: new_id("rcpt"),
        action: if request.soft {
            "forget_soft"
        } else {
            "forget"
        }
        .to_owned(),
        user_id,
        at: request.at,
        requested: request.ids.to_vec(),
        removed: Vec::new(),
        changed: Vec::new(),
        artefacts: Default::default(),
    }
}

/// Stores `receipt` in the audit table, on `connection` inside the caller's transaction.
async fn store_receipt<D: Dialect>(
    connection: &mut D::Connection,
    receipt: &ForgetReceipt,
) -> Result<()> {
    let text = serde_json::to_string(receipt)
        .map_err(|error| MemoryError::Corrupt(format!("forget receipt: {error}")))?;
    let mut insert = QueryBuilder::<D>::new(
        "INSERT INTO forget_receipts (id, user_id, created_at, receipt) VALUES (",
    );
    insert
        .text(receipt.id.as_str())
        .push(", ")
        .opt_text(receipt.user_id.as_deref())
        .push(", ")
        .int(ts(receipt.at))
        .push(", ")
        .text(text)
        .push(")");
    D::execute(connection, insert).await?;
    Ok(())
}

/// The columns of `memories` that [`forgotten`] reads, with `id`.
pub(crate) const FORGOTTEN_COLUMNS: &str = "id, kind, content, user_id, chat_id, session_id";

/// The announcement of a removed memory, from a row holding [`FORGOTTEN_COLUMNS`].
pub(crate) fn forgotten<D: Driver>(row: &D::Row) -> Result<MemoryForgotten> {
    let kind = D::text(row, "kind")?;
    Ok(MemoryForgotten {
        memory_id: D::text(row, "id")?,
        // A row of an unknown kind is removed all the same; it is announced as an episode.
        kind: MemoryKind::parse(&kind).unwrap_or(MemoryKind::Episode),
        content: D::text(row, "content")?,
        user_id: D::opt_text(row, "user_id")?,
        chat_id: D::opt_text(row, "chat_id")?,
        session_id: D::opt_text(row, "session_id")?,
    })
}

/// Ids per statement of a purge: well under SQLite's 32,766 parameters.
const PURGED_PER_STATEMENT: usize = 500;

/// Removes the memories `ids` with their entity links, queue entries and vectors
/// ([`SqlStore::drop_vectors`]) and the cached vectors of their texts, on `connection` inside
/// the caller's transaction (the whole store's writer); what was removed, in the order of
/// `ids`, each once. Unknown ids are skipped; the event ids the memories were stored from stay
/// recorded. The rows are read as [`Dialect::LOCK_ROWS`] says.
async fn purge_memories<S: SqlStore>(
    store: &S,
    connection: &mut <S::Db as Database>::Connection,
    ids: &[String],
) -> Result<Vec<MemoryForgotten>> {
    let mut found = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(PURGED_PER_STATEMENT) {
        let mut query =
            QueryBuilder::<S::Db>::new(format!("SELECT {FORGOTTEN_COLUMNS} FROM memories WHERE "));
        S::Db::push_one_of(&mut query, "id", chunk);
        query.push(S::Db::LOCK_ROWS);
        for row in S::Db::rows(connection, query).await? {
            let memory = forgotten::<S::Db>(&row)?;
            found.insert(memory.memory_id.clone(), memory);
        }
    }
    // In the order of `ids`; `remove`: an id named twice is announced once.
    let removed: Vec<MemoryForgotten> = ids.iter().filter_map(|id| found.remove(id)).collect();
    if removed.is_empty() {
        return Ok(removed);
    }
    let gone: Vec<String> = removed
        .iter()
        .map(|memory| memory.memory_id.clone())
        .collect();
    // Links, the queue and the vectors first: they reference the rows.
    for chunk in gone.chunks(PURGED_PER_STATEMENT) {
        let mut unlink = QueryBuilder::<S::Db>::new("DELETE FROM memory_entities WHERE ");
        S::Db::push_one_of(&mut unlink, "memory_id", chunk);
        S::Db::execute(connection, unlink).await?;
    }
    store.drop_vectors(connection, &gone).await?;
    for chunk in gone.chunks(PURGED_PER_STATEMENT) {
        let mut delete = QueryBuilder::<S::Db>::new("DELETE FROM memories WHERE ");
        S::Db::push_one_of(&mut delete, "id", chunk);
        S::Db::execute(connection, delete).await?;
    }
    let texts: Vec<String> = removed
        .iter()
        .map(|memory| memory.content.clone())
        .collect();
    forget_cached_vectors::<S::Db>(connection, &texts).await?;
    Ok(removed)
}

/// Removes the cached vectors of `texts`, on `connection` inside the caller's transaction.
/// Another memory with the same text only loses a cached vector: it is re-embedded if it is
/// ever indexed again.
async fn forget_cached_vectors<D: Dialect>(
    connection: &mut D::Connection,
    texts: &[String],
) -> Result<()> {
    let hashes: Vec<String> = texts.iter().flat_map(|text| cached_hashes(text)).collect();
    for chunk in hashes.chunks(500) {
        let mut delete =
            QueryBuilder::<D>::new("DELETE FROM embedding_cache WHERE content_hash IN ");
        delete.text_list(chunk);
        D::execute(connection, delete).await?;
    }
    Ok(())
}

/// Removes the cached vectors of `user`'s texts, on `connection` inside the caller's
/// transaction.
async fn forget_user_cached_vectors<D: Dialect>(
    connection: &mut D::Connection,
    user: &str,
) -> Result<()> {
    let mut query =
        QueryBuilder::<D>::new("SELECT DISTINCT content FROM memories WHERE user_id = ");
    query.text(user);
    let texts = D::rows(connection, query)
        .await?
        .iter()
        .map(|row| D::text(row, "content"))
        .collect::<Result<Vec<_>>>()?;
    forget_cached_vectors::<D>(connection, &texts).await
}

/// The sessions `user` had, in memories or consolidation records, sorted byte by byte.
async fn user_sessions<D: Dialect>(
    connection: &mut D::Connection,
    user: &str,
) -> Result<Vec<String>> {
    let mut query = QueryBuilder::<D>::new(
        "SELECT session_id FROM (SELECT session_id FROM memories \
         WHERE session_id IS NOT NULL AND user_id = ",
    );
    query
        .text(user)
        .push(" UNION SELECT session_id FROM sessions_consolidations WHERE user_id = ")
        .text(user)
        .push(format!(") AS s ORDER BY {}", D::byte_order("session_id")));
    D::rows(connection, query)
        .await?
        .iter()
        .map(|row| D::text(row, "session_id"))
        .collect()
}

/// Removes `user`'s memories, the links to and the entities of `user`, the user's consolidation
/// records, API keys (revoked at `at`) and chat memberships, on `connection` inside the caller's
/// transaction: the end of erasing a user, once what references the memories is gone.
async fn erase_owned_rows<D: Dialect>(
    connection: &mut D::Connection,
    user: &str,
    at: DateTime<Utc>,
) -> Result<()> {
    for (statement, end) in [
        ("DELETE FROM memories WHERE user_id = ", ""),
        (
            "DELETE FROM memory_entities WHERE entity_id IN (SELECT id FROM entities WHERE owner_id = ",
            ")",
        ),
        ("DELETE FROM entities WHERE owner_id = ", ""),
        ("DELETE FROM sessions_consolidations WHERE user_id = ", ""),
    ] {
        let mut query = QueryBuilder::<D>::new(statement);
        query.text(user).push(end);
        D::execute(connection, query).await?;
    }
    D::execute(connection, revoke_user_keys::<D>(user, at)).await?;
    D::execute(connection, remove_memberships::<D>(user)).await?;
    Ok(())
}
