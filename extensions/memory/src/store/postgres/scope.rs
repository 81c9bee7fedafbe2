//! The visibility rule and a search request's filters, as SQL conditions on alias `m`: the
//! SQLite store's rules (see `../sqlite/scope.rs`) in PostgreSQL's words.

use sqlx::{Postgres, QueryBuilder};

use crate::store::rows::ts;
use crate::store::TextScope;
use crate::types::SearchRequest;

/// Appends the rows of alias `f` that `scope` may see, as the SQLite store's full-text index
/// matches them (`../sqlite/scope.rs`, `scope_condition`): the owner's memories, in a chat
/// also the chat's shared ones; in a chat without an owner, the chat's. The visibility rule
/// itself is applied after, with the request's other filters.
pub(super) fn push_text_scope(
    builder: &mut QueryBuilder<'_, Postgres>,
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

/// Appends the visibility rule for alias `m`: a user sees their personal memories (no chat); in
/// a chat, also their own memories of that chat and the chat's shared memories; never another
/// user's personal memories or another chat's.
pub(super) fn push_scope(
    builder: &mut QueryBuilder<'_, Postgres>,
    user_id: Option<&str>,
    chat_id: Option<&str>,
) {
    match (user_id, chat_id) {
        (Some(user), Some(chat)) => {
            builder
                .push(" AND ((m.user_id = ")
                .push_bind(user.to_owned())
                .push(" AND (m.chat_id IS NULL OR m.chat_id = ")
                .push_bind(chat.to_owned())
                .push(")) OR (m.shared = 1 AND m.chat_id = ")
                .push_bind(chat.to_owned())
                .push("))");
        }
        (Some(user), None) => {
            builder
                .push(" AND m.user_id = ")
                .push_bind(user.to_owned())
                .push(" AND m.chat_id IS NULL");
        }
        (None, Some(chat)) => {
            builder.push(" AND m.chat_id = ").push_bind(chat.to_owned());
        }
        (None, None) => {}
    }
}

/// Appends the filters of `request` (owner, kinds, session, time, tags, deleted) for alias `m`.
pub(super) fn push_filters(builder: &mut QueryBuilder<'_, Postgres>, request: &SearchRequest) {
    if !request.include_deleted {
        builder.push(" AND m.valid_until IS NULL");
    }
    if !request.include_superseded {
        builder.push(" AND m.superseded_at IS NULL");
    }
    if request.exclude_faded {
        builder.push(" AND m.faded_at IS NULL");
    }
    if let Some(at) = request.at {
        builder
            .push(" AND (m.expires_at IS NULL OR m.expires_at > ")
            .push_bind(ts(at))
            .push(")");
    }
    push_scope(
        builder,
        request.user_id.as_deref(),
        request.chat_id.as_deref(),
    );
    if let Some(memory_type) = &request.memory_type {
        builder
            .push(
                " AND COALESCE(m.memory_type, CASE m.kind WHEN 'episode' THEN 'conversation' ELSE m.kind END) = ",
            )
            .push_bind(memory_type.as_str());
    }
    if !request.about.is_empty() {
        builder.push(
            " AND EXISTS (SELECT 1 FROM memory_entities about WHERE about.memory_id = m.id AND about.entity_id = ANY(",
        );
        builder.push_bind(request.about.clone());
        builder.push("))");
    }
    if !request.kinds.is_empty() {
        builder.push(" AND m.kind = ANY(");
        builder.push_bind(
            request
                .kinds
                .iter()
                .map(|kind| kind.as_str().to_owned())
                .collect::<Vec<String>>(),
        );
        builder.push(")");
    }
    if let Some(session) = &request.exclude_session {
        builder
            .push(" AND (m.session_id IS NULL OR m.session_id <> ")
            .push_bind(session.clone())
            .push(")");
    }
    if let Some(since) = request.since {
        builder.push(" AND m.event_time >= ").push_bind(ts(since));
    }
    if let Some(until) = request.until {
        builder.push(" AND m.event_time < ").push_bind(ts(until));
    }
    for tag in &request.tags {
        builder
            .push(" AND m.tags::jsonb @> jsonb_build_array(")
            .push_bind(tag.clone())
            .push("::text)");
    }
}
