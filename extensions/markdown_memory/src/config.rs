//! `[extensions.markdown_memory]`.

use mnemo_kernel::ValidateConfig;
use serde::{Deserialize, Serialize};

use crate::names;

/// The markdown memory's options; every key is listed, with its default, in `config.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MarkdownMemoryConfig {
    /// Where the memory lives: `filesystem`, the one backend, as in seed 004's `backend` key
    /// (any other name is refused with the choices named).
    pub backend: StorageBackend,
    /// Directory of the memory files; a relative path is taken under the kernel's data directory.
    pub workspace: String,
    /// The agent whose `agents/{agent_id}/` memory and daily log the tools use.
    pub agent_id: String,
    /// Put before every tool name (`{tool_prefix}recall`, ...), so the tools can sit beside the
    /// memory extension's `remember` and `recall`; `""` gives seed 004's exact names.
    pub tool_prefix: String,
    /// `true`: `MEMORY.md` and the agent's `MEMORY.md` go into every system prompt, as quoted
    /// data. `false`: tools-only, with a short memory directive instead.
    pub inject: bool,
    /// `true`: each user gets their own files under `users/{user}/`, their own world topics
    /// (`users/{user}/world/`) included, so one user's memory never reaches another's prompt or
    /// tools; the shared `world/` is read by everyone. `false`: one set of files for everyone,
    /// for single-user set-ups, where `learn_fact` writes the shared `world/` (seed 004).
    pub per_user: bool,
    /// Agent ids allowed to write the shared `world/` from a conversation when `per_user` is on
    /// (seed 004's "Shared facts (all agents see)", rewritten via `learn_fact`): when this
    /// extension's `agent_id` is listed, its `learn_fact` writes `world/{topic}.md`, which every
    /// user's `recall` shows. Default empty: a `learn_fact` writes the user's own
    /// `users/{user}/world/{topic}.md`, and the shared `world/` is written only by hand.
    pub shared_world_writers: Vec<String>,
    /// A session longer than this many messages is consolidated, keeping the latest
    /// `keep_messages`.
    pub memory_window: usize,
    /// Messages kept (and shown as a recap) when the window trigger consolidates a session.
    pub keep_messages: usize,
    /// When `MEMORY.md` is larger than this many bytes, consolidation asks the model to compress it.
    pub max_memory_size: usize,
    /// Earlier versions of each `MEMORY.md` kept in `MEMORY.history/` before a rewrite (the
    /// oldest go first); 0 keeps none.
    pub memory_versions: usize,
    /// How long one consolidation waits for the model, in seconds, before writing a raw fallback.
    pub llm_timeout_secs: u64,
    /// Days of the daily log `recall` returns when the model gives no `days`.
    pub recall_days: u32,
    /// Results of `search_history` when the model gives no `limit`.
    pub search_limit: usize,
    /// Longest `content` a tool accepts, in characters; longer input is refused, not cut.
    pub max_content_chars: usize,
}

/// Where the markdown memory keeps its files (`backend`; seed 004: "currently only supports
/// filesystem, but is included for future pluggability").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageBackend {
    /// Plain files under `workspace`.
    #[default]
    Filesystem,
}

impl Default for MarkdownMemoryConfig {
    fn default() -> Self {
        Self {
            backend: StorageBackend::Filesystem,
            workspace: "markdown".to_owned(),
            agent_id: "assistant".to_owned(),
            tool_prefix: "md_".to_owned(),
            inject: true,
            per_user: true,
            shared_world_writers: Vec::new(),
            memory_window: 50,
            keep_messages: 10,
            max_memory_size: 8_192,
            memory_versions: crate::workspace::DEFAULT_MEMORY_VERSIONS,
            llm_timeout_secs: 30,
            recall_days: 3,
            search_limit: 10,
            max_content_chars: 20_000,
        }
    }
}

/// Most days `recall` may reach back.
pub(crate) const MAX_RECALL_DAYS: u32 = 366;
/// Most results one `search_history` call may return.
pub(crate) const MAX_SEARCH_LIMIT: usize = 50;
/// Most versions of a `MEMORY.md` that may be kept.
const MAX_MEMORY_VERSIONS: usize = 1_000;
/// Longest consolidation timeout, in seconds.
const MAX_TIMEOUT_SECS: u64 = 3_600;
/// Longest tool prefix, in characters.
const MAX_PREFIX_CHARS: usize = 32;

impl MarkdownMemoryConfig {
    /// Whether `learn_fact` writes the shared `world/` (read by every user): with one set of
    /// files for everyone (`per_user = false`), or when `agent_id` is one of the
    /// `shared_world_writers`. Otherwise it writes the user's own `users/{user}/world/`.
    pub fn writes_shared_world(&self) -> bool {
        !self.per_user || self.shared_world_writers.contains(&self.agent_id)
    }
}

