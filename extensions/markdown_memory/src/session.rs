//! A session's messages not consolidated yet, kept in an append-only JSONL buffer file.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Whose conversation a session buffer holds. A session id alone names no conversation: hosts
/// often call every session `default` or `1`, so two users, or one user in two chats, reuse it.
/// Every buffer, recap and consolidation is keyed by all three.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The user, if the event named one.
    pub user_id: Option<String>,
    /// The chat, if the session is in one; `None` for a personal session.
    pub chat_id: Option<String>,
    /// The session id as the host gave it.
    pub session_id: String,
}

impl SessionKey {
    /// The key of `session_id` of `user_id` in `chat_id`.
    pub fn new(user_id: Option<&str>, chat_id: Option<&str>, session_id: &str) -> Self {
        Self {
            user_id: user_id.map(str::to_owned),
            chat_id: chat_id.map(str::to_owned),
            session_id: session_id.to_owned(),
        }
    }
}

impl fmt::Display for SessionKey {
    /// `session s1 of user ana in chat family`, ids shortened to one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "session {}", one_line(&self.session_id, 80))?;
        if let Some(user) = &self.user_id {
            write!(f, " of user {}", one_line(user, 80))?;
        }
        if let Some(chat) = &self.chat_id {
            write!(f, " in chat {}", one_line(chat, 80))?;
        }
        Ok(())
    }
}

/// Who wrote a buffered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user (`user_message`).
    User,
    /// The agent (`agent_response`).
    Assistant,
}

impl Role {
    /// `user` or `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a session, as kept in `.sessions/{user}/{chat}/{session}.jsonl` until it is
/// consolidated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferedMessage {
    /// Who wrote it.
    pub role: Role,
    /// When it was said (the event's time).
    pub at: DateTime<Utc>,
    /// What was said.
    pub text: String,
}

/// `text` on one line, cut to `limit` characters with an ellipsis.
pub(crate) fn one_line(text: &str, limit: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

impl BufferedMessage {
    /// `[2026-03-02 09:00] user: text`, the text on one line and cut to `limit` characters.
    pub(crate) fn line(&self, limit: usize) -> String {
        format!(
            "[{}] {}: {}",
            self.at.format("%Y-%m-%d %H:%M"),
            self.role.as_str(),
            one_line(&self.text, limit)
        )
    }
}

/// Longest message text shown in a recap, in characters.
const RECAP_MESSAGE_CHARS: usize = 500;

/// The recap shown in the next turns' context after the window trigger consolidated the older part
/// of a session: the consolidated part's summary, if the model wrote one, then the kept messages.
pub(crate) fn recap(summary: Option<&str>, kept: &[BufferedMessage]) -> String {
    let mut text = String::new();
    if let Some(summary) = summary.map(str::trim).filter(|s| !s.is_empty()) {
        text.push_str("Summary of the earlier messages:\n");
        text.push_str(summary);
        text.push_str("\n\n");
    }
    if !kept.is_empty() {
        text.push_str("Latest messages:\n");
        for message in kept {
            text.push_str(&message.line(RECAP_MESSAGE_CHARS));
            text.push('\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_flat_and_cut() {
        let message = BufferedMessage {
            role: Role::User,
            at: "2026-03-02T09:05:00Z".parse().unwrap(),
            text: "a\nb   c ".to_owned() + &"é".repeat(300),
        };
        let line = message.line(10);
        assert_eq!(line, "[2026-03-02 09:05] user: a b c éééé…");
    }
}
