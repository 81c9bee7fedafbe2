//! The workspace directory: where each memory file lives, and how it is read and written.
//!
//! ```text
//! MEMORY.md                              long-term memory, rewritten by consolidation
//! MEMORY.history/MEMORY-{time}.md        its versions before each rewrite (the last `versions`)
//! MEMORY.history/model-lines.md          the lines the last consolidation wrote (crate::guard)
//! HISTORY.md, HISTORY-YYYY-MM.md         append-only history; every entry goes to both
//! world/{topic}.md                       shared facts: learn_fact's with one set of files for
//!                                        everyone, or from an agent in shared_world_writers
//! agents/{agent_id}/MEMORY.md            the agent's curated memory, rewritten by reflect
//! agents/{agent_id}/MEMORY.history/      its versions before each rewrite
//! agents/{agent_id}/daily/YYYY-MM-DD.md  the agent's append-only daily log
//! .sessions/{user}/{chat}/{session}.jsonl  messages not consolidated yet (and .recap.md)
//! ```
//!
//! With `per_user`, each user's files are the same tree under `users/{user}/`, their own world
//! topics (`users/{user}/world/{topic}.md`, written by learn_fact) included; `world/` stays shared.
//!
//! A session buffer is keyed by user, chat and session ([`SessionKey`]): `{user}` is `_anonymous`
//! for an event without a user, `{chat}` is `_personal` outside a chat (neither can be the name
//! of a real id, see [`crate::names`]). Buffers of the first layout, `.sessions/{session}.jsonl`
//! keyed by session alone, are carried over when the workspace opens (see
//! [`Workspace::open`]).
//!
//! Whole-file writes are atomic ([`crate::write_atomic`]); appends never rewrite earlier entries.
//! Every write in one workspace takes one lock, so two writers never interleave. The methods do
//! blocking file I/O: async callers run them on a blocking thread.

mod agents;
mod carry_over;
mod entries;
mod erase;
mod memory;
mod sessions;
mod versions;
mod world;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::atomic::{self, is_temp_file, temp_file_writer};
use crate::error::{MarkdownError, Result};
use crate::names::session_stem;
use crate::writers;
use erase::erased_dir_writer;

pub use entries::{format_entry, monthly_history_file, parse_entries, Entry};
pub use world::WorldWrite;

/// The long-term memory file.
pub const MEMORY_FILE: &str = "MEMORY.md";
/// Beside each `MEMORY.md`: its earlier versions, `MEMORY-{time}.md`, and the record of the
/// lines the last consolidation wrote.
pub const MEMORY_VERSIONS_DIR: &str = "MEMORY.history";
/// In [`MEMORY_VERSIONS_DIR`]: the lines the last consolidation wrote, one a line.
pub const MODEL_LINES_FILE: &str = "model-lines.md";
/// Versions of each `MEMORY.md` kept when the workspace is not told otherwise.
pub const DEFAULT_MEMORY_VERSIONS: usize = 20;
const VERSION_PREFIX: &str = "MEMORY-";
/// The time in a version's name: `2026-03-02T09-02-00.000Z` (no colons, sorts as it reads).
const VERSION_TIME: &str = "%Y-%m-%dT%H-%M-%S%.3fZ";
/// The all-time history file; monthly files are `HISTORY-YYYY-MM.md`.
pub const HISTORY_FILE: &str = "HISTORY.md";
const WORLD_DIR: &str = "world";
const AGENTS_DIR: &str = "agents";
/// Per-user workspaces (config `per_user`), each a `users/{user}/` with its own files.
const USERS_DIR: &str = "users";
const DAILY_DIR: &str = "daily";
const SESSIONS_DIR: &str = ".sessions";
/// A user directory being erased is first renamed to `users/.erased-…` (and a user's session
/// buffers in a shared workspace to `.sessions/.erased-…`).
const ERASED_PREFIX: &str = ".erased-";
/// The `{user}` of a session buffer whose event named no user.
const NO_USER_DIR: &str = "_anonymous";
/// The `{chat}` of a session buffer outside any chat.
const NO_CHAT_DIR: &str = "_personal";
/// In `.sessions/`: present once the buffers of the first layout were carried over.
const LAYOUT_MARK: &str = "_layout-2";
/// In `.sessions/`: a first-layout buffer one process is carrying over, `.carrying.{writer}.{name}`.
const CARRYING_PREFIX: &str = ".carrying.";

/// The memory files of one workspace directory. Cloning is cheap; clones share the write lock.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// `world/`, shared by every user and agent even when the rest is per user.
    world_root: PathBuf,
    /// For one user's workspace, its directory from the whole workspace's root (`users/{user}`):
    /// the paths of the user's own world topics are shown from there, so that they never read
    /// as the shared `world/`. `None` for the whole workspace.
    user_dir: Option<PathBuf>,
    writes: Arc<Mutex<()>>,
    /// Versions of each `MEMORY.md` kept before a rewrite; 0 keeps none.
    versions: usize,
}

