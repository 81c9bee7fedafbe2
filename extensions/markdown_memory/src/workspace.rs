//! The workspace directory: where each memory file lives, and how it is read and written.
//!
//! ```text
//! MEMORY.md                              long-term memory, rewritten by consolidation
//! MEMORY.history/MEMORY-{time}.md        its versions before each rewrite (the last `versions`)
//! MEMORY.history/model-lines.md          the lines the last consolidation wrote (crate::guard)
//! HISTORY.md, HISTORY-YYYY-MM.md         append-only history; every entry goes to both
//! world/{topic}.md                       shared facts, rewritten by learn_fact
//! agents/{agent_id}/MEMORY.md            the agent's curated memory, rewritten by reflect
//! agents/{agent_id}/MEMORY.history/      its versions before each rewrite
//! agents/{agent_id}/daily/YYYY-MM-DD.md  the agent's append-only daily log
//! .sessions/{user}/{chat}/{session}.jsonl  messages not consolidated yet (and .recap.md)
//! ```
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

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

use crate::atomic::{self, is_temp_file, temp_file_writer};
use crate::erasure::{scrub_text, Needle};
use crate::error::{MarkdownError, Result};
use crate::names::{check_agent_id, sanitize_topic, session_stem};
use crate::session::{one_line, BufferedMessage, SessionKey};
use crate::writers;

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

/// The writer named in a directory being erased, `.erased-{stem}.{writer}.{nanos}`.
fn erased_dir_writer(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(ERASED_PREFIX)?;
    let mut parts = rest.rsplitn(3, '.');
    parts.next()?.parse::<i64>().ok()?;
    let writer = parts.next()?;
    parts.next()?;
    Some(writer)
}

/// One timestamped entry of a history file or a daily log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file it was read from, relative to the workspace (`HISTORY-2026-03.md`).
    pub source: String,
    /// The time in its `## ` header; `None` for text before the first header.
    pub at: Option<DateTime<Utc>>,
    /// The entry's text, without the header.
    pub text: String,
}

/// What [`Workspace::write_world`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldWrite {
    /// The sanitised topic.
    pub topic: String,
    /// The file written, relative to the workspace.
    pub path: String,
    /// Whether an earlier version was replaced.
    pub replaced: bool,
}

