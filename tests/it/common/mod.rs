//! What several tests share: the `mnemo` binary run on a temporary directory, and the name of a
//! test for running this binary again on it alone.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The name libtest gives the test `test` of the module `module` (its `module_path!()`): the
/// path without this binary's crate name, for running this binary again on that test alone with
/// `--exact` (the tests that are their own child processes do).
pub(crate) fn test_name(module: &str, test: &str) -> String {
    let path = module.split_once("::").map_or("", |(_, rest)| rest);
    format!("{path}::{test}")
}

/// `mnemo` with `config` written to `dir/config.toml` and `dir/data` as its data directory,
/// and no logging or model settings taken from the environment.
pub(crate) fn mnemo(dir: &Path, config: &str) -> Command {
    std::fs::write(dir.join("config.toml"), config).unwrap();
    mnemo_in(dir)
}

/// `mnemo` on `dir` as [`mnemo`] sets it up, with the `dir/config.toml` written before (so that
/// processes started at once never read a half-written file).
pub(crate) fn mnemo_in(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    command
        .arg("--config")
        .arg(dir.join("config.toml"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove("RUST_LOG")
        .env_remove("MNEMO_DATABASE_URL")
        .env_remove("MNEMO_LLM_BASE_URL")
        .env_remove("MNEMO_LLM_API_KEY")
        .env_remove("MNEMO_LLM_MODEL");
    command
}

/// `mnemo check --json` on the store of `dir`: the integrity report.
#[allow(dead_code)] // Not every test binary that includes this module checks a store.
pub(crate) fn check(dir: &Path, config: &str) -> serde_json::Value {
    let output = mnemo(dir, config)
        .args(["check", "--json"])
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs `command` with `input` on its standard input, and waits for its output.
#[allow(dead_code)] // Not every test binary that includes this module feeds input.
pub(crate) fn run_with_input(mut command: Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[allow(dead_code)] // Only the HTTP tests start a server.
pub(crate) mod probes;
pub(crate) mod server;

#[allow(dead_code)] // Only the inspector's test drives a browser.
pub(crate) mod browser;
