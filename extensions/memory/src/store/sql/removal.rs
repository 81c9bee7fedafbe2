//! The parts of removing memories that read the same in both backends: what a removed memory
//! is announced as, the cached vectors of removed texts, and the sessions and owned rows of an
//! erased user.
//! The removals themselves stay with each backend (`store/*/removal.rs`): SQLite merges its
//! full-text index and moves its vector mirror along, PostgreSQL locks the rows it removes and
//! takes the planner's statistics again after an erasure.

use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{remove_memberships, revoke_user_keys, Bind, Dialect, Driver};
use crate::error::Result;
use crate::store::rows::cached_hashes;
use crate::types::{MemoryForgotten, MemoryKind};

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

/// Removes the cached vectors of `texts`, on `connection` inside the caller's transaction.
/// Another memory with the same text only loses a cached vector: it is re-embedded if it is
/// ever indexed again.
pub(crate) async fn forget_cached_vectors<D: Dialect>(
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
pub(crate) async fn forget_user_cached_vectors<D: Dialect>(
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
pub(crate) async fn user_sessions<D: Dialect>(
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
pub(crate) async fn erase_owned_rows<D: Dialect>(
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
