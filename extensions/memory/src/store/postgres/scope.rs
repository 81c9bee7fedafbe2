//! The rows a full-text search may read, as the SQLite store's index keeps them
//! (`../sqlite/scope.rs`). The visibility rule and a request's filters are written once, in
//! `store/sql/scope.rs`.

use sqlx::{Postgres, QueryBuilder};

use crate::store::TextScope;

/// Appends the rows of alias `f` that `scope` may see, as the SQLite store's full-text index
/// matches them (`../sqlite/scope.rs`, `scope_condition`): the owner's memories, in a chat
/// also the chat's shared ones; in a chat without an owner, the chat's. The visibility rule
/// itself is applied after, with the request's other filters.
pub(super) fn push_text_scope(
    builder: &mut QueryBuilder<Postgres>,
    alias: &str,
    scope: TextScope<'_>,
) {
    match (scope.user_id, scope.chat_id) {
        (Some(user), Some(chat)) => {
            builder
                .push(format!(" AND ({alias}.user_id = "))
                .push_bind(user.to_owned())
                .push(format!(" OR ({alias}.shared = 1 AND {alias}.chat_id = "))
                .push_bind(chat.to_owned())
                .push("))");
        }
        (Some(user), None) => {
            builder
                .push(format!(" AND {alias}.user_id = "))
                .push_bind(user.to_owned());
        }
        (None, Some(chat)) => {
            builder
                .push(format!(" AND {alias}.chat_id = "))
                .push_bind(chat.to_owned());
        }
        (None, None) => {}
    }
}
