//! A model that replays replies queued in advance, for replay scenarios and tests.
//!
//! Only the model's words are scripted: everything the kernel and extensions do with them is real.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{ChatRequest, ChatResponse, LlmClient, LlmError, LlmToolCall};

/// One queued reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptedReply {
    /// A text answer.
    Text(String),
    /// Tool calls.
    ToolCalls(Vec<LlmToolCall>),
    /// A timeout after the configured seconds.
    Timeout,
    /// A server error with this body.
    Error(String),
}

/// Replays [`ScriptedReply`]s in order and records every request.
#[derive(Debug, Default)]
pub struct ScriptedLlm {
    replies: Mutex<VecDeque<ScriptedReply>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedLlm {
    /// A client with no replies queued.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a reply.
    pub fn push(&self, reply: ScriptedReply) {
        self.replies
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push_back(reply);
    }

    /// Replies not used yet.
    pub fn remaining(&self) -> usize {
        self.replies
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

#[async_trait]
impl LlmClient for ScriptedLlm {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.requests
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(request);
        let reply = self
            .replies
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front();
        match reply {
            None => Err(LlmError::Scripted("no scripted reply left".to_owned())),
            Some(ScriptedReply::Text(text)) => Ok(ChatResponse {
                content: Some(text),
                tool_calls: Vec::new(),
                finish_reason: Some("stop".to_owned()),
            }),
            Some(ScriptedReply::ToolCalls(calls)) => Ok(ChatResponse {
                content: None,
                tool_calls: calls
                    .into_iter()
                    .enumerate()
                    .map(|(index, mut call)| {
                        if call.id.is_empty() {
                            call.id = format!("call_{index}");
                        }
                        call
                    })
                    .collect(),
                finish_reason: Some("tool_calls".to_owned()),
            }),
            Some(ScriptedReply::Timeout) => Err(LlmError::Timeout(0)),
            Some(ScriptedReply::Error(body)) => Err(LlmError::Status { status: 500, body }),
        }
    }

    fn model(&self) -> &str {
        "scripted"
    }
}
