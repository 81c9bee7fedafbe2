//! The earlier versions of each `MEMORY.md`, kept in `MEMORY.history/` before a rewrite: their
//! names, how one is kept, and the pruning beyond the configured number.

use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::{Workspace, MEMORY_VERSIONS_DIR, VERSION_PREFIX, VERSION_TIME};
use crate::atomic;
use crate::error::Result;

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

impl Workspace {
    /// Copies the memory file `file`, if it has any text, to its versions directory as
    /// `MEMORY-{at}.md`, then removes the oldest versions beyond the configured number. The
    /// caller holds the write lock. Returns the version written, relative to the workspace.
    pub(super) fn keep_version_locked(
        &self,
        file: &Path,
        at: DateTime<Utc>,
    ) -> Result<Option<String>> {
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
    pub(super) fn versions_of(&self, file: &Path) -> Result<Vec<String>> {
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
}
