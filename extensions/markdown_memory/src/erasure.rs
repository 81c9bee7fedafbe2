//! Deletion in the markdown mirror: when the `memory` extension forgets a memory or erases a user,
//! the copies this extension keeps go too.
//!
//! The two announcements are read as a third-party extension would read them, by topic and field
//! name: `memory.forgotten` (`content`, `user_id`, `chat_id`, `session_id`) and
//! `memory.user_erased` (`user_id`).
//!
//! A forgotten text is removed where it was copied word for word: the session's buffered messages
//! and recap, and every line of `MEMORY.md`, the history files, the agents' memory files and daily
//! logs, the earlier versions of the memory files (`MEMORY.history/`) and, with `per_user`, the
//! user's own world topics (`users/{user}/world/`) that contains it (a history or log entry left
//! empty loses its header too). The shared `world/` files, written by an administrator or an agent
//! in `shared_world_writers`, are not touched. A summary the model wrote in its own words cannot be
//! recognised and stays; erasing the user removes those too when `per_user` is on, since the user's
//! whole `users/{user}/` directory goes. With one shared workspace, an erasure removes the user's
//! session buffers and recaps (`.sessions/{user}/`, every chat and session) only: the shared
//! history and memory files cannot be attributed to one user.

use mnemo_kernel::TypedEvent;
use serde::Deserialize;

/// Text cut to this many characters is still recognised: the raw-fallback history entry keeps
/// the first 200 characters of each message.
const PROBE_CHARS: usize = 200;

/// A forgotten text shorter than this (flattened) is only matched as a whole line or message, so
/// that forgetting "ok" does not remove every line with "ok" in it.
const MIN_CONTAINED_CHARS: usize = 12;

/// `memory.forgotten`, the fields this extension uses.
#[derive(Debug, Deserialize, serde::Serialize)]
pub(crate) struct Forgotten {
    pub content: String,
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub chat_id: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
}

impl TypedEvent for Forgotten {
    const TOPIC: &'static str = "memory.forgotten";
}

/// `memory.user_erased`, the fields this extension uses.
#[derive(Debug, Deserialize, serde::Serialize)]
pub(crate) struct UserErased {
    pub user_id: String,
}

impl TypedEvent for UserErased {
    const TOPIC: &'static str = "memory.user_erased";
}

