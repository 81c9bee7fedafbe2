//! Markdown session buffers are keyed by user, chat and session (issue #17), and a model's
//! rewrite of MEMORY.md never silently deletes content (issue #23): each replay scenario, run by
//! the real binary on the shipped config, is its own test case.

use std::process::Command;

/// Replays one scenario of `tests/scenarios/`; every expectation must hold.
fn replay(scenario: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .args(["--config", "config.toml", "replay"])
        .arg(format!("tests/scenarios/{scenario}"))
        .output()
        .expect("mnemo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success() && last.ends_with(" passed, 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn two_users_who_reuse_a_session_id_do_not_share_it() {
    replay("markdown_shared_session_id.jsonl");
}

#[test]
fn a_users_session_in_one_chat_is_not_their_session_in_another() {
    replay("markdown_session_per_chat.jsonl");
}

#[test]
fn a_consolidation_keeps_hand_written_lines_and_the_previous_memory() {
    replay("markdown_memory_history.jsonl");
}