impl Workspace {
    /// Opens (creating if needed) the workspace at `root`, and removes temporary files left by
    /// writes a crash interrupted: only those certainly abandoned (their writer is gone, or they
    /// are older than any write takes), since other processes may be writing here right now.
    ///
    /// # Errors
    /// A directory cannot be created or listed.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        let workspace = Self {
            world_root: root.join(WORLD_DIR),
            user_dir: None,
            root,
            writes: Arc::new(Mutex::new(())),
            versions: DEFAULT_MEMORY_VERSIONS,
        };
        for dir in ["", WORLD_DIR, AGENTS_DIR, SESSIONS_DIR] {
            let path = workspace.root.join(dir);
            fs::create_dir_all(&path).map_err(|source| workspace.io("create", &path, source))?;
        }
        let mut dirs = vec![
            workspace.root.clone(),
            workspace.root.join(MEMORY_VERSIONS_DIR),
            workspace.root.join(WORLD_DIR),
            workspace.root.join(SESSIONS_DIR),
        ];
        for agent in workspace.list(&workspace.root.join(AGENTS_DIR))? {
            let dir = workspace.root.join(AGENTS_DIR).join(agent);
            dirs.push(dir.join(MEMORY_VERSIONS_DIR));
            dirs.push(dir);
        }
        let mut swept = 0;
        for dir in dirs {
            for name in workspace.list(&dir)? {
                let path = dir.join(&name);
                if is_temp_file(&name)
                    && writers::is_abandoned(&path, temp_file_writer(&name))
                    && fs::remove_file(&path).is_ok()
                {
                    swept += 1;
                }
            }
        }
        // A user erasure interrupted between its rename and its removal.
        for parent in [USERS_DIR, SESSIONS_DIR] {
            let parent = workspace.root.join(parent);
            for name in workspace.list(&parent)? {
                let path = parent.join(&name);
                if let Some(writer) = erased_dir_writer(&name) {
                    if writers::is_abandoned(&path, Some(writer))
                        && fs::remove_dir_all(&path).is_ok()
                    {
                        swept += 1;
                    }
                }
            }
        }
        if swept > 0 {
            tracing::info!(
                swept,
                workspace = %workspace.root.display(),
                "removed temporary files of interrupted writes and erasures"
            );
        }
        workspace.carry_over_sessions();
        Ok(workspace)
    }

    /// The workspace of one user: their own MEMORY.md, history, agent memory, daily logs, world
    /// topics and session buffers under `users/{user}/`, reading this workspace's shared `world/`
    /// and sharing its write lock, so that no user's memory files reach another user's prompt or
    /// tools. Its directories are created by the first write: reading a user who has nothing
    /// creates nothing.
    pub fn for_user(&self, user_id: &str) -> Self {
        let user_dir = Path::new(USERS_DIR).join(session_stem(user_id));
        Self {
            root: self.root.join(&user_dir),
            world_root: self.world_root.clone(),
            user_dir: Some(user_dir),
            writes: self.writes.clone(),
            versions: self.versions,
        }
    }

    /// This workspace keeping `versions` earlier versions of each `MEMORY.md` (config
    /// `memory_versions`; the default is [`DEFAULT_MEMORY_VERSIONS`], 0 keeps none).
    #[must_use]
    pub fn with_versions(mut self, versions: usize) -> Self {
        self.versions = versions;
        self
    }

    /// The workspace of one user if they have one, without creating it.
    pub fn existing_user(&self, user_id: &str) -> Option<Self> {
        let user = self.for_user(user_id);
        user.root.is_dir().then_some(user)
    }

    /// The workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn relative(&self, path: &Path) -> String {
        if let Ok(in_world) = path.strip_prefix(&self.world_root) {
            return Path::new(WORLD_DIR).join(in_world).display().to_string();
        }
        if let Some(user_dir) = &self.user_dir {
            if let Ok(in_own_world) = path.strip_prefix(self.root.join(WORLD_DIR)) {
                return user_dir
                    .join(WORLD_DIR)
                    .join(in_own_world)
                    .display()
                    .to_string();
            }
        }
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    fn io(&self, action: &'static str, path: &Path, source: io::Error) -> MarkdownError {
        MarkdownError::Io {
            action,
            path: self.relative(path),
            source,
        }
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.writes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// File names in `dir`, sorted; empty if the directory does not exist.
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(self.io("list", dir, err)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|err| self.io("list", dir, err))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    /// The file's text; empty if it does not exist. A file edited by hand into bytes that are
    /// not UTF-8 is read with those bytes replaced by U+FFFD, and a warning.
    fn read_optional(&self, path: &Path) -> Result<String> {
        match fs::read(path) {
            Ok(bytes) => Ok(String::from_utf8(bytes).unwrap_or_else(|error| {
                tracing::warn!(
                    file = %self.relative(path),
                    offset = error.utf8_error().valid_up_to(),
                    "the file is not UTF-8 text; its invalid bytes are read as U+FFFD"
                );
                String::from_utf8_lossy(error.as_bytes()).into_owned()
            })),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(String::new()),
            Err(err) => Err(self.io("read", path, err)),
        }
    }

    fn write_whole(&self, path: &Path, content: &str) -> Result<()> {
        let _guard = self.lock();
        self.write_whole_locked(path, content)
    }

    /// [`Workspace::write_whole`] for a caller that holds the write lock.
    fn write_whole_locked(&self, path: &Path, content: &str) -> Result<()> {
        let mut text = content.trim_end().to_owned();
        text.push('\n');
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|err| self.io("create", parent, err))?;
        }
        atomic::write_atomic(path, text.as_bytes()).map_err(|err| self.io("write", path, err))
    }

    fn append_locked(&self, path: &Path, text: &str) -> Result<()> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|err| self.io("create", parent, err))?;
        }
        atomic::append(path, text.as_bytes()).map_err(|err| self.io("append to", path, err))
    }
}

/// Removes a file; returns whether it was there.
fn remove_if_present(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}
