//! Session buffers (consolidation): the messages of each session not consolidated yet, and the
//! recap the last window consolidation kept, under `.sessions/{user}/{chat}/`.

use std::fs;
use std::path::{Path, PathBuf};

use super::{remove_if_present, Workspace, NO_CHAT_DIR, NO_USER_DIR, SESSIONS_DIR};
use crate::atomic;
use crate::error::{MarkdownError, Result};
use crate::names::session_stem;
use crate::session::{BufferedMessage, SessionKey};

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
        self.append_locked(&path, &line)
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
            if line.trim().is_empty() {
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

    /// Replaces the session's buffer with `messages` atomically (after a consolidation).
    ///
    /// # Errors
    /// The buffer cannot be written; the old one is then intact.
    pub fn session_replace(
        &self,
        session: &SessionKey,
        messages: &[BufferedMessage],
    ) -> Result<()> {
        let path = self.session_path(session, "jsonl");
        let mut text = String::new();
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
