//! `[kernel]`: the kernel's own settings.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[kernel]`: the router, the agent turn and where data lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    /// Where extensions keep their files; empty means the platform's data directory + `mnemo`.
    pub data_dir: Option<PathBuf>,
    /// The first part of every system prompt; context blocks follow it.
    pub system_prompt: String,
    /// Capacity of each subscriber's event queue; a full queue makes the publisher wait.
    pub queue_capacity: usize,
    /// How long a whole shutdown may take, in milliseconds: a server's requests in flight, the
    /// event queues and the extensions share it (an orchestrator's own grace is often 30 s).
    pub shutdown_grace_ms: u64,
    /// Most LLM round trips with tool calls in one agent turn.
    pub max_tool_rounds: usize,
    /// The user `mnemo chat` and `mnemo mcp` act for when no `--user` is given.
    pub default_user: String,
}

impl Default for KernelConfig {
    fn default() -> Self {
        Self {
            data_dir: None,
            system_prompt: "You are a helpful assistant with long-term memory.".to_owned(),
            queue_capacity: 256,
            shutdown_grace_ms: 10_000,
            max_tool_rounds: 8,
            default_user: "me".to_owned(),
        }
    }
}
