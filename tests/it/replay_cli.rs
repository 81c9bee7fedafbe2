//! `mnemo replay` and `mnemo demo` as a user runs them: the real binary, real files.

use std::path::Path;
use std::process::Command;

fn mnemo() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command.env_remove("RUST_LOG");
    command
}

fn scenario_files() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .map(|path| path.display().to_string())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenarios under tests/scenarios");
    files
}

#[test]
fn every_scenario_passes() {
    let output = mnemo()
        .args(["--config", "config.toml", "replay"])
        .args(scenario_files())
        .output()
        .expect("mnemo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        last.ends_with(" passed, 0 failed"),
        "last line: {last}\n{stdout}"
    );
    let passed: usize = last.split(' ').next().unwrap().parse().unwrap();
    assert!(
        passed >= 30,
        "the scenarios hold at least 30 expectations, saw {passed}"
    );
}

#[test]
fn a_failing_expectation_makes_replay_exit_non_zero() {
    let output = mnemo()
        .args(["replay", "tests/fixtures/failing.jsonl"])
        .output()
        .expect("mnemo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some("1 passed, 1 failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL line 4: expect_count tools: expected 3"),
        "{stdout}"
    );
}

#[test]
fn a_malformed_line_is_reported_and_other_scenarios_still_run() {
    let output = mnemo()
        .args([
            "replay",
            "tests/fixtures/malformed.jsonl",
            "tests/scenarios/virtual_clock.jsonl",
        ])
        .output()
        .expect("mnemo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stdout.contains("FAIL line 3: parse: malformed line"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tests/scenarios/virtual_clock.jsonl: 7 passed, 0 failed"),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some("7 passed, 1 failed"),
        "{stdout}"
    );
}

#[test]
fn a_missing_scenario_file_is_a_failure_not_a_crash() {
    let output = mnemo()
        .args(["replay", "tests/fixtures/does-not-exist.jsonl"])
        .output()
        .expect("mnemo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success());
    assert!(stdout.contains("cannot read"), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("0 passed, 1 failed"));
}

#[test]
fn demo_runs_and_shows_what_happened() {
    let output = mnemo().arg("demo").output().expect("mnemo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    for shown in [
        "user [ana/mon]: My wife Sarah",
        "job execute_consolidation: 1 sessions consolidated",
        "job execute_reflection: 1 reflections written",
        "faded",
        "## Relevant memory",
        "Sarah is vegetarian",
        "## Weekly insight",
        "nightly job runs that found nothing to do are not shown",
    ] {
        assert!(stdout.contains(shown), "missing {shown:?} in:\n{stdout}");
    }
    assert!(stdout.trim_end().ends_with(" passed, 0 failed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_uses_a_configured_model_instead_of_scripted_replies() {
    use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
    let reply = |text: &str| {
        CannedAnswer::json(
            &serde_json::json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}),
        )
    };
    let server = HttpTestServer::start(vec![
        reply("{\"facts\": [{\"content\": \"Ana's wife Sarah is vegetarian\"}]}"),
        reply("{\"facts\": []}"),
        reply("{\"contradictions\": []}"),
        reply("{\"facts\": []}"),
        reply("{\"contradictions\": []}"),
        reply("A quiet week of trip planning."),
    ])
    .await;
    let base_url = server.base_url.clone();
    let output = tokio::task::spawn_blocking(move || {
        mnemo()
            .arg("demo")
            .env("MNEMO_LLM_BASE_URL", &base_url)
            .env("MNEMO_LLM_MODEL", "local-test-model")
            .output()
            .expect("mnemo runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("Using the configured model local-test-model"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the scripted reply is not used"),
        "{stdout}"
    );
    let received = server.received();
    assert!(!received.is_empty(), "the demo called the configured model");
    assert_eq!(received[0].body["model"], "local-test-model");
}
