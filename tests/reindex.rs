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
