//! Session buffers (consolidation): the messages of each session not consolidated yet, and the
//! recap the last window consolidation kept, under `.sessions/{user}/{chat}/`.
//!
//! A buffer's first line is its metadata (seed 002): `{"_type":"metadata","created_at":…}`, the
//! time of the session's first message. Rewriting the buffer after a window consolidation keeps
//! it, so trimming never changes when the session began.

use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{remove_if_present, Workspace, NO_CHAT_DIR, NO_USER_DIR, SESSIONS_DIR};
use crate::atomic;
use crate::error::{MarkdownError, Result};
use crate::names::session_stem;
use crate::session::{BufferedMessage, SessionKey};

/// The first line of a session buffer.
#[derive(Debug, Serialize, Deserialize)]
struct SessionMetadata {
    /// Always `metadata`, which no message line has.
    #[serde(rename = "_type")]
    kind: String,
    /// When the session's first message was said.
    created_at: DateTime<Utc>,
}

/// The metadata line of a session that began at `created_at`, with its newline.
fn metadata_line(created_at: DateTime<Utc>) -> Result<String> {
    let metadata = SessionMetadata {
        kind: "metadata".to_owned(),
        created_at,
    };
    let mut line = serde_json::to_string(&metadata).map_err(|err| {
        MarkdownError::InvalidContent(format!("cannot encode a session's metadata: {err}"))
    })?;
    line.push('\n');
    Ok(line)
}

/// `line` read as a buffer's metadata line, if it is one.
fn metadata_of(line: &str) -> Option<SessionMetadata> {
    serde_json::from_str::<SessionMetadata>(line)
        .ok()
        .filter(|metadata| metadata.kind == "metadata")
}

impl Workspace {
    /// `.sessions/{user}/{chat}/{session}.{extension}`.
    pub(super) fn session_path(&self, session: &SessionKey, extension: &str) -> PathBuf {
        let user = session
            .user_id
            .as_deref()
            .map_or_else(|| NO_USER_DIR.to_owned(), session_stem);
        let chat = session
            .chat_id
            .as_deref()
            .map_or_else(|| NO_CHAT_DIR.to_owned(), session_stem);
        self.root
            .join(SESSIONS_DIR)
            .join(user)
            .join(chat)
            .join(format!("{}.{extension}", session_stem(&session.session_id)))
    }

    /// Appends one message to the session's buffer.
    ///
    /// # Errors
    /// The buffer cannot be appended to.
    pub fn session_append(&self, session: &SessionKey, message: &BufferedMessage) -> Result<()> {
        let path = self.session_path(session, "jsonl");
        let mut line = serde_json::to_string(message).map_err(|err| {
            MarkdownError::InvalidContent(format!("cannot encode a session message: {err}"))
        })?;
        line.push('\n');
        let _guard = self.lock();
        if !path.exists() {
            line.insert_str(0, &metadata_line(message.at)?);
        }
        self.append_locked(&path, &line)
    }

    /// When the session began: its buffer's `created_at`, or for a buffer written before buffers
    /// had one, its first message's time; `None` without a buffer.
    ///
    /// # Errors
    /// The buffer exists but cannot be read.
    pub fn session_created_at(&self, session: &SessionKey) -> Result<Option<DateTime<Utc>>> {
        let path = self.session_path(session, "jsonl");
        let text = self.read_optional(&path)?;
        if let Some(metadata) = text.lines().next().and_then(metadata_of) {
            return Ok(Some(metadata.created_at));
        }
        Ok(self.read_messages(&path)?.first().map(|message| message.at))
    }

    /// The session's buffered messages, oldest first. A line that cannot be read (the tail of a
    /// write cut by a crash) is skipped with a warning.
    ///
    /// # Errors
    /// The buffer exists but cannot be read.
    pub fn session_messages(&self, session: &SessionKey) -> Result<Vec<BufferedMessage>> {
        self.read_messages(&self.session_path(session, "jsonl"))
    }

