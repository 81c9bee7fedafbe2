//! API keys, store settings, MCP sessions and chat members, for both backends. Each write is
//! one transaction of its own that no owner's writer waits for: every row here is keyed, and
//! its primary key settles a race (the first key, setting, binding or membership stands).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{Bind, Driver, Run, SqlStore, WriteScope};
use crate::error::{MemoryError, Result};
use crate::store::backend::AccessRecords;
use crate::store::{KeyRecord, McpSessionRecord};

/// The columns [`key`] reads.
const KEY_COLUMNS: &str = "id, hash, user_id, admin, chats, label, created_ms, revoked_ms";

/// How long an MCP session is kept: a client that comes back later initializes again.
const MCP_SESSION_KEPT_MS: i64 = 7 * 24 * 3600 * 1000;

/// A key from a row holding [`KEY_COLUMNS`].
fn key<D: Driver>(row: &D::Row) -> Result<KeyRecord> {
    let id = D::text(row, "id")?;
    let millis = |column: &str, value: i64| -> Result<DateTime<Utc>> {
        DateTime::from_timestamp_millis(value)
            .ok_or_else(|| MemoryError::Corrupt(format!("api_keys.{column} of {id}: {value}")))
    };
    let chats = serde_json::from_str(&D::text(row, "chats")?)
        .map_err(|error| MemoryError::Corrupt(format!("api_keys.chats of {id}: {error}")))?;
    let created_at = millis("created_ms", D::int(row, "created_ms")?)?;
    let revoked_at = match D::opt_int(row, "revoked_ms")? {
        Some(value) => Some(millis("revoked_ms", value)?),
        None => None,
    };
    Ok(KeyRecord {
        hash: D::text(row, "hash")?,
        user_id: D::opt_text(row, "user_id")?,
        admin: D::int(row, "admin")? == 1,
        chats,
        label: D::opt_text(row, "label")?,
        created_at,
        revoked_at,
        id,
    })
}

/// Every key, oldest first; with `id`, that key only.
fn select_keys<D: Driver>(id: Option<&str>) -> QueryBuilder<D> {
    let mut query = QueryBuilder::<D>::new(format!("SELECT {KEY_COLUMNS} FROM api_keys"));
    if let Some(id) = id {
        query.push(" WHERE id = ").text(id);
    }
    query.push(" ORDER BY created_ms, id");
    query
}

/// Revokes the live keys whose `column` holds `value` at `at` (the first revocation stands).
fn revoke_where<D: Driver>(column: &str, value: &str, at: DateTime<Utc>) -> QueryBuilder<D> {
    let mut query = QueryBuilder::<D>::new("UPDATE api_keys SET revoked_ms = ");
    query
        .int(at.timestamp_millis())
        .push(format!(" WHERE revoked_ms IS NULL AND {column} = "))
        .text(value);
    query
}

/// Revokes every live key of `user` at `at` (erasing a user).
pub(crate) fn revoke_user_keys<D: Driver>(user: &str, at: DateTime<Utc>) -> QueryBuilder<D> {
    revoke_where("user_id", user, at)
}

/// Removes every chat membership of `user` (erasing a user).
pub(crate) fn remove_memberships<D: Driver>(user: &str) -> QueryBuilder<D> {
    let mut query = QueryBuilder::<D>::new("DELETE FROM chat_members WHERE user_id = ");
    query.text(user);
    query
}

/// Sets `column` of the MCP session `id` to `value`, making the row if there is none; an
/// existing row is updated only under `condition` (empty: always).
fn upsert_session<D: Driver>(
    id: &str,
    column: &str,
    value: &str,
    now_ms: i64,
    condition: &str,
) -> QueryBuilder<D> {
    let mut query = QueryBuilder::<D>::new(format!(
        "INSERT INTO mcp_sessions (id, {column}, created_ms) VALUES ("
    ));
    query
        .text(id)
        .push(", ")
        .text(value)
        .push(", ")
        .int(now_ms)
        .push(format!(
            ") ON CONFLICT (id) DO UPDATE SET {column} = EXCLUDED.{column}{condition}"
        ));
    query
}

/// Selects or (with `delete`) removes the membership of `user` in `chat`.
fn membership<D: Driver>(chat: &str, user: &str, delete: bool) -> QueryBuilder<D> {
    let mut query = QueryBuilder::<D>::new(if delete {
        "DELETE FROM chat_members WHERE chat_id = "
    } else {
        "SELECT COUNT(*) AS members FROM chat_members WHERE chat_id = "
    });
    query.text(chat).push(" AND user_id = ").text(user);
    query
}

/// Runs `statements` in order in one write transaction; the rows each changed.
async fn write_all<S: SqlStore>(
    store: &S,
    statements: Vec<QueryBuilder<S::Db>>,
) -> Result<Vec<u64>> {
    let mut tx = store.write(WriteScope::Keyed).await?;
    let mut changed = Vec::with_capacity(statements.len());
    for statement in statements {
        changed.push(S::Db::execute(&mut tx, statement).await?);
    }
    tx.commit().await?;
    Ok(changed)
}

