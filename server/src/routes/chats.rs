//! `/v1/chats/{chat_id}/members/{user_id}`: who belongs to a chat, set by an admin key. A user
//! reads what others shared in a chat only as a member; besides these, a user becomes one when
//! the host or an admin key records their turn there.

use std::sync::Arc;

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::views::IdText;
use super::ApiPath;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::AppState;

/// A user's membership of a chat, after the change.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Membership {
    chat_id: String,
    user_id: String,
    /// Whether the user is a member now.
    member: bool,
    /// Whether this request changed it.
    changed: bool,
}

/// Add a user to a chat (admin key). Adding a member again changes nothing.
#[utoipa::path(
    put, path = "/v1/chats/{chat_id}/members/{user_id}", tag = "admin",
    params(
        ("chat_id" = IdText, Path, description = "The chat"),
        ("user_id" = IdText, Path, description = "The user"),
    ),
    responses(
        (status = 200, description = "A member", body = Membership),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn add_member(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath((IdText(chat_id), IdText(user_id))): ApiPath<(IdText, IdText)>,
) -> Result<axum::Json<Membership>, ApiError> {
    principal.require_admin()?;
    let changed = state.memory.add_chat_member(&chat_id, &user_id).await?;
    tracing::info!(by = %principal.key_id, chat = %chat_id, user = %user_id, changed, "chat member added");
    Ok(axum::Json(Membership {
        chat_id,
        user_id,
        member: true,
        changed,
    }))
}

/// Remove a user from a chat (admin key): from their next request, they no longer read what
/// others share there. What they shared stays.
#[utoipa::path(
    delete, path = "/v1/chats/{chat_id}/members/{user_id}", tag = "admin",
    params(
        ("chat_id" = IdText, Path, description = "The chat"),
        ("user_id" = IdText, Path, description = "The user"),
    ),
    responses(
        (status = 200, description = "Not a member", body = Membership),
        (status = "default", description = "An error", body = ErrorBody),
    ),
)]
pub(crate) async fn remove_member(
    State(state): State<Arc<AppState>>,
    principal: Principal,
    ApiPath((IdText(chat_id), IdText(user_id))): ApiPath<(IdText, IdText)>,
) -> Result<axum::Json<Membership>, ApiError> {
    principal.require_admin()?;
    let changed = state.memory.remove_chat_member(&chat_id, &user_id).await?;
    tracing::info!(by = %principal.key_id, chat = %chat_id, user = %user_id, changed, "chat member removed");
    Ok(axum::Json(Membership {
        chat_id,
        user_id,
        member: false,
        changed,
    }))
}
