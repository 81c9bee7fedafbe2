//! The API keys' SQL and rows, the same in both backends: written once over sqlx's
//! `QueryBuilder`, which numbers the placeholders for each. The backends run these in their own
//! transactions (`store/*/access.rs`).

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Database, Decode, Encode, QueryBuilder, Row, Type};

use crate::error::{MemoryError, Result};
use crate::store::types::KeyRecord;

/// The columns [`key_from_row`] reads.
const KEY_COLUMNS: &str = "id, hash, user_id, admin, chats, label, created_ms, revoked_ms";

/// Inserts `key` unless a key with its id exists.
pub(crate) fn insert_key<'args, DB>(key: &KeyRecord) -> Result<QueryBuilder<'args, DB>>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
    Option<String>: Encode<'args, DB> + Type<DB> + 'args,
    Option<i64>: Encode<'args, DB> + Type<DB> + 'args,
{
    let chats = serde_json::to_string(&key.chats)
        .map_err(|error| MemoryError::Invalid(error.to_string()))?;
    let mut builder = QueryBuilder::new(format!("INSERT INTO api_keys ({KEY_COLUMNS}) "));
    builder.push_values([key], |mut row, key| {
        row.push_bind(key.id.clone())
            .push_bind(key.hash.clone())
            .push_bind(key.user_id.clone())
            .push_bind(i64::from(key.admin))
            .push_bind(chats.clone())
            .push_bind(key.label.clone())
            .push_bind(key.created_at.timestamp_millis())
            .push_bind(key.revoked_at.map(|at| at.timestamp_millis()));
    });
    builder.push(" ON CONFLICT (id) DO NOTHING");
    Ok(builder)
}

/// Every key, oldest first; with `id`, that key only.
pub(crate) fn select_keys<'args, DB>(id: Option<&str>) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new(format!("SELECT {KEY_COLUMNS} FROM api_keys"));
    if let Some(id) = id {
        builder.push(" WHERE id = ").push_bind(id.to_owned());
    }
    builder.push(" ORDER BY created_ms, id");
    builder
}

/// Revokes the key `id` at `at`, unless it was revoked before (the first time stands).
pub(crate) fn revoke_key<'args, DB>(id: &str, at: DateTime<Utc>) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    revoke_where("id", id, at)
}

/// Revokes every live key of `user` at `at` (erasing a user).
pub(crate) fn revoke_user_keys<'args, DB>(user: &str, at: DateTime<Utc>) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    revoke_where("user_id", user, at)
}

/// Revokes the live keys whose `column` holds `value`.
fn revoke_where<'args, DB>(
    column: &'static str,
    value: &str,
    at: DateTime<Utc>,
) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new("UPDATE api_keys SET revoked_ms = ");
    builder
        .push_bind(at.timestamp_millis())
        .push(format!(" WHERE revoked_ms IS NULL AND {column} = "))
        .push_bind(value.to_owned());
    builder
}

/// The value of the store setting `name`.
pub(crate) fn select_setting<'args, DB>(name: &str) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    with_text("SELECT value FROM store_settings WHERE name = ", name)
}

/// Sets the store setting `name` to `value` unless it is set; the first value stands.
pub(crate) fn insert_setting<'args, DB>(name: &str, value: &str) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new("INSERT INTO store_settings (name, value) VALUES (");
    builder
        .push_bind(name.to_owned())
        .push(", ")
        .push_bind(value.to_owned())
        .push(") ON CONFLICT (name) DO NOTHING");
    builder
}

/// A key from a row holding [`KEY_COLUMNS`], in either backend.
pub(crate) fn key_from_row<'r, R>(row: &'r R) -> Result<KeyRecord>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.try_get("id")?;
    let millis = |column: &str, value: i64| -> Result<DateTime<Utc>> {
        DateTime::from_timestamp_millis(value)
            .ok_or_else(|| MemoryError::Corrupt(format!("api_keys.{column} of {id}: {value}")))
    };
    let chats: String = row.try_get("chats")?;
    let chats = serde_json::from_str(&chats)
        .map_err(|error| MemoryError::Corrupt(format!("api_keys.chats of {id}: {error}")))?;
    let created = millis("created_ms", row.try_get("created_ms")?)?;
    let revoked = match row.try_get::<Option<i64>, _>("revoked_ms")? {
        Some(value) => Some(millis("revoked_ms", value)?),
        None => None,
    };
    Ok(KeyRecord {
        hash: row.try_get("hash")?,
        user_id: row.try_get("user_id")?,
        admin: row.try_get::<i64, _>("admin")? == 1,
        chats,
        label: row.try_get("label")?,
        created_at: created,
        revoked_at: revoked,
        id,
    })
}

