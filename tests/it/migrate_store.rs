//! `mnemo migrate-store` moves a store from SQLite to PostgreSQL and back without losing a
//! bit: the export of the original, of the PostgreSQL copy and of the SQLite copy made from it
//! are the same, byte for byte. A target that is not empty is refused and left as it was.

use std::path::Path;
use std::process::{Command, Output};

const CONFIG: &str = "[extensions.embedding]\nenabled = false\n[extensions.ner]\n\
    [extensions.memory]\ntools = \"all\"\n";

/// `mnemo` on `dir/data`, with the store in PostgreSQL when `database_url` is given.
fn mnemo(dir: &Path, database_url: Option<&str>, args: &[&str]) -> Output {
    let config = dir.join("config.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    match database_url {
        Some(url) => command.env("MNEMO_DATABASE_URL", url),
        None => command.env_remove("MNEMO_DATABASE_URL"),
    };
    command
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn succeeds(output: Output) -> String {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Two users' turns, people, facts with types, expiry and tags, a correction and a forgotten
/// memory: every table of the export has rows.
fn fill(dir: &Path) {
    let mut lines = String::new();
    for n in 0..30 {
        let (kind, text) = if n % 2 == 0 {
            (
                "user_message",
                format!("turn {n}: my sister Dana visits Lisbon with Tom in week {n}"),
            )
        } else {
            (
                "agent_response",
                format!("reply {n}: noted, Dana and Lisbon"),
            )
        };
        lines.push_str(&format!(
            "{{\"id\":\"evt-{n}\",\"type\":\"{kind}\",\"at\":\"2026-03-{:02}T10:{:02}:00Z\",\
             \"session_id\":\"s{}\",\"user_id\":\"{}\",\"text\":\"{text}\"}}\n",
            1 + n / 10,
            n % 60,
            n / 10,
            if n % 3 == 0 { "ben" } else { "ana" }
        ));
    }
    let file = dir.join("conversation.jsonl");
    std::fs::write(&file, lines).unwrap();
    succeeds(mnemo(dir, None, &["import", file.to_str().unwrap()]));
    for fact in [
        "Ana's sister Dana is vegetarian",
        "Ana's wifi password is hunter2 (temporary)",
        "Ana prefers window seats",
    ] {
        succeeds(mnemo(dir, None, &["remember", "--user", "ana", fact]));
    }
}

#[test]
fn sqlite_to_postgres_and_back_is_lossless() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let original = succeeds(mnemo(dir.path(), None, &["export"]));
    assert!(original.lines().count() > 40, "{original}");
    for table in [
        "memories",
        "entities",
        "memory_entities",
        "sessions_consolidations",
        "ingested_events",
    ] {
        assert!(
            original.contains(&format!("\"type\":\"{table}\"")),
            "the export has no {table} rows"
        );
    }

    let url = mnemo_pg_fixture::fresh_database();
    let sqlite = format!("sqlite:{}", dir.path().join("data/memory.db").display());
    let copied = succeeds(mnemo(
        dir.path(),
        None,
        &["migrate-store", "--from", &sqlite, "--to", &url],
    ));
    assert!(copied.starts_with("copied "), "{copied}");
    let from_postgres = succeeds(mnemo(dir.path(), Some(&url), &["export"]));
    assert_eq!(from_postgres, original);

    // Back into a data directory that does not exist yet: it is made.
    let back_dir = tempfile::tempdir().unwrap();
    let back_location = format!(
        "sqlite:{}",
        back_dir.path().join("data/memory.db").display()
    );
    succeeds(mnemo(
        dir.path(),
        None,
        &["migrate-store", "--from", &url, "--to", &back_location],
    ));
    let from_back = succeeds(mnemo(back_dir.path(), None, &["export"]));
    assert_eq!(from_back, original);

    // Into a store that holds other rows: refused, and the target is unchanged.
    let other = tempfile::tempdir().unwrap();
    succeeds(mnemo(
        other.path(),
        None,
        &["remember", "--user", "zoe", "Zoe keeps bees"],
    ));
    let other_before = succeeds(mnemo(other.path(), None, &["export"]));
    let other_location = format!("sqlite:{}", other.path().join("data/memory.db").display());
    let refused = mnemo(
        dir.path(),
        None,
        &["migrate-store", "--from", &url, "--to", &other_location],
    );
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("not empty"), "{message}");
    assert_eq!(
        succeeds(mnemo(other.path(), None, &["export"])),
        other_before
    );

    // A location that is neither: named in the error.
    let wrong = mnemo(
        dir.path(),
        None,
        &["migrate-store", "--from", "memory.db", "--to", &url],
    );
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("sqlite:PATH"));
}
