//! Who is calling: the API key in `Authorization: Bearer KEY`, and for an admin key the user it
//! acts for, named in the `X-Mnemo-User` header. No key, no access; a user key acts for its own
//! user only, in its own chats if it is bound to some.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::keys::KeyStore;
use crate::AppState;

/// The header with which an admin key names the user it acts for.
pub const ACT_FOR_HEADER: &str = "x-mnemo-user";

/// The caller of a request, as its key allows.
#[derive(Debug, Clone)]
pub(crate) struct Principal {
    /// The key's id, for logs.
    pub(crate) key_id: String,
    /// Whether it is an admin key.
    pub(crate) admin: bool,
    /// The user it acts for: the key's own, or the one an admin key names.
    user: Option<String>,
    /// The chats it may act in; `None` for any.
    chats: Option<Vec<String>>,
}

impl Principal {
    /// The user this request acts for.
    ///
    /// # Errors
    /// 400 `user_required` for an admin key without `X-Mnemo-User`.
    pub(crate) fn user(&self) -> Result<&str, ApiError> {
        self.user.as_deref().ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "user_required",
                "an admin key acts for the user named in the `X-Mnemo-User` header; name one",
            )
        })
    }

    /// The user this request acts for, if any (an admin key may act for nobody in particular).
    pub(crate) fn user_if_any(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The chat a request may act in: `requested`, if the key allows it.
    ///
    /// # Errors
    /// 400 for an invalid chat id; 403 when the key is bound to other chats, or to chats and
    /// none was named.
    pub(crate) fn chat(&self, requested: Option<&str>) -> Result<Option<String>, ApiError> {
        if let Some(chat) = requested {
            mnemo_kernel::check_id("chat_id", chat)?;
        }
        match (&self.chats, requested) {
            (None, requested) => Ok(requested.map(str::to_owned)),
            (Some(chats), Some(chat)) if chats.iter().any(|allowed| allowed == chat) => {
                Ok(Some(chat.to_owned()))
            }
            (Some(_), Some(chat)) => Err(ApiError::forbidden(format!(
                "this key may not act in chat `{chat}`"
            ))),
            (Some(_), None) => Err(ApiError::forbidden(
                "this key is bound to chats: name one with `chat_id`",
            )),
        }
    }

    /// The chat a request may act in, as [`Principal::chat`] decides, and only if the user is a
    /// member of it: a user key that is not bound to chats names a chat only once the host or
    /// an admin key recorded the user's turn there, or an admin added the user. An admin key,
    /// and a key an admin bound to the chat, need no membership.
    ///
    /// # Errors
    /// As [`Principal::chat`]; 403 for a chat the user is not a member of; the store fails.
    pub(crate) async fn chat_as_member(
        &self,
        memory: &dyn mnemo_memory_api::MemoryHost,
        requested: Option<&str>,
    ) -> Result<Option<String>, ApiError> {
        let chat = self.chat(requested)?;
        if let Some(chat) = &chat {
            if !self.admin && self.chats.is_none() {
                let user = self.user()?;
                if !memory.is_chat_member(chat, user).await? {
                    return Err(ApiError::forbidden(format!(
                        "`{user}` is not a member of chat `{chat}`: a user becomes one when the \
                         host or an admin key records their turn there, or when an admin adds \
                         them (PUT /v1/chats/{chat}/members/{user})"
                    )));
                }
            }
        }
        Ok(chat)
    }

    /// Whether the key may read memories kept in `chat` (`None`: the user's personal memory).
    /// A key bound to chats sees there what the user's agent sees: the user's personal memory
    /// too, but no other chat.
    pub(crate) fn may_read(&self, chat: Option<&str>) -> bool {
        match (&self.chats, chat) {
            (None, _) | (Some(_), None) => true,
            (Some(chats), Some(chat)) => chats.iter().any(|allowed| allowed == chat),
        }
    }

    /// Whether the key may change memories kept in `chat`: a key bound to chats changes only
    /// what is kept in them, never the user's personal memory.
    pub(crate) fn may_change(&self, chat: Option<&str>) -> bool {
        match (&self.chats, chat) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(chats), Some(chat)) => chats.iter().any(|allowed| allowed == chat),
        }
    }

    /// # Errors
    /// 403 for a key bound to chats: what spans all of a user's memory (statistics, export,
    /// erasure) is not for it.
    pub(crate) fn require_whole_user(&self) -> Result<(), ApiError> {
        match &self.chats {
            None => Ok(()),
            Some(_) => Err(ApiError::forbidden(
                "this key is bound to chats; this spans the whole user and needs an unbound key",
            )),
        }
    }

    /// # Errors
    /// 403 unless it is an admin key.
    pub(crate) fn require_admin(&self) -> Result<(), ApiError> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::forbidden("this needs an admin key"))
        }
    }
}

