//! The workspace's file guarantees: no name leaves it, whole-file writes are atomic, history
//! rotates by month and appends never rewrite earlier entries.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use mnemo_markdown_memory::{
    format_entry, is_temp_file, MarkdownError, StagedWrite, Workspace, HISTORY_FILE,
};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn topic_names_cannot_leave_the_workspace() {
    let outer = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(outer.path().join("ws")).unwrap();
    let attempts = [
        ("../escape", "contains `..`"),
        ("../../etc/passwd", "contains `..`"),
        ("..", "contains `..`"),
        ("world/../../escape", "contains `..`"),
        ("/etc/passwd", "is an absolute path"),
        ("/tmp", "is an absolute path"),
        ("C:\\Windows\\win.ini", "is an absolute path"),
        ("~/.ssh/authorized_keys", "is an absolute path"),
        ("sub/dir", "contains a path separator"),
        ("sub\\dir", "contains a path separator"),
        ("nul\0byte", "contains a NUL character"),
        ("...", "contains `..`"),
        ("???", "has no letters or digits"),
    ];
    for (topic, reason) in attempts {
        let error = workspace.write_world(topic, "pwned").unwrap_err();
        assert!(
            matches!(error, MarkdownError::InvalidName { what: "topic", .. }),
            "{topic:?}: {error:?}"
        );
        let message = error.to_string();
        assert!(message.starts_with("invalid topic"), "{message}");
        assert!(message.contains(reason), "{topic:?}: {message}");
    }
    let long = "a".repeat(10_000);
    let message = workspace
        .write_world(&long, "pwned")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("10000 characters long; the limit is 64"),
        "{message}"
    );
    assert!(message.len() < 200, "the long name is shortened: {message}");
    assert!(workspace.read_world("../escape").is_err());

    // Nothing was written anywhere: not outside the workspace, not inside it.
    assert_eq!(tree(outer.path()), Vec::<String>::new());

    // A plain name is sanitised and lands in world/.
    let written = workspace
        .write_world("  Home Network!! ", "router in the hall")
        .unwrap();
    assert_eq!(written.topic, "home-network");
    assert_eq!(written.path, "world/home-network.md");
    assert!(!written.replaced);
    assert_eq!(tree(outer.path()), vec!["ws/world/home-network.md"]);
}

#[test]
fn agent_ids_cannot_leave_the_workspace() {
    let outer = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(outer.path().join("ws")).unwrap();
    for agent in ["../other", "/abs", "a/b", "Upper Case", ""] {
        let error = workspace
            .append_daily(agent, at("2026-03-02T09:00:00Z"), "x")
            .unwrap_err();
        assert!(
            matches!(
                error,
                MarkdownError::InvalidName {
                    what: "agent_id",
                    ..
                }
            ),
            "{agent:?}: {error}"
        );
        assert!(workspace
            .write_agent_memory(agent, at("2026-03-02T09:00:00Z"), "x")
            .is_err());
    }
    assert_eq!(tree(outer.path()), Vec::<String>::new());
}

#[test]
fn a_write_interrupted_before_the_rename_leaves_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    workspace
        .write_world("people", "Ana is the user's sister")
        .unwrap();
    let target = dir.path().join("world/people.md");

    // A crash after the temporary file is written and flushed, before the rename: `forget` skips
    // the cleanup a normal drop would do, as a killed process would.
    let staged = StagedWrite::stage(&target, b"half a new vers").unwrap();
    let temp = staged.temp_path().to_path_buf();
    std::mem::forget(staged);

    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "Ana is the user's sister\n"
    );
    assert!(temp.exists());
    assert!(is_temp_file(&temp.file_name().unwrap().to_string_lossy()));
    // Readers never take the temporary file for a topic.
    let topics: Vec<String> = workspace
        .world_files()
        .unwrap()
        .into_iter()
        .map(|(topic, _, _)| topic)
        .collect();
    assert_eq!(topics, vec!["people"]);
    assert_eq!(
        workspace.read_world("people").unwrap().as_deref(),
        Some("Ana is the user's sister\n")
    );

    // Opening the workspace again leaves it: its writer (this process) is alive, so the write
    // may still be in progress. (`sweep.rs`: the file of a writer that died is removed.)
    let reopened = Workspace::open(dir.path()).unwrap();
    assert!(temp.exists());
    fs::remove_file(&temp).unwrap();

    // A later write replaces the file whole.
    let written = reopened
        .write_world("people", "Ana moved to Porto")
        .unwrap();
    assert!(written.replaced);
    assert_eq!(fs::read_to_string(&target).unwrap(), "Ana moved to Porto\n");
}