impl ValidateConfig for MarkdownMemoryConfig {
    /// Every problem with the values, each naming its key; empty when the config is usable.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, reason: String| {
            problems.push(format!("key `{key}`: {reason}"));
        };
        if self.workspace.trim().is_empty() {
            problem(
                "workspace",
                "must not be empty (the default is \"markdown\", under the data directory)"
                    .to_owned(),
            );
        } else if self.workspace.contains('\0') {
            problem("workspace", "must not contain a NUL character".to_owned());
        }
        if let Err(err) = names::check_agent_id(&self.agent_id) {
            problem("agent_id", err.to_string());
        }
        for writer in &self.shared_world_writers {
            if let Err(err) = names::check_agent_id(writer) {
                problem("shared_world_writers", err.to_string());
            }
        }
        if self.tool_prefix.chars().count() > MAX_PREFIX_CHARS {
            problem(
                "tool_prefix",
                format!("is longer than {MAX_PREFIX_CHARS} characters"),
            );
        }
        if !self
            .tool_prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            problem(
                "tool_prefix",
                format!(
                    "{:?} may hold only ASCII letters, digits, `_` and `-` (tool names are sent to the model)",
                    self.tool_prefix
                ),
            );
        }
        if self.memory_window < 2 {
            problem("memory_window", "must be at least 2".to_owned());
        }
        if self.keep_messages >= self.memory_window {
            problem(
                "keep_messages",
                format!(
                    "must be smaller than memory_window ({}), or nothing would be consolidated",
                    self.memory_window
                ),
            );
        }
        if self.max_memory_size < 256 {
            problem("max_memory_size", "must be at least 256 bytes".to_owned());
        }
        if self.memory_versions > MAX_MEMORY_VERSIONS {
            problem(
                "memory_versions",
                format!("must be at most {MAX_MEMORY_VERSIONS} (0 keeps no versions)"),
            );
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&self.llm_timeout_secs) {
            problem(
                "llm_timeout_secs",
                format!("must be between 1 and {MAX_TIMEOUT_SECS}"),
            );
        }
        if self.recall_days > MAX_RECALL_DAYS {
            problem("recall_days", format!("must be at most {MAX_RECALL_DAYS}"));
        }
        if self.search_limit == 0 || self.search_limit > MAX_SEARCH_LIMIT {
            problem(
                "search_limit",
                format!("must be between 1 and {MAX_SEARCH_LIMIT}"),
            );
        }
        if self.max_content_chars == 0 {
            problem("max_content_chars", "must be at least 1".to_owned());
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_listed_agent_or_a_single_user_set_up_writes_the_shared_world() {
        let per_user = MarkdownMemoryConfig::default();
        assert!(
            !per_user.writes_shared_world(),
            "the default keeps users apart"
        );
        let listed = MarkdownMemoryConfig {
            shared_world_writers: vec!["curator".to_owned(), "assistant".to_owned()],
            ..MarkdownMemoryConfig::default()
        };
        assert!(listed.writes_shared_world());
        let other = MarkdownMemoryConfig {
            shared_world_writers: vec!["curator".to_owned()],
            ..MarkdownMemoryConfig::default()
        };
        assert!(!other.writes_shared_world());
        let single = MarkdownMemoryConfig {
            per_user: false,
            ..MarkdownMemoryConfig::default()
        };
        assert!(single.writes_shared_world(), "seed 004's one set of files");
    }

    #[test]
    fn the_defaults_are_valid_and_round_trip() {
        let config = MarkdownMemoryConfig::default();
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        let text = serde_json::to_string(&config).unwrap();
        let back: MarkdownMemoryConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, config);
        let empty: MarkdownMemoryConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, config);
    }

    #[test]
    fn config_toml_shows_every_option_with_its_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let config = mnemo_kernel::host::Config::parse(&text, "config.toml").unwrap();
        let section = config.extension(crate::NAME).unwrap();
        let mut shown: Vec<&String> = section.table().keys().collect();
        shown.sort();
        let defaults = serde_json::to_value(MarkdownMemoryConfig::default()).unwrap();
        let mut keys: Vec<&String> = defaults.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(shown, keys);
        assert_eq!(
            section.parse::<MarkdownMemoryConfig>().unwrap(),
            MarkdownMemoryConfig::default()
        );
    }

    #[test]
    fn backend_is_filesystem_and_nothing_else() {
        let reference: MarkdownMemoryConfig =
            serde_json::from_str(r#"{"backend":"filesystem","workspace":".agnx/memory"}"#).unwrap();
        assert_eq!(reference.backend, StorageBackend::Filesystem);
        assert!(
            reference.problems().is_empty(),
            "{:?}",
            reference.problems()
        );
        let err = serde_json::from_str::<MarkdownMemoryConfig>(r#"{"backend":"sqlite"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown variant `sqlite`, expected `filesystem`"),
            "{err}"
        );
    }

    #[test]
    fn every_bad_value_is_reported_at_once() {
        let config = MarkdownMemoryConfig {
            workspace: " ".to_owned(),
            agent_id: "../root".to_owned(),
            tool_prefix: "md.".to_owned(),
            memory_window: 5,
            keep_messages: 5,
            llm_timeout_secs: 0,
            memory_versions: 1_001,
            shared_world_writers: vec!["curator".to_owned(), "../all".to_owned()],
            ..MarkdownMemoryConfig::default()
        };
        let problems = config.problems();
        assert_eq!(problems.len(), 7, "{problems:#?}");
        for key in [
            "workspace",
            "agent_id",
            "shared_world_writers",
            "tool_prefix",
            "keep_messages",
            "llm_timeout_secs",
            "memory_versions",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(&format!("`{key}`"))),
                "{key}: {problems:#?}"
            );
        }
    }
}