#[async_trait]
impl<S: SqlStore> AccessRecords for S {
    async fn insert_key(&self, key: &KeyRecord) -> Result<bool> {
        let chats = serde_json::to_string(&key.chats)
            .map_err(|error| MemoryError::Invalid(error.to_string()))?;
        let mut insert =
            QueryBuilder::<S::Db>::new(format!("INSERT INTO api_keys ({KEY_COLUMNS}) VALUES ("));
        insert
            .text(&key.id)
            .push(", ")
            .text(&key.hash)
            .push(", ")
            .opt_text(key.user_id.as_deref())
            .push(", ")
            .int(i64::from(key.admin))
            .push(", ")
            .text(chats)
            .push(", ")
            .opt_text(key.label.as_deref())
            .push(", ")
            .int(key.created_at.timestamp_millis())
            .push(", ")
            .opt_int(key.revoked_at.map(|at| at.timestamp_millis()))
            .push(") ON CONFLICT (id) DO NOTHING");
        Ok(write_all(self, vec![insert]).await? == [1])
    }

    async fn keys(&self, id: Option<&str>) -> Result<Vec<KeyRecord>> {
        self.read(select_keys(id))
            .await?
            .iter()
            .map(key::<S::Db>)
            .collect()
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>> {
        write_all(self, vec![revoke_where("id", id, at)]).await?;
        Ok(self.keys(Some(id)).await?.into_iter().next())
    }

    async fn setting(&self, name: &str) -> Result<Option<String>> {
        let mut query =
            QueryBuilder::<S::Db>::new("SELECT value FROM store_settings WHERE name = ");
        query.text(name);
        self.read(query)
            .await?
            .first()
            .map(|row| S::Db::text(row, "value"))
            .transpose()
    }

    async fn set_setting(&self, name: &str, value: &str) -> Result<bool> {
        let mut insert =
            QueryBuilder::<S::Db>::new("INSERT INTO store_settings (name, value) VALUES (");
        insert
            .text(name)
            .push(", ")
            .text(value)
            .push(") ON CONFLICT (name) DO NOTHING");
        Ok(write_all(self, vec![insert]).await? == [1])
    }

    async fn bind_mcp_session(&self, id: &str, key_id: &str, at: DateTime<Utc>) -> Result<()> {
        let now = at.timestamp_millis();
        let mut prune = QueryBuilder::<S::Db>::new("DELETE FROM mcp_sessions WHERE created_ms < ");
        prune.int(now - MCP_SESSION_KEPT_MS);
        let bind = upsert_session(
            id,
            "key_id",
            key_id,
            now,
            " WHERE mcp_sessions.key_id IS NULL",
        );
        write_all(self, vec![prune, bind]).await?;
        Ok(())
    }

    async fn store_mcp_session(&self, id: &str, initialize: &str, at: DateTime<Utc>) -> Result<()> {
        let store = upsert_session(id, "initialize", initialize, at.timestamp_millis(), "");
        write_all(self, vec![store]).await?;
        Ok(())
    }

    async fn mcp_session(&self, id: &str) -> Result<Option<McpSessionRecord>> {
        let mut query =
            QueryBuilder::<S::Db>::new("SELECT key_id, initialize FROM mcp_sessions WHERE id = ");
        query.text(id);
        self.read(query)
            .await?
            .first()
            .map(|row| {
                Ok(McpSessionRecord {
                    key_id: S::Db::opt_text(row, "key_id")?,
                    initialize: S::Db::opt_text(row, "initialize")?,
                })
            })
            .transpose()
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<()> {
        let mut delete = QueryBuilder::<S::Db>::new("DELETE FROM mcp_sessions WHERE id = ");
        delete.text(id);
        write_all(self, vec![delete]).await?;
        Ok(())
    }

    async fn add_chat_member(
        &self,
        chat: &str,
        user: &str,
        added_by: &str,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let mut insert = QueryBuilder::<S::Db>::new(
            "INSERT INTO chat_members (chat_id, user_id, added_by, added_ms) VALUES (",
        );
        insert
            .text(chat)
            .push(", ")
            .text(user)
            .push(", ")
            .text(added_by)
            .push(", ")
            .int(at.timestamp_millis())
            .push(") ON CONFLICT (chat_id, user_id) DO NOTHING");
        Ok(write_all(self, vec![insert]).await? == [1])
    }

    async fn remove_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        Ok(write_all(self, vec![membership(chat, user, true)]).await? == [1])
    }

    async fn is_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        let members = match self.read(membership(chat, user, false)).await?.first() {
            Some(row) => S::Db::int(row, "members")?,
            None => 0,
        };
        Ok(members > 0)
    }
}
