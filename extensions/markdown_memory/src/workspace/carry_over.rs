//! Carrying session buffers of the first layout, `.sessions/{session}.jsonl` keyed by session
//! alone, over to the layout keyed by user and chat when the workspace opens.

use std::fs;
use std::io;
use std::path::Path;

use super::{
    remove_if_present, Workspace, CARRYING_PREFIX, LAYOUT_MARK, NO_CHAT_DIR, SESSIONS_DIR,
    USERS_DIR,
};
use crate::atomic;
use crate::error::Result;
use crate::session::one_line;
use crate::writers;

impl Workspace {
    /// Carries session buffers of the first layout, `.sessions/{session}.jsonl` keyed by session
    /// alone, into the layout keyed by user and chat, once per workspace (a mark in `.sessions/`
    /// says it is done). Nothing is lost, and no buffer reaches a user it may not belong to:
    ///
    /// - in a user's workspace `users/{user}/`, the user is certain: the buffer and its recap
    ///   move to `.sessions/{user}/_personal/` (the first layout did not record chats);
    /// - in the shared workspace, the buffer may hold several users' turns and cannot be given
    ///   to any one of them: its messages are appended whole to the history as a
    ///   `[carried-over]` entry (where `search_history` finds them, as a raw fallback entry would
    ///   be), and the buffer and its recap (a summary already in the history and a copy of the
    ///   buffer's last messages) are removed.
    ///
    /// Safe beside other processes opening the same workspace: a buffer is moved or claimed by
    /// one rename, which only one of them wins. A failure is logged and retried at the next open;
    /// the old files stay until then. Once users' workspaces were looked through, a mark saves
    /// the next opens from doing it again.
    pub(super) fn carry_over_sessions(&self) {
        let mark = self.root.join(SESSIONS_DIR).join(LAYOUT_MARK);
        if mark.exists() {
            return;
        }
        let mut carried = 0;
        let mut result = self.carry_over_legacy(&self.root, None, &mut carried);
        let users = self.root.join(USERS_DIR);
        let mut looked = 0;
        for name in self.list(&users).unwrap_or_default() {
            let root = users.join(&name);
            if name.starts_with('.') || !root.is_dir() {
                continue;
            }
            looked += 1;
            result = result.and(self.carry_over_legacy(&root, Some(&name), &mut carried));
        }
        let worth_a_mark = looked > 0 || carried > 0;
        let result = result.and_then(|()| {
            if !worth_a_mark {
                return Ok(());
            }
            atomic::write_atomic(
                &mark,
                b"Session buffers are kept as {user}/{chat}/{session}.jsonl.\n",
            )
            .map_err(|err| self.io("write", &mark, err))
        });
        match result {
            Ok(()) if carried > 0 => tracing::info!(
                carried,
                workspace = %self.root.display(),
                "session buffers carried over to the layout keyed by user and chat"
            ),
            Ok(()) => {}
            Err(error) => tracing::warn!(
                %error,
                workspace = %self.root.display(),
                "could not carry every old session buffer over; they stay as they are and \
                 the next start tries again"
            ),
        }
    }

