//! A language model reached through MCP sampling: when mnemo runs as an MCP server and no
//! `[llm]` is configured, consolidation and reflection ask the connected client's model
//! (`sampling/createMessage`), so that no API key is ever needed.
//!
//! A request goes only to a client of the user whose memories it carries
//! ([`ChatRequest::user`]): one user's conversation never reaches another user's model. While no
//! such client is connected the model is unavailable, and the jobs leave their work for a later
//! run without counting a failure.
//!
//! rmcp marks sampling deprecated: protocol 2026-07-28 (SEP-2577) replaces server-to-client
//! requests. The clients of today's protocols offer it, and it is the one way to their model.
#![allow(deprecated)]

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use mnemo_kernel::{ChatRequest, ChatResponse, ChatRole, LlmClient, LlmError};
use rmcp::model::{CreateMessageRequestParams, SamplingMessage};
use rmcp::{Peer, RoleServer};

/// The longest a client's model may take to answer.
const SAMPLING_TIMEOUT: Duration = Duration::from_secs(120);

/// Clients that accept sampling requests, by the user they act for.
#[derive(Default)]
pub struct SamplingLlm {
    clients: Mutex<Vec<(String, Peer<RoleServer>)>>,
}

impl std::fmt::Debug for SamplingLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplingLlm").finish_non_exhaustive()
    }
}

impl SamplingLlm {
    /// No clients yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Remembers a client that just initialised, if it offers sampling, for `user`.
    pub(crate) fn register(&self, user: &str, peer: Peer<RoleServer>) {
        let samples = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.sampling.is_some());
        if !samples {
            return;
        }
        tracing::info!(user, "an MCP client that offers sampling connected");
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|(_, peer)| !peer.is_transport_closed());
        clients.push((user.to_owned(), peer));
    }

    /// The newest live client of `user`.
    fn client_of(&self, user: &str) -> Option<Peer<RoleServer>> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|(_, peer)| !peer.is_transport_closed());
        clients
            .iter()
            .rev()
            .find(|(owner, _)| owner == user)
            .map(|(_, peer)| peer.clone())
    }
}

/// The request as MCP sampling takes it: system messages and the tools' schemas in the system
/// prompt (sampling has no tools before protocol 2025-11-25), the rest as messages.
fn sampling_params(request: &ChatRequest) -> CreateMessageRequestParams {
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for message in &request.messages {
        match message.role {
            ChatRole::System => system.push(message.content.clone()),
            ChatRole::Assistant => messages.push(SamplingMessage::assistant_text(&message.content)),
            // Tool results read as the user's words: sampling has no tool role.
            ChatRole::User | ChatRole::Tool => {
                messages.push(SamplingMessage::user_text(&message.content));
            }
        }
    }
    for tool in &request.tools {
        system.push(format!(
            "Answer with one JSON object and nothing else: the arguments of `{}` ({}), which \
             follow this JSON schema:\n{}",
            tool.name, tool.description, tool.parameters
        ));
    }
    if request.json_reply && request.tools.is_empty() {
        system.push("Answer with one JSON object and nothing else.".to_owned());
    }
    let mut params = CreateMessageRequestParams::new(messages, request.max_tokens.unwrap_or(1_024));
    if !system.is_empty() {
        params.system_prompt = Some(system.join("\n\n"));
    }
    params
}

#[async_trait]
impl LlmClient for SamplingLlm {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let Some(user) = request.user.as_deref() else {
            return Err(LlmError::Unavailable(
                "the request names no user, and MCP sampling asks only a user's own client"
                    .to_owned(),
            ));
        };
        let Some(client) = self.client_of(user) else {
            return Err(LlmError::Unavailable(format!(
                "no MCP client of `{user}` that offers sampling is connected"
            )));
        };
        let asked = client.create_message(sampling_params(&request));
        let result = match tokio::time::timeout(SAMPLING_TIMEOUT, asked).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                return Err(LlmError::Transport(format!(
                    "the MCP client's sampling failed: {error}"
                )))
            }
            Err(_) => return Err(LlmError::Timeout(SAMPLING_TIMEOUT.as_secs())),
        };
        let text: String = result
            .message
            .content
            .iter()
            .filter_map(|block| block.as_text())
            .map(|text| text.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ChatResponse {
            content: Some(text),
            tool_calls: Vec::new(),
            finish_reason: result.stop_reason,
        })
    }

    fn model(&self) -> &str {
        "mcp-sampling"
    }

    fn available(&self) -> bool {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|(_, peer)| !peer.is_transport_closed());
        !clients.is_empty()
    }
}
