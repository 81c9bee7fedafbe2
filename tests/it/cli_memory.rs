//! The memory commands as a user runs them: `chat` against a local OpenAI-compatible HTTP
//! server through a tool-calling turn, and `remember` / `search` / `forget` / `restore` /
//! `stats`.

use std::io::Write;
use std::process::{Command, Stdio};

use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use serde_json::{json, Value};

use crate::common;

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n";

fn mnemo(dir: &std::path::Path) -> Command {
    common::mnemo(dir, CONFIG)
}

fn text_reply(text: &str) -> CannedAnswer {
    CannedAnswer::json(
        &json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_runs_a_tool_calling_turn_and_the_next_prompt_holds_the_fact() {
    let server = HttpTestServer::start(vec![
        CannedAnswer::json(&json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "remember_fact", "arguments": "{\"content\":\"Ana drinks her coffee with oat milk\"}"}}
        ]}, "finish_reason": "tool_calls"}]})),
        text_reply("Noted: oat milk."),
        text_reply("With oat milk, as you told me."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let base_url = server.base_url.clone();
    let path = dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = mnemo(&path)
            .args(["chat", "--user", "ana"])
            .env("MNEMO_LLM_BASE_URL", &base_url)
            .env("MNEMO_LLM_MODEL", "test-model")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(
                b"Remember that I take oat milk in my coffee\n/new\nHow do I take my coffee?\n",
            )
            .unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("[remember_fact"), "{stdout}");
    assert!(stdout.contains("Noted: oat milk."), "{stdout}");
    // Seed 002: /new is answered "Session cleared." without the model.
    assert!(
        stdout.contains("Session cleared. (new session "),
        "{stdout}"
    );
    assert!(
        stdout.contains("With oat milk, as you told me."),
        "{stdout}"
    );

    let received = server.received();
    assert_eq!(received.len(), 3, "three model calls");
    let offered = received[0].body["tools"].as_array().map_or(0, Vec::len);
    assert!(
        offered >= 6,
        "the memory tools are offered to the model, saw {offered}"
    );
    // The third call is the new session's first turn: its system prompt holds the stored fact.
    let system = received[2].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("## Relevant memory"), "{system}");
    assert!(system.contains("oat milk"), "{system}");
}

#[test]
fn remember_search_forget_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = mnemo(dir.path()).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let saved: Value = serde_json::from_str(&run(&[
        "remember",
        "My wife Sarah loves jazz",
        "--user",
        "ana",
        "--subject",
        "my wife",
        "--json",
    ]))
    .unwrap();
    assert_eq!(saved["subjects"], json!(["Sarah"]));
    run(&["remember", "Ben collects stamps", "--user", "ben"]);
    let hits: Value =
        serde_json::from_str(&run(&["search", "jazz", "--user", "ana", "--json"])).unwrap();
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 1);
    for field in ["id", "kind", "content", "score"] {
        assert!(hits[0].get(field).is_some(), "search JSON lacks {field}");
    }
    assert_eq!(hits[0]["content"], "My wife Sarah loves jazz");
    let others: Value =
        serde_json::from_str(&run(&["search", "stamps", "--user", "ana", "--json"])).unwrap();
    assert_eq!(others, json!([]), "Ana never sees Ben's memories");
    let stats: Value = serde_json::from_str(&run(&["stats", "--json"])).unwrap();
    assert_eq!(stats["counts"]["fact"], 2);
    let id = hits[0]["id"].as_str().unwrap();
    assert!(run(&["forget", id]).contains("forgot"));
    let output = mnemo(dir.path()).args(["forget", id]).output().unwrap();
    assert!(!output.status.success(), "forgetting twice fails");
    assert!(String::from_utf8_lossy(&output.stderr).contains("no memory"));
    let stats: Value = serde_json::from_str(&run(&["stats", "--json"])).unwrap();
    assert_eq!(stats["counts"]["fact"], 1);
}