    /// Carries over the first-layout buffers in `root/.sessions/`; `user` is the user directory's
    /// name for a user's workspace, `None` for the shared one.
    fn carry_over_legacy(
        &self,
        root: &Path,
        user: Option<&str>,
        carried: &mut usize,
    ) -> Result<()> {
        let dir = root.join(SESSIONS_DIR);
        let mut first_error = Ok(());
        for name in self.list(&dir)? {
            let path = dir.join(&name);
            let done = if let Some(claim) = name.strip_prefix(CARRYING_PREFIX) {
                // A claim whose process died before it finished.
                match claim.split_once('.') {
                    Some((writer, legacy)) if writers::is_gone(writer) => {
                        self.claim_and_carry(&dir, &name, legacy)
                    }
                    _ => Ok(false),
                }
            } else if name.starts_with('.') || name.starts_with('_') || !path.is_file() {
                Ok(false)
            } else if name.ends_with(".jsonl") || name.ends_with(".recap.md") {
                match user {
                    Some(user) => self.move_legacy(&dir, &name, user),
                    None if name.ends_with(".jsonl") => self.claim_and_carry(&dir, &name, &name),
                    None => remove_if_present(&path).map_err(|err| self.io("remove", &path, err)),
                }
            } else {
                Ok(false)
            };
            match done {
                Ok(true) => *carried += 1,
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, "an old session buffer could not be carried over");
                    if first_error.is_ok() {
                        first_error = Err(error);
                    }
                }
            }
        }
        first_error
    }

    /// Moves a user's first-layout buffer or recap `dir/{name}` to `dir/{user}/_personal/{name}`.
    /// If that exists already (written since), an old buffer goes before its messages and an
    /// old recap is dropped (a recap only repeats the history and the buffer).
    fn move_legacy(&self, dir: &Path, name: &str, user: &str) -> Result<bool> {
        let from = dir.join(name);
        let to_dir = dir.join(user).join(NO_CHAT_DIR);
        fs::create_dir_all(&to_dir).map_err(|err| self.io("create", &to_dir, err))?;
        let to = to_dir.join(name);
        let _guard = self.lock();
        if !to.exists() {
            return match fs::rename(&from, &to) {
                Ok(()) => Ok(true),
                Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(err) => Err(self.io("move", &from, err)),
            };
        }
        if name.ends_with(".jsonl") {
            let mut text = self.read_optional(&from)?;
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&self.read_optional(&to)?);
            atomic::write_atomic(&to, text.as_bytes()).map_err(|err| self.io("write", &to, err))?;
        }
        remove_if_present(&from).map_err(|err| self.io("remove", &from, err))
    }

    /// Claims the file `dir/{from}`, a first-layout buffer `legacy` of the shared workspace (or
    /// a dead process's claim of it), by renaming it (only one process wins), then carries it
    /// into the history.
    fn claim_and_carry(&self, dir: &Path, from: &str, legacy: &str) -> Result<bool> {
        let from = dir.join(from);
        let claim = dir.join(format!("{CARRYING_PREFIX}{}.{legacy}", writers::tag()));
        match fs::rename(&from, &claim) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(err) => return Err(self.io("move", &from, err)),
        }
        self.carry_into_history(dir, &claim, legacy)?;
        Ok(true)
    }

    /// Appends the messages of the claimed buffer `claim` (first named `name`) to the history as
    /// one `[carried-over]` entry, then removes it and the session's old recap.
    fn carry_into_history(&self, dir: &Path, claim: &Path, name: &str) -> Result<()> {
        let stem = name.strip_suffix(".jsonl").unwrap_or(name);
        let messages = self.read_messages(claim)?;
        if let Some(last) = messages.last() {
            let mut entry = format!(
                "[carried-over] session {}: buffered before session buffers were kept apart by \
                 user and chat, so whose it was is unknown; the {} messages as written, not \
                 consolidated:\n",
                one_line(stem, 80),
                messages.len()
            );
            for message in &messages {
                entry.push_str("- ");
                entry.push_str(&message.line(usize::MAX));
                entry.push('\n');
            }
            self.append_history(last.at, &entry)?;
        }
        let recap = dir.join(format!("{stem}.recap.md"));
        remove_if_present(&recap).map_err(|err| self.io("remove", &recap, err))?;
        remove_if_present(claim).map_err(|err| self.io("remove", claim, err))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::HISTORY_FILE;

    #[test]
    fn a_dead_processs_claim_is_carried_over_and_a_live_ones_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join(SESSIONS_DIR);
        fs::create_dir_all(&sessions).unwrap();
        let tag = writers::tag();
        let Some((host, _)) = tag.split_once('-') else {
            // No `/proc`: a claim's process cannot be judged, so claims are left (tested below).
            return;
        };
        let line = "{\"role\":\"user\",\"at\":\"2026-03-01T08:00:00Z\",\"text\":\"hello\"}\n";
        let dead = sessions.join(format!("{CARRYING_PREFIX}{host}-4000000000.default.jsonl"));
        let live = sessions.join(format!("{CARRYING_PREFIX}{tag}.other.jsonl"));
        fs::write(&dead, line).unwrap();
        fs::write(&live, line).unwrap();
        Workspace::open(dir.path()).unwrap();
        let history = fs::read_to_string(dir.path().join(HISTORY_FILE)).unwrap();
        assert_eq!(history.matches("[carried-over]").count(), 1, "{history}");
        assert!(
            history.contains("[carried-over] session default: "),
            "{history}"
        );
        assert!(!dead.exists());
        assert!(live.exists(), "a live process is still carrying it");
    }
}