#[test]
fn readers_never_see_a_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    let first = format!("A{}", "a".repeat(512 * 1024));
    let second = format!("B{}", "b".repeat(256 * 1024));
    workspace
        .write_memory(at("2026-03-02T09:00:00Z"), &first)
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));

    let writer = {
        let workspace = workspace.clone();
        let (first, second, done) = (first.clone(), second.clone(), done.clone());
        std::thread::spawn(move || {
            for round in 0..40 {
                let content = if round % 2 == 0 { &second } else { &first };
                workspace
                    .write_memory(at("2026-03-02T09:00:00Z"), content)
                    .unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut reads = 0;
    while !done.load(Ordering::SeqCst) || reads < 10 {
        let seen = workspace.read_memory().unwrap();
        let seen = seen.trim_end();
        assert!(
            seen == first || seen == second,
            "a reader saw {} bytes starting {:?}",
            seen.len(),
            &seen[..seen.len().min(8)]
        );
        reads += 1;
    }
    writer.join().unwrap();
    assert!(tree(dir.path()).iter().all(|name| !name.contains(".tmp")));
}

#[test]
fn history_rotates_by_month_and_appends_never_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    workspace
        .append_history(
            at("2026-01-31T23:59:00Z"),
            "[2026-01-31 23:59] Planned the Lisbon trip.",
        )
        .unwrap();
    let before = fs::read(dir.path().join(HISTORY_FILE)).unwrap();
    workspace
        .append_history(
            at("2026-02-01T00:01:00Z"),
            "[2026-02-01 00:01] Booked the flights.",
        )
        .unwrap();
    workspace
        .append_history(
            at("2026-02-14T12:00:00Z"),
            "[2026-02-14 12:00] Dinner at Sol.",
        )
        .unwrap();

    let all = fs::read(dir.path().join(HISTORY_FILE)).unwrap();
    assert!(all.starts_with(&before), "earlier bytes are untouched");
    let all = String::from_utf8(all).unwrap();
    assert!(all.starts_with("## 2026-01-31T23:59:00.000Z\n\n[2026-01-31 23:59] Planned"));
    assert_eq!(all.matches("\n## ").count() + 1, 3);

    let january = fs::read_to_string(dir.path().join("HISTORY-2026-01.md")).unwrap();
    let february = fs::read_to_string(dir.path().join("HISTORY-2026-02.md")).unwrap();
    assert_eq!(
        january,
        format_entry(
            at("2026-01-31T23:59:00Z"),
            "[2026-01-31 23:59] Planned the Lisbon trip."
        )
    );
    assert!(february.contains("Booked the flights") && february.contains("Dinner at Sol"));
    assert!(!february.contains("Lisbon"));
    assert_eq!(
        tree(dir.path()),
        vec!["HISTORY-2026-01.md", "HISTORY-2026-02.md", "HISTORY.md"]
    );

    // Each entry is read once, from its monthly file, although HISTORY.md holds it too.
    let entries = workspace.history_entries().unwrap();
    let found: Vec<(&str, Option<DateTime<Utc>>)> = entries
        .iter()
        .map(|entry| (entry.source.as_str(), entry.at))
        .collect();
    assert_eq!(
        found,
        vec![
            ("HISTORY-2026-01.md", Some(at("2026-01-31T23:59:00Z"))),
            ("HISTORY-2026-02.md", Some(at("2026-02-01T00:01:00Z"))),
            ("HISTORY-2026-02.md", Some(at("2026-02-14T12:00:00Z"))),
        ]
    );

    // An entry only in HISTORY.md (older than rotation, or written by hand) is still found.
    let mut legacy = fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join(HISTORY_FILE))
        .unwrap();
    std::io::Write::write_all(&mut legacy, b"## 2025-12-01T08:00:00Z\n\nLegacy entry.\n").unwrap();
    let entries = workspace.history_entries().unwrap();
    assert_eq!(entries.len(), 4);
    assert!(entries
        .iter()
        .any(|entry| entry.source == HISTORY_FILE && entry.text == "Legacy entry."));
}

#[test]
fn daily_logs_are_append_only_and_dated() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    let path = workspace
        .append_daily("assistant", at("2026-03-02T09:00:00Z"), "first")
        .unwrap();
    assert_eq!(path, "agents/assistant/daily/2026-03-02.md");
    let before = fs::read(dir.path().join(&path)).unwrap();
    workspace
        .append_daily("assistant", at("2026-03-02T17:30:00Z"), "second")
        .unwrap();
    workspace
        .append_daily("assistant", at("2026-03-03T08:00:00Z"), "next day")
        .unwrap();
    let after = fs::read(dir.path().join(&path)).unwrap();
    assert!(after.starts_with(&before));
    let logs = workspace
        .daily_logs(
            "assistant",
            "2026-03-03".parse().unwrap(),
            "2026-03-03".parse().unwrap(),
        )
        .unwrap();
    assert_eq!(logs.len(), 1);
    assert!(logs[0].2.contains("next day"));
    let entries = workspace.daily_entries("assistant").unwrap();
    assert_eq!(
        entries.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(),
        vec!["first", "second", "next day"]
    );
}