/// Under `forget = "soft"` (the reference design's "never physically removed"), `mnemo forget`
/// hides a memory and keeps its row; `mnemo restore` brings it back, and `--purge` removes it
/// for good, after which there is nothing to restore.
#[test]
fn a_soft_forget_is_restored_by_an_admin_and_purged_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{CONFIG}forget = \"soft\"\n");
    let run = |args: &[&str]| {
        common::mnemo(dir.path(), &config)
            .args(args)
            .output()
            .unwrap()
    };
    let ok = |args: &[&str]| {
        let output = run(args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let search = |query: &str| -> Vec<Value> {
        let hits: Value =
            serde_json::from_str(&ok(&["search", query, "--user", "ana", "--json"])).unwrap();
        hits.as_array().unwrap().clone()
    };
    ok(&["remember", "Ana's bike lock code is 8812", "--user", "ana"]);
    let hits = search("bike lock code");
    assert_eq!(hits.len(), 1);
    let id = hits[0]["id"].as_str().unwrap().to_owned();

    assert!(ok(&["forget", &id]).contains("soft-deleted"));
    assert!(search("bike lock code").is_empty(), "forgotten: not found");
    let again = run(&["forget", &id]);
    assert!(
        !again.status.success(),
        "a soft-deleted memory is not active"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("--purge"));

    assert!(ok(&["restore", &id]).contains("restored"));
    let hits = search("bike lock code");
    assert_eq!(hits.len(), 1, "restored: found again");
    assert_eq!(hits[0]["id"], id.as_str());
    let twice = run(&["restore", &id]);
    assert!(!twice.status.success(), "an active memory is not restored");

    ok(&["forget", &id]);
    assert!(ok(&["forget", &id, "--purge"]).contains("removed"));
    let gone = run(&["restore", &id]);
    assert!(!gone.status.success(), "purged: nothing to restore");
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no soft-deleted memory"));
    let stats: Value = serde_json::from_str(&ok(&["stats", "--json"])).unwrap();
    assert_eq!(stats["counts"]["fact"].as_u64().unwrap_or(0), 0, "{stats}");
}

#[test]
fn chat_without_a_model_says_how_to_configure_one() {
    let dir = tempfile::tempdir().unwrap();
    let output = mnemo(dir.path())
        .arg("chat")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no LLM is configured"), "{stderr}");
    assert!(stderr.contains("MNEMO_LLM_BASE_URL"), "{stderr}");
}

/// `mnemo ingest` with `input` on its standard input.
fn ingest(dir: &std::path::Path, input: &str) -> std::process::Output {
    let mut command = mnemo(dir);
    command.arg("ingest");
    common::run_with_input(command, input.as_bytes())
}

#[test]
fn ingest_acknowledges_each_event_and_names_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let good = json!({"type": "user_message", "id": "e1", "at": "2026-03-02T08:00:00Z",
        "session_id": "s1", "user_id": "ana", "text": "The boiler was serviced on Monday"});
    let input = format!(
        "{good}\nnot json\n{}\n{good}\n",
        json!({"type": "user_message", "at": "2026-03-02T08:01:00Z", "session_id": "s1",
            "user_id": "ana", "text": "no id here"})
    );
    let output = ingest(dir.path(), &input);
    assert!(!output.status.success(), "bad lines make the run fail");
    let replies: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(replies.len(), 4, "{replies:?}");
    assert_eq!(replies[0]["ack"], "e1");
    assert!(replies[0]["memory_id"].is_string());
    assert_eq!(replies[1]["line"], 2);
    assert!(replies[1]["error"].as_str().unwrap().contains("not JSON"));
    assert!(replies[2]["error"].as_str().unwrap().contains("no `id`"));
    assert_eq!(
        replies[3],
        json!({"ack": "e1", "memory_id": null}),
        "stored once"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("stdin:2"), "{stderr}");

    let check = mnemo(dir.path()).args(["check"]).output().unwrap();
    assert!(check.status.success());
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("1 memories (1 active)") && report.ends_with("ok\n"),
        "{report}"
    );

    // Forgotten, the memory stays forgotten when its event is sent again, and the store is
    // still consistent.
    let memory_id = replies[0]["memory_id"].as_str().unwrap();
    let forget = mnemo(dir.path())
        .args(["forget", memory_id])
        .output()
        .unwrap();
    assert!(forget.status.success());
    let again = ingest(dir.path(), &format!("{good}\n"));
    assert!(again.status.success());
    let reply: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(reply, json!({"ack": "e1", "memory_id": null}));
    let check = mnemo(dir.path())
        .args(["check", "--json"])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let report: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(
        (
            report["memories"].clone(),
            report["forgotten_events"].clone()
        ),
        (json!(0), json!(1))
    );
}