/// How long an MCP session is kept: a client that comes back later initializes again.
pub(crate) const MCP_SESSION_KEPT_MS: i64 = 7 * 24 * 3600 * 1000;

/// Records that the MCP session `id` was opened by the key `key_id` (the first binding stands).
pub(crate) fn bind_session<'args, DB>(
    id: &str,
    key_id: &str,
    now_ms: i64,
) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    upsert_session(
        id,
        "key_id",
        key_id,
        now_ms,
        " WHERE mcp_sessions.key_id IS NULL",
    )
}

/// Keeps the client's `initialize` parameters (JSON) of the MCP session `id`.
pub(crate) fn store_session<'args, DB>(
    id: &str,
    initialize: &str,
    now_ms: i64,
) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    upsert_session(id, "initialize", initialize, now_ms, "")
}

/// Sets `column` of the MCP session `id` to `value`, making the row if there is none; an
/// existing row is updated only under `condition` (empty: always).
fn upsert_session<'args, DB>(
    id: &str,
    column: &'static str,
    value: &str,
    now_ms: i64,
    condition: &'static str,
) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new(format!(
        "INSERT INTO mcp_sessions (id, {column}, created_ms) VALUES ("
    ));
    builder
        .push_bind(id.to_owned())
        .push(", ")
        .push_bind(value.to_owned())
        .push(", ")
        .push_bind(now_ms)
        .push(format!(
            ") ON CONFLICT (id) DO UPDATE SET {column} = excluded.{column}{condition}"
        ));
    builder
}

/// The key and the `initialize` parameters of the MCP session `id`.
pub(crate) fn select_session<'args, DB>(id: &str) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    with_text(
        "SELECT key_id, initialize FROM mcp_sessions WHERE id = ",
        id,
    )
}

/// Forgets the MCP session `id`.
pub(crate) fn delete_session<'args, DB>(id: &str) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    with_text("DELETE FROM mcp_sessions WHERE id = ", id)
}

/// Forgets the MCP sessions opened before `before_ms`.
pub(crate) fn prune_sessions<'args, DB>(before_ms: i64) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new("DELETE FROM mcp_sessions WHERE created_ms < ");
    builder.push_bind(before_ms);
    builder
}

/// `sql` followed by `value` bound.
fn with_text<'args, DB>(sql: &'static str, value: &str) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new(sql);
    builder.push_bind(value.to_owned());
    builder
}

/// Makes `user` a member of `chat` unless they are one (the first record stands).
pub(crate) fn add_member<'args, DB>(
    chat: &str,
    user: &str,
    added_by: &str,
    at_ms: i64,
) -> QueryBuilder<'args, DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder =
        QueryBuilder::new("INSERT INTO chat_members (chat_id, user_id, added_by, added_ms) ");
    builder.push_values(
        [(chat, user, added_by)],
        |mut row, (chat, user, added_by)| {
            row.push_bind(chat.to_owned())
                .push_bind(user.to_owned())
                .push_bind(added_by.to_owned())
                .push_bind(at_ms);
        },
    );
    builder.push(" ON CONFLICT (chat_id, user_id) DO NOTHING");
    builder
}

/// The membership of `user` in `chat` (selecting, or with `delete`, removing it).
pub(crate) fn membership<'args, DB>(chat: &str, user: &str, delete: bool) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new(if delete {
        "DELETE FROM chat_members WHERE chat_id = "
    } else {
        "SELECT COUNT(*) FROM chat_members WHERE chat_id = "
    });
    builder
        .push_bind(chat.to_owned())
        .push(" AND user_id = ")
        .push_bind(user.to_owned());
    builder
}

