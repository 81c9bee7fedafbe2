//! `/v1/keys`: API keys made, listed and revoked by an admin key. Keys live in the memory
//! store, so a key made through one server works on every server on that store, and a key
//! revoked through one is refused by all from their next request.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::views::IdText;
use super::{ApiJson, ApiPath};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::keys::{KeyRecord, NewKey};
use crate::AppState;

/// A key as listed: never the key itself, nor its hash.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct KeyView {
    /// Names the key: `k` and 12 hex digits.
    id: String,
    /// The user it acts for; null for an admin key.
    user_id: Option<String>,
    /// Whether it is an admin key.
    admin: bool,
    /// The chats it is bound to; empty for none.
    chats: Vec<String>,
    /// A note for people.
    label: Option<String>,
    created_at: DateTime<Utc>,
    /// When it was revoked; null while it is live.
    revoked_at: Option<DateTime<Utc>>,
}

impl From<KeyRecord> for KeyView {
    fn from(record: KeyRecord) -> Self {
        Self {
            id: record.id,
            user_id: record.user_id,
            admin: record.admin,
            chats: record.chats,
            label: record.label,
            created_at: record.created_at,
            revoked_at: record.revoked_at,
        }
    }
}

/// The keys.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct KeysView {
    /// Every key ever made, revoked ones included, oldest first.
    keys: Vec<KeyView>,
}

/// A key to make: for a user (optionally bound to chats), or an admin key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewKeyBody {
    /// The user it acts for (required unless `admin`).
    user_id: Option<IdText>,
    /// An admin key: acts for any user named in `X-Mnemo-User`, and runs jobs.
    #[serde(default)]
    admin: bool,
    /// Bind it to these chats: it may act only there.
    #[serde(default)]
    chats: Vec<IdText>,
    /// A note for people: who holds it.
    label: Option<String>,
}

/// A key just made: the key itself is in this answer only.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CreatedKey {
    /// The key, to send as `Authorization: Bearer KEY`; it is stored only hashed.
    key: String,
    #[serde(flatten)]
    record: KeyView,
}

/// Make a key (admin key). The key is shown once, in this answer.
#[utoipa::path(
    post, path = "/v1/keys", tag = "admin", request_body = NewKeyBody,
    responses(
        (status = 201, description = "Made", body = CreatedKey),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiJson(body): ApiJson<NewKeyBody>,
) -> Result<(StatusCode, axum::Json<CreatedKey>), ApiError> {
    principal.require_admin()?;
    let (record, key) = state
        .keys
        .create(NewKey {
            user_id: body.user_id.map(|IdText(user)| user),
            admin: body.admin,
            chats: body.chats.into_iter().map(|IdText(chat)| chat).collect(),
            label: body.label,
        })
        .await?;
    tracing::info!(by = %principal.key_id, key = %record.id, "made an API key");
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedKey {
            key,
            record: record.into(),
        }),
    ))
}

/// Every key, revoked ones included, oldest first (admin key).
#[utoipa::path(
    get, path = "/v1/keys", tag = "admin",
    responses(
        (status = 200, description = "Keys", body = KeysView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    principal: Principal,
) -> Result<axum::Json<KeysView>, ApiError> {
    principal.require_admin()?;
    let keys = state.keys.list().await?;
    Ok(axum::Json(KeysView {
        keys: keys.into_iter().map(KeyView::from).collect(),
    }))
}

/// Revoke a key (admin key): every server on this store refuses it from its next request.
/// Revoking twice keeps the first time.
#[utoipa::path(
    delete, path = "/v1/keys/{id}", tag = "admin",
    params(("id" = IdText, Path, description = "The key's id")),
    responses(
        (status = 200, description = "Revoked", body = KeyView),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn revoke(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath(IdText(id)): ApiPath<IdText>,
) -> Result<axum::Json<KeyView>, ApiError> {
    principal.require_admin()?;
    let record = state.keys.revoke(&id).await?;
    tracing::info!(by = %principal.key_id, key = %record.id, "revoked an API key");
    Ok(axum::Json(record.into()))
}