/// A turn whose model fails after its tool calls ran: the error goes to stderr, and stdout still
/// shows the calls that ran (the fact is saved, and the user should know).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_reports_the_tool_calls_of_a_failed_turn_and_its_error_on_stderr() {
    let server = HttpTestServer::start(vec![
        CannedAnswer::json(&json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "remember_fact", "arguments": "{\"content\":\"Ana's sister is called Inés\"}"}}
        ]}, "finish_reason": "tool_calls"}]})),
        CannedAnswer::raw(500, "{\"error\":\"model crashed\"}"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let base_url = server.base_url.clone();
    let path = dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = mnemo(&path);
        command
            .args(["chat", "--user", "ana"])
            .env("MNEMO_LLM_BASE_URL", &base_url)
            .env("MNEMO_LLM_MODEL", "test-model");
        common::run_with_input(command, b"My sister is called Ines\n")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a failed turn fails the run");
    assert!(
        stdout.contains("[remember_fact") && stdout.contains("Inés"),
        "the call that ran is shown: {stdout}"
    );
    assert!(!stdout.contains("mnemo:"), "no error on stdout: {stdout}");
    assert!(
        stderr.contains("model crashed") && stderr.contains("after 1 tool calls"),
        "{stderr}"
    );
    // Piped, there is no prompt and no activity sign to clutter a script's output.
    assert!(!stdout.contains("> "), "{stdout}");
    assert!(!stderr.contains("thinking"), "{stderr}");
}

/// At a terminal (here a pseudo-terminal from util-linux `script`), chat prompts for each line
/// and shows that it is waiting for the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_at_a_terminal_prompts_and_shows_it_is_thinking() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` command to run chat on a pseudo-terminal");
        return;
    }
    let server = HttpTestServer::start(vec![
        text_reply("Hello Ana.").delayed(std::time::Duration::from_millis(300))
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), CONFIG).unwrap();
    let command_line = format!(
        "'{}' --config '{}' --data-dir '{}' chat --user ana",
        env!("CARGO_BIN_EXE_mnemo"),
        dir.path().join("config.toml").display(),
        dir.path().join("data").display()
    );
    let base_url = server.base_url.clone();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = Command::new("script");
        command
            .args(["-qec", &command_line, "/dev/null"])
            .env_remove("RUST_LOG")
            .env("MNEMO_LLM_BASE_URL", &base_url)
            .env("MNEMO_LLM_MODEL", "test-model");
        common::run_with_input(command, b"hi\n\n")
    })
    .await
    .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{shown}");
    let reply = shown.find("Hello Ana.").expect("the reply is shown");
    let prompt = shown.find("> ").expect("a prompt is shown");
    let thinking = shown
        .find("thinking…")
        .expect("a sign of activity is shown");
    assert!(prompt < thinking && thinking < reply, "{shown}");
}

/// The command line's `remember` and `search` work whatever tools the model is offered: with
/// seed 000's profile there is no `search_memory` tool, with the reference one no `remember`.
#[test]
fn remember_and_search_do_not_depend_on_the_model_s_tool_profile() {
    for profile in ["people", "reference", "typed"] {
        let dir = tempfile::tempdir().unwrap();
        let config = CONFIG.replace("tools = \"all\"", &format!("tools = \"{profile}\""));
        assert!(config.contains(profile));
        let run = |args: &[&str]| {
            let output = common::mnemo(dir.path(), &config)
                .args(args)
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{profile} {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8_lossy(&output.stdout).to_string()
        };
        run(&[
            "remember",
            "Ana's bike is a green Brompton",
            "--user",
            "ana",
        ]);
        let hits: Value =
            serde_json::from_str(&run(&["search", "Brompton", "--user", "ana", "--json"])).unwrap();
        assert_eq!(
            hits[0]["content"], "Ana's bike is a green Brompton",
            "{profile}: {hits}"
        );
    }
}