/// Removes every membership of `user` (erasing a user).
pub(crate) fn remove_memberships<'args, DB>(user: &str) -> QueryBuilder<'args, DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    with_text("DELETE FROM chat_members WHERE user_id = ", user)
}

/// Implements [`AccessRecords`](crate::store::backend::AccessRecords) for a backend `$store` on
/// the database `$db`, written once over the statements above: the backend provides only
/// `pool` and `write_statements` (a write transaction as the backend takes it: SQLite under its
/// write lock, PostgreSQL beside owners' writers).
macro_rules! access_records {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::backend::AccessRecords for $store {
            async fn insert_key(
                &self,
                key: &$crate::store::KeyRecord,
            ) -> $crate::error::Result<bool> {
                let changed = self
                    .write_statements(vec![$crate::store::access::insert_key(key)?])
                    .await?;
                Ok(changed == [1])
            }

            async fn keys(
                &self,
                id: Option<&str>,
            ) -> $crate::error::Result<Vec<$crate::store::KeyRecord>> {
                let rows = $crate::store::access::select_keys::<$db>(id)
                    .build()
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map($crate::store::access::key_from_row)
                    .collect()
            }

            async fn revoke_key(
                &self,
                id: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> $crate::error::Result<Option<$crate::store::KeyRecord>> {
                self.write_statements(vec![$crate::store::access::revoke_key(id, at)])
                    .await?;
                Ok(self.keys(Some(id)).await?.into_iter().next())
            }

            async fn setting(&self, name: &str) -> $crate::error::Result<Option<String>> {
                Ok($crate::store::access::select_setting::<$db>(name)
                    .build_query_scalar()
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn set_setting(&self, name: &str, value: &str) -> $crate::error::Result<bool> {
                let changed = self
                    .write_statements(vec![$crate::store::access::insert_setting(name, value)])
                    .await?;
                Ok(changed == [1])
            }

            async fn bind_mcp_session(
                &self,
                id: &str,
                key_id: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> $crate::error::Result<()> {
                let now = at.timestamp_millis();
                self.write_statements(vec![
                    $crate::store::access::prune_sessions(
                        now - $crate::store::access::MCP_SESSION_KEPT_MS,
                    ),
                    $crate::store::access::bind_session(id, key_id, now),
                ])
                .await?;
                Ok(())
            }

            async fn store_mcp_session(
                &self,
                id: &str,
                initialize: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> $crate::error::Result<()> {
                self.write_statements(vec![$crate::store::access::store_session(
                    id,
                    initialize,
                    at.timestamp_millis(),
                )])
                .await?;
                Ok(())
            }

            async fn mcp_session(
                &self,
                id: &str,
            ) -> $crate::error::Result<Option<$crate::store::McpSessionRecord>> {
                let row = $crate::store::access::select_session::<$db>(id)
                    .build()
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| {
                    Ok($crate::store::McpSessionRecord {
                        key_id: sqlx::Row::try_get(&row, "key_id")?,
                        initialize: sqlx::Row::try_get(&row, "initialize")?,
                    })
                })
                .transpose()
            }

            async fn delete_mcp_session(&self, id: &str) -> $crate::error::Result<()> {
                self.write_statements(vec![$crate::store::access::delete_session(id)])
                    .await?;
                Ok(())
            }

            async fn add_chat_member(
                &self,
                chat: &str,
                user: &str,
                added_by: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> $crate::error::Result<bool> {
                let changed = self
                    .write_statements(vec![$crate::store::access::add_member(
                        chat,
                        user,
                        added_by,
                        at.timestamp_millis(),
                    )])
                    .await?;
                Ok(changed == [1])
            }

            async fn remove_chat_member(
                &self,
                chat: &str,
                user: &str,
            ) -> $crate::error::Result<bool> {
                let changed = self
                    .write_statements(vec![$crate::store::access::membership(chat, user, true)])
                    .await?;
                Ok(changed == [1])
            }

            async fn is_chat_member(&self, chat: &str, user: &str) -> $crate::error::Result<bool> {
                let count: i64 = $crate::store::access::membership::<$db>(chat, user, false)
                    .build_query_scalar()
                    .fetch_one(&self.pool)
                    .await?;
                Ok(count > 0)
            }
        }
    };
}
pub(crate) use access_records;
