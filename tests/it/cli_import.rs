//! `mnemo import` counts what the store did: an event it refuses is a problem named by its line
//! (and the run fails), an event stored before is "already present", and only what is stored
//! now reaches the other extensions, so the markdown mirror holds one copy of each message and
//! never gets a forgotten one back.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::common;

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

const WITH_MARKDOWN: &str = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n\
    [extensions.memory]\n[extensions.markdown_memory]\nenabled = true\n";

fn event(id: Option<&str>, minute: u32, text: &str) -> String {
    let mut event = json!({"type": "user_message", "at": format!("2026-03-02T08:{minute:02}:00Z"),
        "session_id": "s1", "user_id": "ana", "text": text});
    if let Some(id) = id {
        event["id"] = json!(id);
    }
    event.to_string()
}

fn run(dir: &Path, config: &str, args: &[&str]) -> Output {
    common::mnemo(dir, config).args(args).output().unwrap()
}

fn import(dir: &Path, config: &str, file: &Path) -> Output {
    run(dir, config, &["import", file.to_str().unwrap()])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_refused_event_is_a_problem_named_by_its_line_and_the_run_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    // The default max_content_chars is 20,000.
    let lines = [
        event(Some("e1"), 0, "The boiler was serviced on Monday"),
        event(Some("e2"), 1, &"x".repeat(20_001)),
        event(Some("e3"), 2, "The gate code is 4411"),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let output = import(dir.path(), CONFIG, &file);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("events.jsonl:2:"), "{stderr}");
    assert!(
        stderr.contains("max_content_chars"),
        "the error names the limit: {stderr}"
    );
    assert!(
        stdout.contains("imported 2 conversation events (0 already present)")
            && stdout.contains("1 problems"),
        "{stdout}"
    );
    assert_eq!(common::check(dir.path(), CONFIG)["memories"], 2);
}

#[test]
fn importing_twice_stores_each_event_once_and_says_they_are_present() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let lines = [
        event(Some("e1"), 0, "The boiler was serviced on Monday"),
        // Without an id: the id comes from the content, so it is stored once too.
        event(None, 1, "The gate code is 4411"),
        event(None, 2, "The plumber comes on Friday"),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let first = import(dir.path(), CONFIG, &file);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stdout).contains("imported 3 conversation events (0 already present)"),
        "{}",
        text(&first.stdout)
    );
    let second = import(dir.path(), CONFIG, &file);
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert!(
        text(&second.stdout).contains("imported 0 conversation events (3 already present)"),
        "{}",
        text(&second.stdout)
    );
    assert_eq!(common::check(dir.path(), CONFIG)["memories"], 3);
}

/// How often `needle` occurs in the files under `dir`, and in which files.
fn occurrences(dir: &Path, needle: &str) -> (usize, Vec<String>) {
    let (mut count, mut files) = (0, Vec::new());
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let here = bytes
                .windows(needle.len())
                .filter(|window| *window == needle.as_bytes())
                .count();
            if here > 0 {
                count += here;
                files.push(path.display().to_string());
            }
        }
    }
    (count, files)
}

#[test]
fn reimporting_adds_no_markdown_copies_and_brings_no_forgotten_text_back() {
    const SECRET: &str = "My bank PIN is 4417, keep it to yourself";
    const KEPT: &str = "The dentist appointment is on the ninth";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let lines = [
        event(Some("e1"), 0, KEPT),
        event(None, 1, SECRET),
        event(Some("e3"), 2, "Thanks, noted"),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let markdown = dir.path().join("data").join("markdown");
    for _ in 0..3 {
        let output = import(dir.path(), WITH_MARKDOWN, &file);
        assert!(output.status.success(), "{}", text(&output.stderr));
    }
    let (kept, files) = occurrences(&markdown, KEPT);
    assert_eq!(kept, 1, "one copy in the markdown mirror: {files:?}");
    assert_eq!(occurrences(&markdown, SECRET).0, 1);

    let hits = run(
        dir.path(),
        WITH_MARKDOWN,
        &["search", "bank PIN", "--user", "ana", "--json"],
    );
    let hits: Value = serde_json::from_slice(&hits.stdout).unwrap();
    let id = hits
        .as_array()
        .unwrap()
        .iter()
        .find(|hit| hit["content"] == SECRET)
        .and_then(|hit| hit["id"].as_str())
        .unwrap_or_else(|| panic!("the secret is stored: {hits}"))
        .to_owned();
    let forget = run(dir.path(), WITH_MARKDOWN, &["forget", &id]);
    assert!(forget.status.success(), "{}", text(&forget.stderr));
    assert_eq!(occurrences(&markdown, SECRET).0, 0, "forgotten everywhere");

    let again = import(dir.path(), WITH_MARKDOWN, &file);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("imported 0 conversation events (3 already present)"),
        "{}",
        text(&again.stdout)
    );
    let (secret, files) = occurrences(&dir.path().join("data"), SECRET);
    assert_eq!(secret, 0, "the forgotten text came back in {files:?}");
    assert_eq!(occurrences(&markdown, KEPT).0, 1);
}

/// Seed 000: "Link sessions to provider/chat_id/user_id". An imported turn's `provider` is its
/// session's, shown in the readable export; a malformed one is a problem named by its line and
/// by the field.
#[test]
fn an_imported_turns_provider_is_its_sessions_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let with_provider = |id: &str, minute: u32, provider: &str| {
        let mut line: Value =
            serde_json::from_str(&event(Some(id), minute, "We fly on Friday")).unwrap();
        line["provider"] = json!(provider);
        line.to_string()
    };
    let lines = [
        with_provider("e1", 0, "telegram"),
        with_provider("e2", 1, "tele\tgram"),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let output = import(dir.path(), CONFIG, &file);
    let stderr = text(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("events.jsonl:2:") && stderr.contains("`provider`"),
        "{stderr}"
    );
    let markdown = run(dir.path(), CONFIG, &["export", "--format", "markdown"]);
    let markdown = text(&markdown.stdout);
    assert!(
        markdown.contains("#### Session s1 (via telegram)"),
        "{markdown}"
    );
}

#[test]
fn the_markdown_export_keeps_turns_of_one_second_in_the_order_they_were_said() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let said = ["one", "two", "three", "four", "five", "six"];
    let lines: Vec<String> = said
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let kind = if index % 2 == 0 {
                "user_message"
            } else {
                "agent_response"
            };
            json!({"type": kind, "id": format!("e{index}"), "at": "2026-03-02T08:00:00Z",
                "session_id": "s1", "user_id": "ana", "text": format!("turn {text}")})
            .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let output = import(dir.path(), CONFIG, &file);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let markdown = text(&run(dir.path(), CONFIG, &["export", "--format", "markdown"]).stdout);
    let order: Vec<usize> = said
        .iter()
        .map(|word| {
            markdown
                .find(&format!("turn {word}\n"))
                .unwrap_or_else(|| panic!("turn {word} is exported: {markdown}"))
        })
        .collect();
    assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{markdown}");
}
