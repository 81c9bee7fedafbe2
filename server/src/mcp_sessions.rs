//! MCP sessions over HTTP kept in the memory store, so that no load balancer needs sticky
//! routing: rmcp asks [`StoredSessions`] for a session it does not hold in memory and restores
//! it from the client's `initialize` parameters, on whichever server the request reached. Each
//! session is bound to the API key that opened it ([`check_binding`], [`bind`]): a request with
//! another key, or a `DELETE` to end it, is answered 404 as if the session did not exist.

use std::sync::Arc;

use axum::http::HeaderMap;
use mnemo_memory_api::MemoryHost;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

use crate::error::ApiError;

/// The header that carries a session's id.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// Sessions in the memory store.
pub(crate) struct StoredSessions(pub(crate) Arc<dyn MemoryHost>);

#[async_trait::async_trait]
impl SessionStore for StoredSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(record) = self.0.mcp_session(session_id).await? else {
            return Ok(None);
        };
        let Some(initialize) = record.initialize else {
            return Ok(None);
        };
        Ok(Some(serde_json::from_str(&initialize)?))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let initialize = serde_json::to_string(state)?;
        Ok(self.0.store_mcp_session(session_id, &initialize).await?)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        Ok(self.0.delete_mcp_session(session_id).await?)
    }
}

/// The session a request names, if any.
pub(crate) fn session_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Lets a request on `session` through only when `key_id` opened it; any other key (and a
/// session the store does not know) is told the session does not exist.
///
/// # Errors
/// 404 `not_found` for a session of another key or none; the store's failure.
pub(crate) async fn check_binding(
    memory: &dyn MemoryHost,
    session: &str,
    key_id: &str,
) -> Result<(), ApiError> {
    let record = memory.mcp_session(session).await?;
    match record.and_then(|record| record.key_id) {
        Some(owner) if owner == key_id => Ok(()),
        _ => Err(ApiError::not_found(
            "Session not found: no MCP session with this id was opened by this key",
        )),
    }
}

/// Binds the session a response just opened (its `Mcp-Session-Id`) to `key_id`.
///
/// # Errors
/// The store fails: the session must not be handed out unbound.
pub(crate) async fn bind(
    memory: &dyn MemoryHost,
    response_headers: &HeaderMap,
    key_id: &str,
) -> Result<(), ApiError> {
    if let Some(session) = session_of(response_headers) {
        memory.bind_mcp_session(&session, key_id).await?;
    }
    Ok(())
}
