//! The visibility rule and a search request's filters, as SQL conditions on alias `m`, written
//! once for both backends. What differs is the dialect's: SQLite keeps the owner, chat and kind
//! indexes out of these conditions with a unary `+` ([`Dialect::OFF_INDEX`]), a list is bound as
//! `IN (…)` in SQLite and as one array in PostgreSQL ([`Dialect::push_one_of`]), and a tag is
//! found through each database's JSON functions ([`Dialect::push_tagged`]).

use sqlx::QueryBuilder;

use super::{Bind, Dialect};
use crate::store::rows::ts;
use crate::types::{AsOf, SearchRequest, TimeAxis};

/// Appends the visibility rule for alias `m`: a user sees their personal memories (no chat); in
/// a chat, also their own memories of that chat and the chat's shared memories; never another
/// user's personal memories or another chat's.
///
/// In SQLite the columns carry a unary `+` so that it never drives a query by the owner or chat
/// index: every caller has a far narrower starting point (an id list, full-text matches, entity
/// links), and scanning all of a user's memories instead made searches grow with the store.
pub(crate) fn push_scope<D: Dialect>(
    builder: &mut QueryBuilder<D>,
    user_id: Option<&str>,
    chat_id: Option<&str>,
) {
    let off = D::OFF_INDEX;
    match (user_id, chat_id) {
        (Some(user), Some(chat)) => {
            builder
                .push(format!(" AND (({off}m.user_id = "))
                .text(user)
                .push(format!(" AND ({off}m.chat_id IS NULL OR {off}m.chat_id = "))
                .text(chat)
                .push(format!(")) OR (m.shared = 1 AND {off}m.chat_id = "))
                .text(chat)
                .push("))");
        }
        (Some(user), None) => {
            builder
                .push(format!(" AND {off}m.user_id = "))
                .text(user)
                .push(format!(" AND {off}m.chat_id IS NULL"));
        }
        (None, Some(chat)) => {
            builder.push(format!(" AND {off}m.chat_id = ")).text(chat);
        }
        (None, None) => {}
    }
}

/// Appends the conditions of an "as of" search in place of "active, not superseded".
///
/// What the user believed at `at`: recorded by then, not superseded by then, and not retired by
/// then, where only a correction's or an expiry's retirement can be undone this way (a
/// forgotten or decayed memory stays out; expiry itself is judged at `at` below). What was
/// true at `at`, by what is known now: its time of truth holds then, superseded or not, and it
/// had not expired; a corrected memory was never true and a deleted one stays out.
fn push_as_of<D: Dialect>(builder: &mut QueryBuilder<D>, request: &SearchRequest, as_of: AsOf) {
    let at = ts(as_of.at);
    match as_of.axis {
        TimeAxis::Believed => {
            builder.push(" AND m.created_at <= ").int(at);
            if !request.include_deleted {
                builder
                    .push(
                        " AND (m.valid_until IS NULL OR ((m.superseded_by_id IS NOT NULL \
                         OR m.valid_until = m.expires_at) AND m.valid_until > ",
                    )
                    .int(at)
                    .push("))");
            }
            if !request.include_superseded {
                builder
                    .push(" AND (m.superseded_at IS NULL OR m.superseded_at > ")
                    .int(at)
                    .push(")");
            }
        }
        TimeAxis::True => {
            if !request.include_deleted {
                builder
                    .push(" AND (m.valid_until IS NULL OR (m.valid_until = m.expires_at AND m.valid_until > ")
                    .int(at)
                    .push("))");
            }
            builder
                .push(" AND COALESCE(m.valid_from, m.event_time) <= ")
                .int(at)
                .push(" AND (m.valid_to IS NULL OR m.valid_to > ")
                .int(at)
                .push(")");
        }
    }
}

/// Appends the filters of `request` (owner, kinds, session, time, tags, metadata, deleted, faded,
/// quarantined) for
/// alias `m`.
pub(crate) fn push_filters<D: Dialect>(builder: &mut QueryBuilder<D>, request: &SearchRequest) {
    match request.as_of {
        None => {
            if !request.include_deleted {
                builder.push(" AND m.valid_until IS NULL");
            }
            if !request.include_superseded {
                builder.push(" AND m.superseded_at IS NULL");
            }
        }
        Some(as_of) => push_as_of(builder, request, as_of),
    }
    if request.exclude_faded {
        builder.push(" AND m.faded_at IS NULL");
    }
    if request.exclude_quarantined {
        builder.push(" AND m.quarantine IS NULL");
    }
    if let Some(at) = request.as_of.map(|as_of| as_of.at).or(request.at) {
        builder
            .push(" AND (m.expires_at IS NULL OR m.expires_at > ")
            .int(ts(at))
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
            .text(memory_type.as_str());
    }
    if !request.about.is_empty() {
        builder.push(
            " AND EXISTS (SELECT 1 FROM memory_entities about WHERE about.memory_id = m.id AND ",
        );
        D::push_one_of(builder, "about.entity_id", &request.about);
        builder.push(")");
    }
    if !request.kinds.is_empty() {
        let kinds: Vec<String> = request
            .kinds
            .iter()
            .map(|kind| kind.as_str().to_owned())
            .collect();
        builder.push(" AND ");
        D::push_one_of(builder, &format!("{}m.kind", D::OFF_INDEX), &kinds);
    }
    if let Some(session) = &request.exclude_session {
        builder
            .push(" AND (m.session_id IS NULL OR m.session_id <> ")
            .text(session.as_str())
            .push(")");
    }
    if let Some(since) = request.since {
        builder.push(" AND m.event_time >= ").int(ts(since));
    }
    if let Some(until) = request.until {
        builder.push(" AND m.event_time < ").int(ts(until));
    }
    for tag in &request.tags {
        builder.push(" AND ");
        D::push_tagged(builder, tag);
    }
    for (key, value) in &request.metadata {
        let mut entry = serde_json::Map::new();
        entry.insert(key.clone(), value.clone());
        builder.push(" AND ");
        D::push_attribute_equals(
            builder,
            &format!("$.\"{key}\""),
            &serde_json::Value::Object(entry).to_string(),
        );
    }
}
