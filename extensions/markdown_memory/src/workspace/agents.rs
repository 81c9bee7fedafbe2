//! Agent memory and daily logs (seed 004): `agents/{agent_id}/MEMORY.md`, its versions, and the
//! agent's append-only daily logs.

use std::path::PathBuf;

use chrono::{DateTime, NaiveDate, Utc};

use super::entries::{format_entry, parse_entries, Entry};
use super::{Workspace, AGENTS_DIR, DAILY_DIR, MEMORY_FILE};
use crate::error::Result;
use crate::names::check_agent_id;

impl Workspace {
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
}
