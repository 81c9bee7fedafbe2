//! Entries of the history files and daily logs: how one is written and read back, and which
//! files hold the history.

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

use super::HISTORY_FILE;

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

pub(super) fn is_history_file(name: &str) -> bool {
    if name == HISTORY_FILE {
        return true;
    }
    name.strip_prefix("HISTORY-")
        .and_then(|rest| rest.strip_suffix(".md"))
        .is_some_and(|month| NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").is_ok())
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
    fn history_file_names() {
        assert!(is_history_file("HISTORY.md"));
        assert!(is_history_file("HISTORY-2026-03.md"));
        assert!(!is_history_file("HISTORY-2026-13.md"));
        assert!(!is_history_file("HISTORY-notes.md"));
        assert!(!is_history_file(".HISTORY.md.1.2.tmp"));
    }
}
