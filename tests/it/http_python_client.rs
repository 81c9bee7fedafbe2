//! The Python client example (`examples/python/mnemo_client.py`) against a real `mnemo serve`:
//! it ingests its conversation, finds a fact from it with its reasons, and prints a context.
//! httpx comes from the pinned virtualenv of `scripts/http-tools` (python3 with venv and pip
//! needed, as `make test` has).

use std::path::PathBuf;
use std::process::Command;

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

fn run_client(url: &str, key: &str, args: &[&str]) -> (bool, String, String) {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(repo.join("scripts/http-tools"))
        .arg("python")
        .arg(repo.join("examples/python/mnemo_client.py"))
        .args(args)
        .env("MNEMO_URL", url)
        .env("MNEMO_API_KEY", key)
        .output()
        .expect("cannot run scripts/http-tools");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_python_client_ingests_a_conversation_and_finds_a_fact_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let key = create_key(dir.path(), &["--user", "ana"]);

    let (ok, stdout, stderr) = run_client(
        &served.url,
        &key,
        &[
            "--query",
            "which instrument does Clara play",
            "--batch",
            "4",
        ],
    );
    assert!(ok, "the client failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("ingested 10 events from conversation.jsonl: 10 stored, 0 stored before"),
        "{stdout}"
    );
    // The best hit is the turn that says it, with the list that found it.
    let hits: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("hit "))
        .collect();
    assert!(
        hits.first()
            .is_some_and(|hit| hit
                .contains("My daughter Clara plays the cello in the Porto youth orchestra")),
        "{stdout}"
    );
    assert!(stdout.contains("    fts: rank 1, score "), "{stdout}");
    assert!(stdout.contains("confidence weight"), "{stdout}");
    let context = stdout
        .split("\ncontext block:\n")
        .nth(1)
        .unwrap_or_default();
    // The people the conversation named, as memory knows them.
    assert!(
        context.contains("Clara") && context.contains("daughter"),
        "{stdout}"
    );

    // Again: idempotent by event id.
    let (ok, stdout, stderr) = run_client(&served.url, &key, &[]);
    assert!(ok, "the client failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("0 stored, 10 stored before"), "{stdout}");

    // A wrong key: the server's error, named, and exit status 1.
    let (ok, _, stderr) = run_client(&served.url, "mnemo_nope", &[]);
    assert!(!ok);
    assert!(stderr.contains("HTTP 401 (unauthorized)"), "{stderr}");
}