/// The time in a `## 2026-03-02T09:00:00.000Z` header line, if `line` is one.
fn header_time(line: &str) -> Option<DateTime<Utc>> {
    let stamp = line.strip_prefix("## ")?.trim();
    DateTime::parse_from_rfc3339(stamp)
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

/// An entry as appended: an ISO timestamp header, a blank line, the text, a blank line.
///
/// A line of the text that would read as a header is indented by one space, so an entry can never
/// forge another.
pub fn format_entry(at: DateTime<Utc>, text: &str) -> String {
    let mut out = format!("## {}\n\n", at.to_rfc3339_opts(SecondsFormat::Millis, true));
    for line in text.trim().lines() {
        if header_time(line).is_some() {
            out.push(' ');
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Splits a history file or daily log into its entries; `source` names the file in each entry.
///
/// An entry starts at a line `## <RFC 3339 time>` and runs to the next one. Non-blank text before
/// the first header (a title, a hand-written note) is an entry without a time.
pub fn parse_entries(source: &str, text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut at = None;
    let mut lines: Vec<&str> = Vec::new();
    let mut flush = |at: Option<DateTime<Utc>>, lines: &mut Vec<&str>| {
        let body = lines.join("\n");
        let body = body.trim();
        if !body.is_empty() {
            entries.push(Entry {
                source: source.to_owned(),
                at,
                text: body.to_owned(),
            });
        }
        lines.clear();
    };
    for line in text.lines() {
        if let Some(time) = header_time(line) {
            flush(at, &mut lines);
            at = Some(time);
        } else {
            lines.push(line);
        }
    }
    flush(at, &mut lines);
    entries
}

/// The monthly history file for `at`: `HISTORY-2026-03.md`.
pub fn monthly_history_file(at: DateTime<Utc>) -> String {
    format!("HISTORY-{}.md", at.format("%Y-%m"))
}

/// The sort key of a version file name, `MEMORY-{time}.md` or `MEMORY-{time}-{n}.md` (the `n`th
/// version written at the same time); `None` for any other name, which pruning leaves alone.
fn version_key(name: &str) -> Option<(String, u64)> {
    let rest = name.strip_prefix(VERSION_PREFIX)?.strip_suffix(".md")?;
    let stamp_len = "2026-03-02T09-02-00.000Z".len();
    let stamp = rest.get(..stamp_len)?;
    chrono::NaiveDateTime::parse_from_str(stamp, VERSION_TIME).ok()?;
    let number = match &rest[stamp_len..] {
        "" => 1,
        more => more.strip_prefix('-')?.parse().ok().filter(|n| *n >= 2)?,
    };
    Some((stamp.to_owned(), number))
}

/// The versions directory of the memory file `file`.
fn versions_dir(file: &Path) -> PathBuf {
    file.with_file_name(MEMORY_VERSIONS_DIR)
}

fn is_history_file(name: &str) -> bool {
    if name == HISTORY_FILE {
        return true;
    }
    name.strip_prefix("HISTORY-")
        .and_then(|rest| rest.strip_suffix(".md"))
        .is_some_and(|month| NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").is_ok())
}

/// The memory files of one workspace directory. Cloning is cheap; clones share the write lock.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// `world/`, shared by every user and agent even when the rest is per user.
    world_root: PathBuf,
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
    fn carry_over_sessions(&self) {
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

    /// The workspace of one user: their own MEMORY.md, history, agent memory, daily logs and
    /// session buffers under `users/{user}/`, sharing this workspace's `world/` and write lock,
    /// so that no user's memory files reach another user's prompt or tools. Its directories are
    /// created by the first write: reading a user who has nothing creates nothing.
    pub fn for_user(&self, user_id: &str) -> Self {
        Self {
            root: self.root.join(USERS_DIR).join(session_stem(user_id)),
            world_root: self.world_root.clone(),
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
    /// `MEMORY.md`, the history files, and each agent's memory and daily logs that copy it.
    /// World files are shared and are not touched. Returns the changed files, relative paths.
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

    /// The workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn relative(&self, path: &Path) -> String {
        if let Ok(in_world) = path.strip_prefix(&self.world_root) {
            return Path::new(WORLD_DIR).join(in_world).display().to_string();
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

    /// Copies the memory file `file`, if it has any text, to its versions directory as
    /// `MEMORY-{at}.md`, then removes the oldest versions beyond the configured number. The
    /// caller holds the write lock. Returns the version written, relative to the workspace.
    fn keep_version_locked(&self, file: &Path, at: DateTime<Utc>) -> Result<Option<String>> {
        if self.versions == 0 {
            return Ok(None);
        }
        let current = self.read_optional(file)?;
        if current.trim().is_empty() {
            return Ok(None);
        }
        let dir = versions_dir(file);
        fs::create_dir_all(&dir).map_err(|err| self.io("create", &dir, err))?;
        let stamp = at.format(VERSION_TIME).to_string();
        let mut path = dir.join(format!("{VERSION_PREFIX}{stamp}.md"));
        let mut number = 2_u64;
        while path.exists() {
            path = dir.join(format!("{VERSION_PREFIX}{stamp}-{number}.md"));
            number += 1;
        }
        atomic::write_atomic(&path, current.as_bytes())
            .map_err(|err| self.io("write", &path, err))?;
        self.prune_versions(&dir);
        Ok(Some(self.relative(&path)))
    }

    /// Removes the oldest versions in `dir` beyond the configured number. A version that cannot
    /// be removed is left with a warning: an extra old copy harms nothing.
    fn prune_versions(&self, dir: &Path) {
        let mut versions: Vec<((String, u64), String)> = match self.list(dir) {
            Ok(names) => names
                .into_iter()
                .filter_map(|name| Some((version_key(&name)?, name)))
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "cannot list the memory versions to prune them");
                return;
            }
        };
        versions.sort();
        let excess = versions.len().saturating_sub(self.versions);
        for (_, name) in versions.into_iter().take(excess) {
            let path = dir.join(&name);
            if let Err(error) = fs::remove_file(&path) {
                tracing::warn!(file = %self.relative(&path), %error, "cannot remove an old memory version");
            }
        }
    }

    /// The versions kept of a memory file, oldest first, relative to the workspace.
    fn versions_of(&self, file: &Path) -> Result<Vec<String>> {
        let dir = versions_dir(file);
        let mut versions: Vec<((String, u64), String)> = self
            .list(&dir)?
            .into_iter()
            .filter_map(|name| Some((version_key(&name)?, name)))
            .collect();
        versions.sort();
        Ok(versions
            .into_iter()
            .map(|(_, name)| self.relative(&dir.join(name)))
            .collect())
    }

    fn append_locked(&self, path: &Path, text: &str) -> Result<()> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|err| self.io("create", parent, err))?;
        }
        atomic::append(path, text.as_bytes()).map_err(|err| self.io("append to", path, err))
    }

    // Long-term memory and history (seed 002).

    /// `MEMORY.md`; empty if there is none yet.
    ///
    /// # Errors
    /// The file exists but cannot be read.
    pub fn read_memory(&self) -> Result<String> {
        self.read_optional(&self.root.join(MEMORY_FILE))
    }

    /// Replaces `MEMORY.md` atomically, first keeping its current text as the version of `at`
    /// in `MEMORY.history/` (see [`Workspace::with_versions`]).
    ///
    /// # Errors
    /// A file cannot be written; the old `MEMORY.md` is then intact.
    pub fn write_memory(&self, at: DateTime<Utc>, content: &str) -> Result<()> {
        let path = self.root.join(MEMORY_FILE);
        let _guard = self.lock();
        self.keep_version_locked(&path, at)?;
        self.write_whole_locked(&path, content)
    }

    /// As [`Workspace::write_memory`], for a consolidation: also records `model_lines`, the lines
    /// the model wrote, in `MEMORY.history/model-lines.md` (the next consolidation takes every
    /// other line as written by hand). The record is written last: if it is not, the lines it
    /// misses count as the user's, which keeps them.
    ///
    /// # Errors
    /// A file cannot be written; the old `MEMORY.md` is intact if it was not written.
    pub fn write_consolidated_memory(
        &self,
        at: DateTime<Utc>,
        content: &str,
        model_lines: &str,
    ) -> Result<()> {
        let path = self.root.join(MEMORY_FILE);
        let record = self.root.join(MEMORY_VERSIONS_DIR).join(MODEL_LINES_FILE);
        let _guard = self.lock();
        self.keep_version_locked(&path, at)?;
        self.write_whole_locked(&path, content)?;
        self.write_whole_locked(&record, model_lines)
    }

    /// The lines the last consolidation wrote into `MEMORY.md`; `None` if none recorded them.
    ///
    /// # Errors
    /// The record exists but cannot be read.
    pub fn memory_model_lines(&self) -> Result<Option<String>> {
        let path = self.root.join(MEMORY_VERSIONS_DIR).join(MODEL_LINES_FILE);
        let text = self.read_optional(&path)?;
        Ok(path.exists().then_some(text))
    }

    /// The earlier versions of `MEMORY.md` kept, oldest first, as paths relative to the workspace.
    ///
    /// # Errors
    /// The versions directory cannot be listed.
    pub fn memory_versions(&self) -> Result<Vec<String>> {
        self.versions_of(&self.root.join(MEMORY_FILE))
    }

    /// Appends a timestamped entry to `HISTORY.md` and to the month's `HISTORY-YYYY-MM.md`.
    ///
    /// # Errors
    /// A file cannot be appended to.
    pub fn append_history(&self, at: DateTime<Utc>, text: &str) -> Result<()> {
        let entry = format_entry(at, text);
        let _guard = self.lock();
        self.append_locked(&self.root.join(HISTORY_FILE), &entry)?;
        self.append_locked(&self.root.join(monthly_history_file(at)), &entry)
    }

    /// Every history entry, oldest file first; an entry found in both `HISTORY.md` and a monthly
    /// file is listed once, from the monthly file.
    ///
    /// # Errors
    /// A history file cannot be read.
    pub fn history_entries(&self) -> Result<Vec<Entry>> {
        let mut names: Vec<String> = self
            .list(&self.root)?
            .into_iter()
            .filter(|name| is_history_file(name))
            .collect();
        // Monthly files first, so that duplicates keep their monthly source.
        names.sort_by_key(|name| (name == HISTORY_FILE, name.clone()));
        let mut seen = HashSet::new();
        let mut entries = Vec::new();
        for name in names {
            let text = self.read_optional(&self.root.join(&name))?;
            for entry in parse_entries(&name, &text) {
                if seen.insert((entry.at, entry.text.clone())) {
                    entries.push(entry);
                }
            }
        }
        Ok(entries)
    }

    // World knowledge (seed 004).

    fn world_path(&self, topic: &str) -> Result<(String, PathBuf)> {
        let topic = sanitize_topic(topic)?;
        let path = self.world_root.join(format!("{topic}.md"));
        Ok((topic, path))
    }

    /// Replaces `world/{topic}.md` atomically; the topic is sanitised first.
    ///
    /// # Errors
    /// [`MarkdownError::InvalidName`] for a topic that could leave the workspace; the file cannot
    /// be written.
    pub fn write_world(&self, topic: &str, content: &str) -> Result<WorldWrite> {
        let (topic, path) = self.world_path(topic)?;
        let replaced = path.exists();
        self.write_whole(&path, content)?;
        Ok(WorldWrite {
            topic,
            path: self.relative(&path),
            replaced,
        })
    }

    /// `world/{topic}.md`, if it exists.
    ///
    /// # Errors
    /// As [`Workspace::write_world`] for the name; the file cannot be read.
    pub fn read_world(&self, topic: &str) -> Result<Option<String>> {
        let (_, path) = self.world_path(topic)?;
        let text = self.read_optional(&path)?;
        Ok((path.exists()).then_some(text))
    }

    /// Every world topic as (topic, relative path, text), by topic name.
    ///
    /// # Errors
    /// The directory or a file cannot be read.
    pub fn world_files(&self) -> Result<Vec<(String, String, String)>> {
        let dir = self.world_root.clone();
        let mut files = Vec::new();
        for name in self.list(&dir)? {
            let Some(topic) = name.strip_suffix(".md") else {
                continue;
            };
            if name.starts_with('.') || !dir.join(&name).is_file() {
                continue;
            }
            let path = dir.join(&name);
            files.push((
                topic.to_owned(),
                self.relative(&path),
                self.read_optional(&path)?,
            ));
        }
        Ok(files)
    }

    // Agent memory and daily logs (seed 004).

    fn agent_dir(&self, agent_id: &str) -> Result<PathBuf> {
        let agent_id = check_agent_id(agent_id)?;
        Ok(self.root.join(AGENTS_DIR).join(agent_id))
    }

    /// The relative path of the agent's `MEMORY.md`.
    ///
    /// # Errors
    /// [`MarkdownError::InvalidName`] for a bad agent id.
    pub fn agent_memory_file(&self, agent_id: &str) -> Result<String> {
        Ok(self.relative(&self.agent_dir(agent_id)?.join(MEMORY_FILE)))
    }

    /// `agents/{agent_id}/MEMORY.md`; empty if there is none yet.
    ///
    /// # Errors
    /// A bad agent id; the file exists but cannot be read.
    pub fn read_agent_memory(&self, agent_id: &str) -> Result<String> {
        self.read_optional(&self.agent_dir(agent_id)?.join(MEMORY_FILE))
    }

    /// Replaces `agents/{agent_id}/MEMORY.md` atomically, first keeping its current text as the
    /// version of `at` in `agents/{agent_id}/MEMORY.history/`.
    ///
    /// # Errors
    /// A bad agent id; a file cannot be written (the old memory is then intact).
    pub fn write_agent_memory(
        &self,
        agent_id: &str,
        at: DateTime<Utc>,
        content: &str,
    ) -> Result<String> {
        let path = self.agent_dir(agent_id)?.join(MEMORY_FILE);
        let _guard = self.lock();
        self.keep_version_locked(&path, at)?;
        self.write_whole_locked(&path, content)?;
        Ok(self.relative(&path))
    }

    /// The earlier versions of the agent's `MEMORY.md` kept, oldest first, relative paths.
    ///
    /// # Errors
    /// A bad agent id; the versions directory cannot be listed.
    pub fn agent_memory_versions(&self, agent_id: &str) -> Result<Vec<String>> {
        self.versions_of(&self.agent_dir(agent_id)?.join(MEMORY_FILE))
    }

    /// Appends a timestamped entry to `agents/{agent_id}/daily/{date of at}.md`; returns its path.
    ///
    /// # Errors
    /// A bad agent id; the file cannot be appended to.
    pub fn append_daily(&self, agent_id: &str, at: DateTime<Utc>, text: &str) -> Result<String> {
        let path = self
            .agent_dir(agent_id)?
            .join(DAILY_DIR)
            .join(format!("{}.md", at.format("%Y-%m-%d")));
        let entry = format_entry(at, text);
        let _guard = self.lock();
        self.append_locked(&path, &entry)?;
        Ok(self.relative(&path))
    }

    /// The agent's daily logs dated `from..=to`, oldest first, as (date, relative path, text).
    ///
    /// # Errors
    /// A bad agent id; a log cannot be read.
    pub fn daily_logs(
        &self,
        agent_id: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<(NaiveDate, String, String)>> {
        let dir = self.agent_dir(agent_id)?.join(DAILY_DIR);
        let mut logs = Vec::new();
        for name in self.list(&dir)? {
            let Some(date) = name
                .strip_suffix(".md")
                .and_then(|stem| NaiveDate::parse_from_str(stem, "%Y-%m-%d").ok())
            else {
                continue;
            };
            if date < from || date > to {
                continue;
            }
            let path = dir.join(&name);
            logs.push((date, self.relative(&path), self.read_optional(&path)?));
        }
        Ok(logs)
    }

    /// Every entry of every daily log of the agent, oldest first.
    ///
    /// # Errors
    /// A bad agent id; a log cannot be read.
    pub fn daily_entries(&self, agent_id: &str) -> Result<Vec<Entry>> {
        let logs = self.daily_logs(agent_id, NaiveDate::MIN, NaiveDate::MAX)?;
        Ok(logs
            .iter()
            .flat_map(|(_, path, text)| parse_entries(path, text))
            .collect())
    }

    // Session buffers (consolidation).

    /// `.sessions/{user}/{chat}/{session}.{extension}`.
    fn session_path(&self, session: &SessionKey, extension: &str) -> PathBuf {
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

    fn read_messages(&self, path: &Path) -> Result<Vec<BufferedMessage>> {
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

/// Removes a file; returns whether it was there.
fn remove_if_present(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn entries_round_trip_and_cannot_forge_headers() {
        let mut text = String::from("# History\n\n");
        text.push_str(&format_entry(at("2026-03-02T09:00:00Z"), "first\nline two"));
        text.push_str(&format_entry(
            at("2026-03-02T10:00:00Z"),
            "second\n## 2020-01-01T00:00:00Z\nforged",
        ));
        let entries = parse_entries("HISTORY.md", &text);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].at, None);
        assert_eq!(entries[0].text, "# History");
        assert_eq!(entries[1].at, Some(at("2026-03-02T09:00:00Z")));
        assert_eq!(entries[1].text, "first\nline two");
        assert_eq!(entries[2].at, Some(at("2026-03-02T10:00:00Z")));
        assert!(entries[2].text.contains("forged"));
        assert!(text.contains("## 2026-03-02T09:00:00.000Z\n\nfirst"));
    }

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

    #[test]
    fn history_file_names() {
        assert!(is_history_file("HISTORY.md"));
        assert!(is_history_file("HISTORY-2026-03.md"));
        assert!(!is_history_file("HISTORY-2026-13.md"));
        assert!(!is_history_file("HISTORY-notes.md"));
        assert!(!is_history_file(".HISTORY.md.1.2.tmp"));
    }
}