/// Checks the request's key and names its caller.
pub(crate) async fn authenticate(
    keys: &KeyStore,
    headers: &HeaderMap,
) -> Result<Principal, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(ApiError::unauthorized(
            "no API key: send `Authorization: Bearer KEY` (`mnemo keys create` makes one)",
        ));
    };
    let presented = value
        .to_str()
        .ok()
        // The scheme is case-insensitive (RFC 9110 section 11.1).
        .and_then(|text| {
            let (scheme, key) = text.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(key)
        })
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::unauthorized("the `Authorization` header must read `Bearer KEY`")
        })?;
    let record = keys
        .verify(presented)
        .await?
        .ok_or_else(|| ApiError::unauthorized("the API key is not valid, or it was revoked"))?;
    let act_for = match headers.get(ACT_FOR_HEADER) {
        None => None,
        Some(value) => {
            let user = value.to_str().map_err(|_| {
                ApiError::invalid(format!("the `{ACT_FOR_HEADER}` header is not text"))
            })?;
            mnemo_kernel::check_id("X-Mnemo-User", user)?;
            Some(user.to_owned())
        }
    };
    let user = if record.admin {
        act_for
    } else {
        match act_for {
            Some(other) if Some(&other) != record.user_id.as_ref() => {
                return Err(ApiError::forbidden(format!(
                    "this key acts for its own user only, not `{other}`"
                )))
            }
            _ => record.user_id.clone(),
        }
    };
    Ok(Principal {
        key_id: record.id,
        admin: record.admin,
        user,
        chats: (!record.chats.is_empty()).then_some(record.chats),
    })
}

impl FromRequestParts<Arc<AppState>> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let principal = authenticate(&state.keys, &parts.headers).await?;
        tracing::debug!(key = %principal.key_id, admin = principal.admin, "authenticated");
        Ok(principal)
    }
}

/// Who an MCP request over HTTP acts for, as [`require_key`] resolved it from the key and the
/// headers.
#[derive(Debug, Clone)]
pub(crate) struct McpCaller {
    pub(crate) user: String,
    pub(crate) chat: Option<String>,
}

/// Middleware in front of MCP (not an axum handler): authenticates, resolves the user and the
/// chat the request acts for (`X-Mnemo-User` for an admin key, `X-Mnemo-Chat` for a chat; a key
/// bound to chats must name one), and passes them on in the request's extensions as an
/// [`McpCaller`]. A session that could never call a tool is refused at its first request, with
/// the JSON error of the API.
pub(crate) async fn require_key(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let authenticated = authenticate(&state.keys, request.headers()).await;
    let resolved = authenticated.and_then(|principal| {
        let user = principal.user()?.to_owned();
        let chat = match request.headers().get(crate::mcp::CHAT_HEADER) {
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| ApiError::invalid("the `X-Mnemo-Chat` header is not text"))?,
            ),
            None => None,
        };
        let chat = principal
            .chat(chat)
            .map_err(|error| match (&principal.chats, chat) {
                (Some(_), None) => ApiError::forbidden(
                    "this key is bound to chats: name one in the `X-Mnemo-Chat` header",
                ),
                _ => error,
            })?;
        Ok((principal, McpCaller { user, chat }))
    });
    let (principal, caller) = match resolved {
        Ok(resolved) => resolved,
        Err(error) => return error.into_response(),
    };
    if let Some(chat) = &caller.chat {
        if let Err(error) = principal
            .chat_as_member(state.memory.as_ref(), Some(chat))
            .await
        {
            return error.into_response();
        }
    }
    let key_id = principal.key_id;
    // A session is its opener's: another key is told it does not exist.
    let session = crate::mcp_sessions::session_of(request.headers());
    if let Some(session) = &session {
        if let Err(error) =
            crate::mcp_sessions::check_binding(state.memory.as_ref(), session, &key_id).await
        {
            return error.into_response();
        }
    }
    request.extensions_mut().insert(caller);
    let response = next.run(request).await;
    if session.is_none() {
        if let Err(error) =
            crate::mcp_sessions::bind(state.memory.as_ref(), response.headers(), &key_id).await
        {
            return error.into_response();
        }
    }
    response
}
