//! Erasure in the workspace's files: a user's whole workspace or session buffers removed, and
//! every copy of a forgotten text scrubbed from the workspace's own files.

use std::fs;
use std::path::Path;

use chrono::Utc;

use super::entries::is_history_file;
use super::{
    Workspace, AGENTS_DIR, DAILY_DIR, ERASED_PREFIX, MEMORY_FILE, MEMORY_VERSIONS_DIR,
    SESSIONS_DIR, USERS_DIR,
};
use crate::atomic::{self, is_temp_file};
use crate::erasure::{scrub_text, Needle};
use crate::error::Result;
use crate::names::session_stem;
use crate::session::{BufferedMessage, SessionKey};
use crate::writers;

/// The writer named in a directory being erased, `.erased-{stem}.{writer}.{nanos}`.
pub(super) fn erased_dir_writer(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(ERASED_PREFIX)?;
    let mut parts = rest.rsplitn(3, '.');
    parts.next()?.parse::<i64>().ok()?;
    let writer = parts.next()?;
    parts.next()?;
    Some(writer)
}

impl Workspace {
    /// Removes the user's workspace `users/{user}/` with everything in it; returns whether there
    /// was one. The directory is renamed out of the way first, so that it disappears at once; a
    /// crash during the removal leaves a `.erased-` directory that [`Workspace::open`] removes.
    ///
    /// # Errors
    /// The directory cannot be renamed or removed.
    pub fn remove_user(&self, user_id: &str) -> Result<bool> {
        self.remove_dir_of(&self.root.join(USERS_DIR), user_id)
    }

    /// Removes every session buffer and recap of the user in this workspace,
    /// `.sessions/{user}/`, as [`Workspace::remove_user`] does; returns whether there were any.
    ///
    /// # Errors
    /// The directory cannot be renamed or removed.
    pub fn remove_user_sessions(&self, user_id: &str) -> Result<bool> {
        self.remove_dir_of(&self.root.join(SESSIONS_DIR), user_id)
    }

    /// Removes `parent/{user}/`: renamed out of the way first, so that it disappears at once.
    fn remove_dir_of(&self, parent: &Path, user_id: &str) -> Result<bool> {
        let stem = session_stem(user_id);
        let root = parent.join(&stem);
        let _guard = self.lock();
        if !root.is_dir() {
            return Ok(false);
        }
        let doomed = parent.join(format!(
            "{ERASED_PREFIX}{stem}.{}.{}",
            writers::tag(),
            Utc::now().timestamp_nanos_opt().unwrap_or_default()
        ));
        fs::rename(&root, &doomed).map_err(|err| self.io("rename", &root, err))?;
        match fs::remove_dir_all(&doomed) {
            Ok(()) => Ok(true),
            // Removed meanwhile by another process's sweep: gone either way.
            Err(_) if !doomed.exists() => Ok(true),
            Err(err) => Err(self.io("remove", &doomed, err)),
        }
    }

    /// Removes every copy of a forgotten text from this workspace's own files (see
    /// [`crate::erasure`]): the session's buffered messages and recap, and the lines of
    /// `MEMORY.md`, the history files, each agent's memory and daily logs, and, in one user's
    /// workspace, the user's own world topics (`users/{user}/world/`) that copy it. The shared
    /// `world/` files are not touched. Returns the changed files, relative paths.
    ///
    /// # Errors
    /// A file cannot be read or rewritten; the files already rewritten stay so.
    pub fn scrub(&self, session: Option<&SessionKey>, needle: &Needle) -> Result<Vec<String>> {
        let _guard = self.lock();
        let mut changed = Vec::new();
        if let Some(session) = session {
            let path = self.session_path(session, "jsonl");
            let text = self.read_optional(&path)?;
            let mut kept = String::with_capacity(text.len());
            let mut removed = false;
            for line in text.lines() {
                let copy = serde_json::from_str::<BufferedMessage>(line)
                    .is_ok_and(|message| needle.matches_message(&message.text));
                if copy {
                    removed = true;
                } else {
                    kept.push_str(line);
                    kept.push('\n');
                }
            }
            if removed {
                atomic::write_atomic(&path, kept.as_bytes())
                    .map_err(|err| self.io("write", &path, err))?;
                changed.push(self.relative(&path));
            }
            let recap = self.session_path(session, "recap.md");
            self.scrub_file(&recap, needle, false, &mut changed)?;
        }
        self.scrub_file(&self.root.join(MEMORY_FILE), needle, false, &mut changed)?;
        self.scrub_versions(&self.root.join(MEMORY_VERSIONS_DIR), needle, &mut changed)?;
        for name in self.list(&self.root)? {
            if is_history_file(&name) {
                self.scrub_file(&self.root.join(name), needle, true, &mut changed)?;
            }
        }
        let agents = self.root.join(AGENTS_DIR);
        for agent in self.list(&agents)? {
            let dir = agents.join(agent);
            if !dir.is_dir() {
                continue;
            }
            self.scrub_file(&dir.join(MEMORY_FILE), needle, false, &mut changed)?;
            self.scrub_versions(&dir.join(MEMORY_VERSIONS_DIR), needle, &mut changed)?;
            let daily = dir.join(DAILY_DIR);
            for name in self.list(&daily)? {
                if name.ends_with(".md") && !is_temp_file(&name) {
                    self.scrub_file(&daily.join(name), needle, true, &mut changed)?;
                }
            }
        }
        for path in self.own_world_paths()? {
            self.scrub_file(&path, needle, false, &mut changed)?;
        }
        Ok(changed)
    }

    /// Scrubs every file of a versions directory: the earlier versions and the record of the
    /// model's lines; the caller holds the write lock.
    fn scrub_versions(&self, dir: &Path, needle: &Needle, changed: &mut Vec<String>) -> Result<()> {
        for name in self.list(dir)? {
            if name.ends_with(".md") && !is_temp_file(&name) {
                self.scrub_file(&dir.join(name), needle, false, changed)?;
            }
        }
        Ok(())
    }

    /// Rewrites one file without the lines that copy `needle`; the caller holds the write lock.
    fn scrub_file(
        &self,
        path: &Path,
        needle: &Needle,
        entries: bool,
        changed: &mut Vec<String>,
    ) -> Result<()> {
        let text = self.read_optional(path)?;
        if let Some(scrubbed) = scrub_text(&text, needle, entries) {
            atomic::write_atomic(path, scrubbed.as_bytes())
                .map_err(|err| self.io("write", path, err))?;
            changed.push(self.relative(path));
        }
        Ok(())
    }
}
