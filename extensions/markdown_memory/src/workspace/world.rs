//! World knowledge (seed 004): the shared `world/{topic}.md`, read by every user and agent, and,
//! in a user's workspace, that user's own world topics `users/{user}/world/{topic}.md`.

use std::path::{Path, PathBuf};

use super::{Workspace, WORLD_DIR};
use crate::error::Result;
use crate::names::sanitize_topic;

/// What [`Workspace::write_world`] or [`Workspace::write_own_world`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldWrite {
    /// The sanitised topic.
    pub topic: String,
    /// The file written, relative to the workspace (a user's own topic: from the whole
    /// workspace's root, `users/{user}/world/{topic}.md`).
    pub path: String,
    /// Whether an earlier version was replaced.
    pub replaced: bool,
    /// Whether the file is in the shared `world/`, read by every user.
    pub shared: bool,
}

impl Workspace {
    /// The directory of this workspace's own world topics: `world/` itself for the whole
    /// workspace, `users/{user}/world/` for one user's.
    fn own_world_root(&self) -> PathBuf {
        self.root.join(WORLD_DIR)
    }

    /// Whether this workspace's own world topics are the shared `world/` (the whole workspace).
    fn own_world_is_shared(&self) -> bool {
        self.own_world_root() == self.world_root
    }

    fn topic_path(dir: &Path, topic: &str) -> Result<(String, PathBuf)> {
        let topic = sanitize_topic(topic)?;
        let path = dir.join(format!("{topic}.md"));
        Ok((topic, path))
    }

    /// Replaces `{dir}/{topic}.md` atomically; the topic is sanitised first.
    fn write_topic(&self, dir: &Path, topic: &str, content: &str) -> Result<WorldWrite> {
        let (topic, path) = Self::topic_path(dir, topic)?;
        let replaced = path.exists();
        self.write_whole(&path, content)?;
        Ok(WorldWrite {
            topic,
            path: self.relative(&path),
            replaced,
            shared: dir == self.world_root,
        })
    }

    /// Replaces the shared `world/{topic}.md` atomically; the topic is sanitised first.
    ///
    /// # Errors
    /// [`MarkdownError::InvalidName`] for a topic that could leave the workspace; the file cannot
    /// be written.
    pub fn write_world(&self, topic: &str, content: &str) -> Result<WorldWrite> {
        let dir = self.world_root.clone();
        self.write_topic(&dir, topic, content)
    }

    /// Replaces this workspace's own `world/{topic}.md` atomically: in one user's workspace
    /// `users/{user}/world/{topic}.md`, which no other user reads; in the whole workspace the
    /// shared `world/{topic}.md`.
    ///
    /// # Errors
    /// As [`Workspace::write_world`].
    pub fn write_own_world(&self, topic: &str, content: &str) -> Result<WorldWrite> {
        let dir = self.own_world_root();
        self.write_topic(&dir, topic, content)
    }

    /// The shared `world/{topic}.md`, if it exists.
    ///
    /// # Errors
    /// As [`Workspace::write_world`] for the name; the file cannot be read.
    pub fn read_world(&self, topic: &str) -> Result<Option<String>> {
        let (_, path) = Self::topic_path(&self.world_root, topic)?;
        let text = self.read_optional(&path)?;
        Ok((path.exists()).then_some(text))
    }

    /// Every shared world topic as (topic, relative path, text), by topic name.
    ///
    /// # Errors
    /// The directory or a file cannot be read.
    pub fn world_files(&self) -> Result<Vec<(String, String, String)>> {
        self.topics_in(&self.world_root)
    }

    /// Every world topic of this user's own, `users/{user}/world/`, as (topic, path, text), by
    /// topic name; empty for the whole workspace, whose own topics are the shared ones.
    ///
    /// # Errors
    /// The directory or a file cannot be read.
    pub fn own_world_files(&self) -> Result<Vec<(String, String, String)>> {
        if self.own_world_is_shared() {
            return Ok(Vec::new());
        }
        self.topics_in(&self.own_world_root())
    }

    /// The paths of this user's own world topics (none for the whole workspace), for erasure.
    pub(super) fn own_world_paths(&self) -> Result<Vec<PathBuf>> {
        if self.own_world_is_shared() {
            return Ok(Vec::new());
        }
        let dir = self.own_world_root();
        Ok(self
            .list(&dir)?
            .into_iter()
            .filter(|name| name.ends_with(".md") && !name.starts_with('.'))
            .map(|name| dir.join(name))
            .filter(|path| path.is_file())
            .collect())
    }

    fn topics_in(&self, dir: &Path) -> Result<Vec<(String, String, String)>> {
        let mut files = Vec::new();
        for name in self.list(dir)? {
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
}
