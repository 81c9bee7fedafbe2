//! The events the memory extension publishes on the kernel's router, for extensions that keep
//! their own copies of the conversation (the consolidator, the markdown mirror).

use mnemo_kernel::TypedEvent;
use serde::{Deserialize, Serialize};

use crate::types::{MemoryKind, SessionKey};

/// Published on `memory.session_completed` when a user starts a new session in a chat (or in
/// their personal conversation): the previous one there is ready to be consolidated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionCompleted {
    /// The finished session.
    pub session: SessionKey,
}

impl TypedEvent for SessionCompleted {
    const TOPIC: &'static str = "memory.session_completed";
}

/// Published on `memory.forgotten` for each memory a forget removed for good (not for decay or
/// corrections, which only hide). It carries the forgotten text so that an extension keeping its
/// own copies of the conversation (the markdown mirror) can remove them too; a handler must not
/// log or keep that text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryForgotten {
    /// The removed memory's id.
    pub memory_id: String,
    /// What it was.
    pub kind: MemoryKind,
    /// Its text.
    pub content: String,
    /// Its owner.
    pub user_id: Option<String>,
    /// The chat it was told in.
    pub chat_id: Option<String>,
    /// The session it came from.
    pub session_id: Option<String>,
}

impl TypedEvent for MemoryForgotten {
    const TOPIC: &'static str = "memory.forgotten";
}

/// Published on `memory.user_erased` after everything stored about a user was removed, so that
/// extensions keeping their own copies remove that user's data too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserErased {
    /// The erased user.
    pub user_id: String,
    /// The sessions their memories came from.
    pub session_ids: Vec<String>,
    /// How many memories were removed.
    pub memories_removed: u64,
}

impl TypedEvent for UserErased {
    const TOPIC: &'static str = "memory.user_erased";
}
