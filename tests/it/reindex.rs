//! `mnemo reindex` embeds memories stored while no embedding model was available, and a
//! `--all` re-index rebuilds every vector; semantic search works afterwards.

use std::path::Path;
use std::process::Command;

fn mnemo(dir: &Path, config: &str, args: &[&str]) -> (bool, String, String) {
    let path = dir.join("config.toml");
    std::fs::write(&path, config).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

const WITHOUT: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";
const WITH: &str = "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n";

#[test]
fn reindex_embeds_what_was_stored_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    for fact in [
        "my spouse enjoys pasta",
        "the printer on floor three is broken",
        "budget review moved to Thursday",
    ] {
        let (ok, _, stderr) = mnemo(dir.path(), WITHOUT, &["remember", fact, "--user", "ana"]);
        assert!(ok, "{stderr}");
    }
    let (_, stats, _) = mnemo(dir.path(), WITHOUT, &["stats", "--json"]);
    assert!(stats.contains("\"pending_index\":3"), "{stats}");
    // Without a model, reindex says why and fails.
    let (ok, _, stderr) = mnemo(dir.path(), WITHOUT, &["reindex"]);
    assert!(!ok);
    assert!(
        stderr.contains("embedding extension is not enabled"),
        "{stderr}"
    );

    let (ok, stdout, stderr) = mnemo(dir.path(), WITH, &["reindex"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("reindexed"), "{stdout}");
    let (_, stats, _) = mnemo(dir.path(), WITH, &["stats", "--json"]);
    assert!(stats.contains("\"pending_index\":0"), "{stats}");
    let (_, hits, _) = mnemo(
        dir.path(),
        WITH,
        &[
            "search",
            "what food does my wife like",
            "--user",
            "ana",
            "--json",
        ],
    );
    assert!(
        hits.contains("spouse enjoys pasta"),
        "found by meaning after reindex: {hits}"
    );

    let (ok, stdout, stderr) = mnemo(dir.path(), WITH, &["reindex", "--all"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("reindexed 3 memories"), "{stdout}");
}

#[test]
fn reindex_counts_what_the_background_indexer_embedded_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    // Enough memories, one per batch, that the background indexer (it wakes every 5 seconds)
    // takes over part of the queue while reindex works through it.
    let count = 300;
    let events: String = (0..count)
        .map(|n| {
            format!(
                "{{\"id\":\"e{n}\",\"type\":\"user_message\",\"at\":\"2026-03-02T08:00:00Z\",\"session_id\":\"s1\",\"user_id\":\"ana\",\"text\":\"note {n}: the delivery for order {n} comes by van on the afternoon of day {n}\"}}\n"
            )
        })
        .collect();
    let file = dir.path().join("events.jsonl");
    std::fs::write(&file, events).unwrap();
    let (ok, _, stderr) = mnemo(dir.path(), WITHOUT, &["import", file.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let one_per_batch = format!("{WITH}index_batch_size = 1\n");
    let started = std::time::Instant::now();
    let (ok, stdout, stderr) = mnemo(dir.path(), &one_per_batch, &["reindex"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(&format!("reindexed {count} memories")),
        "{stdout} (after {:?})",
        started.elapsed()
    );
    let (_, stats, _) = mnemo(dir.path(), WITH, &["stats", "--json"]);
    assert!(stats.contains("\"pending_index\":0"), "{stats}");
}