#[test]
fn every_rewrite_keeps_the_previous_memory_and_only_the_last_versions() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap().with_versions(3);
    // Nothing to keep before the first write.
    workspace
        .write_memory(at("2026-03-02T09:00:00Z"), "v1")
        .unwrap();
    assert_eq!(workspace.memory_versions().unwrap(), Vec::<String>::new());
    for (n, time) in [
        "2026-03-02T10:00:00Z",
        "2026-03-02T10:00:00Z",
        "2026-03-02T11:00:00Z",
        "2026-03-02T12:00:00Z",
    ]
    .into_iter()
    .enumerate()
    {
        workspace
            .write_memory(at(time), &format!("v{}", n + 2))
            .unwrap();
    }
    // v1..v4 were kept in turn (two at the same time apart by a number); the oldest went.
    let versions = workspace.memory_versions().unwrap();
    assert_eq!(
        versions,
        vec![
            "MEMORY.history/MEMORY-2026-03-02T10-00-00.000Z-2.md",
            "MEMORY.history/MEMORY-2026-03-02T11-00-00.000Z.md",
            "MEMORY.history/MEMORY-2026-03-02T12-00-00.000Z.md",
        ]
    );
    let texts: Vec<String> = versions
        .iter()
        .map(|version| fs::read_to_string(dir.path().join(version)).unwrap())
        .collect();
    assert_eq!(texts, vec!["v2\n", "v3\n", "v4\n"]);
    assert_eq!(workspace.read_memory().unwrap(), "v5\n");
    // A file the user put there is not a version and is never pruned.
    fs::write(dir.path().join("MEMORY.history/notes.md"), "mine").unwrap();
    workspace
        .write_memory(at("2026-03-02T13:00:00Z"), "v6")
        .unwrap();
    assert!(dir.path().join("MEMORY.history/notes.md").exists());
    assert_eq!(workspace.memory_versions().unwrap().len(), 3);

    // The agent's memory keeps its own; 0 versions keeps none.
    workspace
        .write_agent_memory("assistant", at("2026-03-02T09:00:00Z"), "a1")
        .unwrap();
    workspace
        .write_agent_memory("assistant", at("2026-03-02T10:00:00Z"), "a2")
        .unwrap();
    assert_eq!(
        workspace.agent_memory_versions("assistant").unwrap(),
        vec!["agents/assistant/MEMORY.history/MEMORY-2026-03-02T10-00-00.000Z.md"]
    );
    let none = workspace.clone().with_versions(0).for_user("ana");
    none.write_memory(at("2026-03-02T09:00:00Z"), "u1").unwrap();
    none.write_memory(at("2026-03-02T10:00:00Z"), "u2").unwrap();
    assert_eq!(none.memory_versions().unwrap(), Vec::<String>::new());
}

#[test]
fn a_forgotten_text_leaves_the_memory_versions_too() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    let secret = "my locker code is 31-17-42";
    workspace
        .write_consolidated_memory(
            at("2026-03-02T09:00:00Z"),
            &format!("- {secret}\n- likes tea"),
            &format!("- {secret}\n- likes tea\n"),
        )
        .unwrap();
    workspace
        .write_consolidated_memory(
            at("2026-03-02T10:00:00Z"),
            &format!("- {secret}\n- likes coffee"),
            &format!("- {secret}\n- likes coffee\n"),
        )
        .unwrap();
    workspace
        .write_agent_memory("assistant", at("2026-03-02T09:00:00Z"), secret)
        .unwrap();
    workspace
        .write_agent_memory("assistant", at("2026-03-02T10:00:00Z"), "nothing")
        .unwrap();
    let changed = workspace
        .scrub(None, &mnemo_markdown_memory::Needle::new(secret).unwrap())
        .unwrap();
    assert_eq!(
        changed,
        vec![
            "MEMORY.md",
            "MEMORY.history/MEMORY-2026-03-02T10-00-00.000Z.md",
            "MEMORY.history/model-lines.md",
            "agents/assistant/MEMORY.history/MEMORY-2026-03-02T10-00-00.000Z.md",
        ]
    );
    for file in tree(dir.path()) {
        let text = fs::read_to_string(dir.path().join(&file)).unwrap();
        assert!(!text.contains("31-17-42"), "{file}: {text}");
    }
}