/// Whitespace collapsed to single spaces, lower case.
fn flatten(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A forgotten text, ready to be looked for in lines and messages.
#[derive(Debug, Clone)]
pub struct Needle {
    /// The whole text, flattened.
    whole: String,
    /// Its first [`PROBE_CHARS`] characters, looked for inside lines when it is long enough.
    probe: Option<String>,
}

impl Needle {
    /// The needle for `content`; `None` for a text with nothing but whitespace.
    pub fn new(content: &str) -> Option<Self> {
        let whole = flatten(content);
        if whole.is_empty() {
            return None;
        }
        let probe = (whole.chars().count() >= MIN_CONTAINED_CHARS)
            .then(|| whole.chars().take(PROBE_CHARS).collect());
        Some(Self { whole, probe })
    }

    /// True when a buffered message is the forgotten text (or holds it, for a long text).
    pub fn matches_message(&self, text: &str) -> bool {
        let text = flatten(text);
        text == self.whole
            || self
                .probe
                .as_ref()
                .is_some_and(|probe| text.contains(probe.as_str()))
    }

    /// True when a line of a file copies the forgotten text: it contains it (a long text), or
    /// it is the text alone, as a list item, or as a turn after `user:` or `assistant:` (a
    /// short one, so that forgetting "blue" leaves `- favourite colour: blue` alone).
    pub fn matches_line(&self, line: &str) -> bool {
        self.matches_flat(&flatten(line))
    }

    fn matches_flat(&self, line: &str) -> bool {
        if let Some(probe) = &self.probe {
            return line.contains(probe.as_str());
        }
        let item = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .unwrap_or(line);
        item == self.whole
            || line
                .strip_suffix(self.whole.as_str())
                .is_some_and(|before| before.ends_with("user: ") || before.ends_with("assistant: "))
    }
}

/// True for an entry header line, `## <RFC 3339 time>`.
fn is_header(line: &str) -> bool {
    line.strip_prefix("## ")
        .is_some_and(|stamp| chrono::DateTime::parse_from_rfc3339(stamp.trim()).is_ok())
}

/// `text` without the lines that copy the needle, or `None` if no line does. A line that holds
/// the text is removed whole. With `entries` (history files and daily logs), an entry that holds
/// the text across its lines is removed whole, and an entry whose every line was removed loses its
/// header too.
pub fn scrub_text(text: &str, needle: &Needle, entries: bool) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut keep: Vec<bool> = lines
        .iter()
        .map(|line| !needle.matches_line(line))
        .collect();
    if entries {
        let headers: Vec<usize> = (0..lines.len()).filter(|&i| is_header(lines[i])).collect();
        for (n, &header) in headers.iter().enumerate() {
            let end = headers.get(n + 1).copied().unwrap_or(lines.len());
            let body = header + 1..end;
            let removed_some = body.clone().any(|i| !keep[i]);
            // A copy spread over several lines (a multi-line note), which no single line holds,
            // is found in the whole entry.
            let copied =
                !removed_some && needle.matches_flat(&flatten(&lines[body.clone()].join("\n")));
            let nothing_left = body.clone().all(|i| !keep[i] || lines[i].trim().is_empty());
            if copied || (removed_some && nothing_left) {
                for kept in &mut keep[header..end] {
                    *kept = false;
                }
            }
        }
    }
    if keep.iter().all(|kept| *kept) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for (line, kept) in lines.iter().zip(&keep) {
        if *kept {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !text.ends_with('\n') && out.ends_with('\n') {
        out.pop();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_found_inside_lines_even_when_cut() {
        let secret = "My locker code is 31-17-42, please keep it to yourself";
        let needle = Needle::new(secret).unwrap();
        assert!(needle.matches_line(
            "[2026-03-02 09:00] user: my LOCKER code is  31-17-42, please keep it to yourself"
        ));
        assert!(needle.matches_line("- My locker code is 31-17-42, please keep it to yourself."));
        assert!(!needle.matches_line("[2026-03-02 09:00] user: my locker is blue"));
        let long = "word ".repeat(100);
        let needle = Needle::new(&long).unwrap();
        let cut: String = flatten(&long).chars().take(200).collect();
        assert!(needle.matches_line(&format!("[t] user: {cut}…")));
        assert!(needle.matches_message(&long));
    }

    #[test]
    fn a_copy_across_lines_takes_its_entry_with_it() {
        let needle = Needle::new("Call the plumber on Monday\nabout the boiler valve").unwrap();
        let log = "## 2026-03-02T09:00:00.000Z\n\nCall the plumber on Monday\nabout the boiler valve\n\n## 2026-03-02T10:00:00.000Z\n\nbuy milk\n";
        assert_eq!(
            scrub_text(log, &needle, true).unwrap(),
            "## 2026-03-02T10:00:00.000Z\n\nbuy milk\n"
        );
    }

    #[test]
    fn short_texts_match_only_whole_lines() {
        let needle = Needle::new("ok").unwrap();
        assert!(needle.matches_line("ok"));
        assert!(needle.matches_line("- OK"));
        assert!(needle.matches_line("[2026-03-02 09:00] user: ok"));
        assert!(!needle.matches_line("the book is on the table"));
        assert!(!needle.matches_line("[2026-03-02 09:00] user: ok, thanks"));
        assert!(!Needle::new("blue")
            .unwrap()
            .matches_line("- favourite colour: blue"));
        assert!(needle.matches_message(" ok "));
        assert!(!needle.matches_message("ok then"));
        assert!(Needle::new(" \n\t").is_none());
    }

    #[test]
    fn an_entry_left_empty_loses_its_header() {
        let text = "# History\n\n## 2026-03-02T09:00:00.000Z\n\n[raw-fallback] session s1\n- user: my locker code is 31-17-42\n\n## 2026-03-02T10:00:00.000Z\n\nmy locker code is 31-17-42\n\n## 2026-03-02T11:00:00.000Z\n\nplanned the trip\n\n";
        let needle = Needle::new("my locker code is 31-17-42").unwrap();
        let scrubbed = scrub_text(text, &needle, true).unwrap();
        assert_eq!(
            scrubbed,
            "# History\n\n## 2026-03-02T09:00:00.000Z\n\n[raw-fallback] session s1\n\n## 2026-03-02T11:00:00.000Z\n\nplanned the trip\n\n"
        );
        assert_eq!(
            scrub_text(&scrubbed, &needle, true),
            None,
            "nothing left to remove"
        );
        let memory = "# Memory\n- my locker code is 31-17-42\n- likes tea";
        assert_eq!(
            scrub_text(memory, &needle, false).unwrap(),
            "# Memory\n- likes tea"
        );
    }
}
