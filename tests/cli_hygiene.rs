//! The command line's smaller promises: stored text cannot drive the terminal.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

fn run(dir: &Path, config: &str, args: &[&str]) -> Output {
    common::mnemo(dir, config).args(args).output().unwrap()
}

/// Runs `args` and returns standard output; the command must succeed.
fn ok(dir: &Path, config: &str, args: &[&str]) -> String {
    let output = run(dir, config, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The control characters in `text` other than newline.
fn controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect()
}

#[test]
fn stored_escape_sequences_reach_the_terminal_only_as_visible_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "Ana's colour is \u{1b}[31mred\u{1b}[0m\u{1b}]0;owned\u{7}\rand \u{9b}2J more";
    ok(
        dir.path(),
        CONFIG,
        &["remember", hostile, "--user", "ana", "--subject", "Ana"],
    );

    let listing = ok(dir.path(), CONFIG, &["search", "colour", "--user", "ana"]);
    assert_eq!(controls(&listing), Vec::<char>::new(), "{listing:?}");
    assert!(
        listing.contains(r"Ana's colour is \e[31mred\e[0m\e]0;owned\u{7}\rand \u{9b}2J more"),
        "{listing}"
    );
    assert_eq!(listing.lines().count(), 1, "one line per hit: {listing}");

    // JSON stays exact: the text comes back byte for byte.
    let hits: Value = serde_json::from_str(&ok(
        dir.path(),
        CONFIG,
        &["search", "colour", "--user", "ana", "--json"],
    ))
    .unwrap();
    assert_eq!(hits[0]["content"], hostile);

    let markdown = ok(dir.path(), CONFIG, &["export", "--format", "markdown"]);
    assert_eq!(controls(&markdown), Vec::<char>::new(), "{markdown:?}");
    assert!(markdown.contains(r"\e[31mred\e[0m"), "{markdown}");
}
