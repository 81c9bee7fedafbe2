//! The store commands (`stats`, `check`, `export`, `forget`, `forget-user`, `jobs list`,
//! `jobs retry`) neither load the embedding model nor start the scheduler: they read or delete
//! what is stored, at once, and no job comes due while they run. `check` still reports the
//! vectors, from the store.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::common;

/// The model that `scripts/fetch-model` installs, which stores the vectors first.
const WITH_MODEL: &str = "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n";

/// A model directory that does not exist (any attempt to load it names it in a warning), an
/// every-second job, maintenance's jobs and the markdown mirror, which follows a `forget`.
fn unloadable(dir: &Path) -> String {
    format!(
        "[extensions.embedding]\nmodel_dir = \"{}\"\n[extensions.ner]\n[extensions.memory]\n\
         expiry_cron = \"* * * * * *\"\n[extensions.memory_maintenance]\n\
         [extensions.markdown_memory]\n",
        dir.join("no-model-here").display()
    )
}

/// `mnemo -v ARGS` (logging at info) on `dir`'s store with `config`.
fn run(dir: &Path, config: &str, args: &[&str]) -> Output {
    common::mnemo(dir, config)
        .arg("-v")
        .args(args)
        .output()
        .unwrap()
}

/// What a kernel start that loads the model or starts the scheduler writes at info level.
fn loads_or_schedules(stderr: &str) -> Vec<&'static str> {
    ["no-model-here", "local embedding", "cron scheduler started"]
        .into_iter()
        .filter(|marker| stderr.contains(marker))
        .collect()
}

#[test]
fn store_commands_neither_load_the_model_nor_start_the_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    // A fact with its vector, stored with the real model; and one of Bob's.
    let output = run(
        path,
        WITH_MODEL,
        &["remember", "Ana's locker is 212", "--user", "ana", "--json"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let saved: Value = serde_json::from_slice(&output.stdout).unwrap();
    let id = saved["id"].as_str().unwrap().to_owned();
    let output = run(
        path,
        WITH_MODEL,
        &["remember", "Bob likes tea", "--user", "bob"],
    );
    assert!(output.status.success());

    let config = unloadable(path);
    // The markers are real: a command that searches loads the model and schedules the jobs.
    let output = run(path, &config, &["search", "locker", "--user", "ana"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        loads_or_schedules(&stderr),
        ["no-model-here", "local embedding", "cron scheduler started"],
        "{stderr}"
    );

    // `check` reports the vector stored with the model, without it.
    let output = run(path, &config, &["check", "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["vectors"], 2, "{report}");
    assert_eq!(loads_or_schedules(&stderr), Vec::<&str>::new(), "{stderr}");

    let expectations: [(&[&str], &str); 6] = [
        (&["stats"], "facts 2"),
        (&["export"], "Ana's locker is 212"),
        (&["jobs", "list"], "expire_memories"),
        (&["jobs", "retry"], "0 sessions and 0 memories"),
        (&["forget-user", "bob"], "erased user bob: 1 memories"),
        (&["forget", &id], "forgot"),
    ];
    for (args, expected) in expectations {
        let output = run(path, &config, args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}");
        assert!(stdout.contains(expected), "{args:?}: {stdout}");
        assert_eq!(
            loads_or_schedules(&stderr),
            Vec::<&str>::new(),
            "{args:?}: {stderr}"
        );
        // Nor does the model's absence make memory warn: it is not missing, only not loaded.
        assert!(!stderr.contains("WARN"), "{args:?}: {stderr}");
        assert!(!stderr.contains("job done"), "{args:?} ran a job: {stderr}");
    }
    let output = run(path, &config, &["stats", "--json"]);
    let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["counts"]["fact"], 0, "{stats}");
}

/// The README's example: `examples/lineage.jsonl` imported, its first turn forgotten with what
/// was derived from it, and the receipt printed as JSON.
#[test]
fn the_readme_forget_takes_what_was_derived_and_prints_the_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lineage.jsonl");
    let imported = run(dir.path(), config, &["import", example.to_str().unwrap()]);
    assert!(imported.status.success(), "{imported:?}");
    let forgot = run(dir.path(), config, &["forget", "ep_locker", "--json"]);
    assert!(forgot.status.success(), "{forgot:?}");
    let receipt: Value = serde_json::from_slice(&forgot.stdout).unwrap();
    let entries = |list: &str| -> Vec<String> {
        receipt[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| {
                format!(
                    "{} {}",
                    entry["id"].as_str().unwrap(),
                    entry["why"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        entries("removed"),
        [
            "ep_locker forgotten",
            "fact_code all_sources_forgotten",
            "fact_door not_grounded_without_source",
            "ref_week built_on_removed",
        ]
    );
    assert_eq!(entries("changed"), ["fact_gym lost_sources"]);
    assert_eq!(receipt["changed"][0]["lost_sources"], json!(["ep_locker"]));
    assert!(
        !String::from_utf8_lossy(&forgot.stdout).contains("4411"),
        "no content"
    );
    let again = run(dir.path(), config, &["forget", "ep_locker"]);
    assert!(!again.status.success(), "gone: {again:?}");
}

/// Under `forget = "soft"`, `mnemo restore` of the turn a forget asked for undoes that forget:
/// what it soft-deleted with it comes back, and the fact it changed gets its source back.
#[test]
fn restoring_a_soft_forget_brings_back_what_it_took() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n\
                  [extensions.memory]\nforget = \"soft\"\n";
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lineage.jsonl");
    let imported = run(dir.path(), config, &["import", example.to_str().unwrap()]);
    assert!(imported.status.success(), "{imported:?}");
    let forgot = run(dir.path(), config, &["forget", "ep_locker"]);
    assert!(forgot.status.success(), "{forgot:?}");
    let printed = String::from_utf8_lossy(&forgot.stdout);
    assert!(
        printed.contains("changed fact fact_gym (lost_sources: ep_locker)"),
        "{printed}"
    );
    let searched = run(
        dir.path(),
        config,
        &["search", "--user", "ana", "locker code"],
    );
    let found = String::from_utf8_lossy(&searched.stdout);
    assert!(!found.contains("fact_code"), "soft-deleted: {found}");

    let restored = run(dir.path(), config, &["restore", "ep_locker"]);
    assert!(restored.status.success(), "{restored:?}");
    let printed = String::from_utf8_lossy(&restored.stdout);
    for line in [
        "restored ep_locker: active again",
        "  restored fact_code (its forget took it with ep_locker)",
        "  restored fact_door (its forget took it with ep_locker)",
        "  restored ref_week (its forget took it with ep_locker)",
        "  sources back: fact_gym",
    ] {
        assert!(printed.contains(line), "{line:?} in {printed}");
    }
    let searched = run(
        dir.path(),
        config,
        &["search", "--user", "ana", "locker code"],
    );
    let found = String::from_utf8_lossy(&searched.stdout);
    assert!(found.contains("fact_code"), "back: {found}");
    let again = run(dir.path(), config, &["restore", "ep_locker"]);
    assert!(
        !again.status.success(),
        "nothing left to restore: {again:?}"
    );
}
