//! Long-term memory and history (seed 002): `MEMORY.md`, the record of the lines the last
//! consolidation wrote, and the history files every entry is appended to.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use super::entries::{format_entry, is_history_file, monthly_history_file, parse_entries, Entry};
use super::{Workspace, HISTORY_FILE, MEMORY_FILE, MEMORY_VERSIONS_DIR, MODEL_LINES_FILE};
use crate::error::Result;

impl Workspace {
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
}
