//! The filters of an owner's listing (`list_memories`) that read the same in both backends'
//! SQL: written once over sqlx's `QueryBuilder`, which numbers the placeholders for each, with
//! values bound through [`Bind`].

use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use crate::store::rows::ts;
use crate::store::sql::{Bind, Driver};
use crate::types::ListRequest;

/// Appends `request`'s chat, activity, time, quarantine and entity conditions (each ` AND …`) for memories
/// aliased `m`, active as of `now`.
pub(crate) fn push_listing_filters<D: Driver>(
    builder: &mut QueryBuilder<D>,
    request: &ListRequest,
    now: DateTime<Utc>,
) {
    if let Some(chat_id) = &request.chat_id {
        builder.push(" AND m.chat_id = ").text(chat_id.as_str());
    }
    if !request.include_inactive {
        builder
            .push(" AND m.valid_until IS NULL AND m.superseded_at IS NULL")
            .push(" AND (m.expires_at IS NULL OR m.expires_at > ")
            .int(ts(now))
            .push(")");
    }
    if let Some(since) = request.since {
        builder.push(" AND m.event_time >= ").int(ts(since));
    }
    if let Some(until) = request.until {
        builder.push(" AND m.event_time < ").int(ts(until));
    }
    if request.quarantined {
        builder.push(" AND m.quarantine IS NOT NULL");
    }
    if let Some(entity_id) = &request.entity_id {
        builder
            .push(
                " AND EXISTS (SELECT 1 FROM memory_entities me \
                 WHERE me.memory_id = m.id AND me.entity_id = ",
            )
            .text(entity_id.as_str())
            .push(")");
    }
}
