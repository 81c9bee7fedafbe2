//! World knowledge (seed 004): `world/{topic}.md`, shared by every user and agent.

use std::path::PathBuf;

use super::Workspace;
use crate::error::Result;
use crate::names::sanitize_topic;

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

impl Workspace {
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
}