    pub(super) fn read_messages(&self, path: &Path) -> Result<Vec<BufferedMessage>> {
        let text = self.read_optional(path)?;
        let mut messages = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() || (index == 0 && metadata_of(line).is_some()) {
                continue;
            }
            match serde_json::from_str::<BufferedMessage>(line) {
                Ok(message) => messages.push(message),
                Err(error) => tracing::warn!(
                    file = %self.relative(path), line = index + 1, %error,
                    "skipping an unreadable session buffer line"
                ),
            }
        }
        Ok(messages)
    }

    /// Replaces the session's buffer with `messages` atomically (after a consolidation), keeping
    /// when the session began.
    ///
    /// # Errors
    /// The buffer cannot be written; the old one is then intact.
    pub fn session_replace(
        &self,
        session: &SessionKey,
        messages: &[BufferedMessage],
    ) -> Result<()> {
        let path = self.session_path(session, "jsonl");
        let created_at = self
            .session_created_at(session)?
            .or_else(|| messages.first().map(|message| message.at));
        let mut text = match created_at {
            Some(created_at) => metadata_line(created_at)?,
            None => String::new(),
        };
        for message in messages {
            let line = serde_json::to_string(message).map_err(|err| {
                MarkdownError::InvalidContent(format!("cannot encode a session message: {err}"))
            })?;
            text.push_str(&line);
            text.push('\n');
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|err| self.io("create", parent, err))?;
        }
        let _guard = self.lock();
        atomic::write_atomic(&path, text.as_bytes()).map_err(|err| self.io("write", &path, err))
    }

    /// The recap kept for the session by the last window consolidation, if any.
    ///
    /// # Errors
    /// The recap exists but cannot be read.
    pub fn session_recap(&self, session: &SessionKey) -> Result<Option<String>> {
        let text = self.read_optional(&self.session_path(session, "recap.md"))?;
        Ok(Some(text).filter(|text| !text.trim().is_empty()))
    }

    /// Replaces the session's recap atomically.
    ///
    /// # Errors
    /// The recap cannot be written.
    pub fn write_session_recap(&self, session: &SessionKey, recap: &str) -> Result<()> {
        self.write_whole(&self.session_path(session, "recap.md"), recap)
    }

    /// Forgets the session: removes its buffer and its recap (after `/new` consolidated it).
    ///
    /// # Errors
    /// A file exists but cannot be removed.
    pub fn session_reset(&self, session: &SessionKey) -> Result<()> {
        let _guard = self.lock();
        for extension in ["jsonl", "recap.md"] {
            let path = self.session_path(session, extension);
            remove_if_present(&path).map_err(|err| self.io("remove", &path, err))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Role;

    fn said(at: &str, text: &str) -> BufferedMessage {
        BufferedMessage {
            role: Role::User,
            at: at.parse().unwrap(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_buffer_keeps_when_its_session_began_through_every_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let key = SessionKey::new(Some("ana"), None, "s1");
        assert_eq!(workspace.session_created_at(&key).unwrap(), None);
        workspace
            .session_append(&key, &said("2026-04-01T10:00:00Z", "first"))
            .unwrap();
        workspace
            .session_append(&key, &said("2026-04-01T10:05:00Z", "second"))
            .unwrap();
        let began = "2026-04-01T10:00:00Z".parse().ok();
        assert_eq!(workspace.session_created_at(&key).unwrap(), began);
        // The metadata line is not a message.
        assert_eq!(workspace.session_messages(&key).unwrap().len(), 2);
        // A window consolidation keeps the last message only; the start stays.
        workspace
            .session_replace(&key, &[said("2026-04-01T10:05:00Z", "second")])
            .unwrap();
        assert_eq!(workspace.session_created_at(&key).unwrap(), began);
        assert_eq!(workspace.session_messages(&key).unwrap().len(), 1);

        // A buffer written before buffers had metadata began at its first message, and keeps
        // that start from its first rewrite on.
        let old = SessionKey::new(Some("ana"), None, "s0");
        let path = workspace.session_path(&old, "jsonl");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(
            &path,
            "{\"role\":\"user\",\"at\":\"2026-03-01T08:00:00Z\",\"text\":\"hello\"}\n",
        )
        .unwrap();
        let old_start = "2026-03-01T08:00:00Z".parse().ok();
        assert_eq!(workspace.session_created_at(&old).unwrap(), old_start);
        workspace.session_replace(&old, &[]).unwrap();
        assert_eq!(workspace.session_created_at(&old).unwrap(), old_start);
        assert!(workspace.session_messages(&old).unwrap().is_empty());
    }
}
