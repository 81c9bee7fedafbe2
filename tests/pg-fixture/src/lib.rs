//! Throwaway PostgreSQL databases for tests. The first call in a process starts the shared test
//! server with `scripts/postgres start` (which installs PostgreSQL and pgvector from PyPI the
//! first time, and reuses a server that already runs), in
//! `${CARGO_TARGET_DIR:-target}/tools/pg-tests`; every call then creates a new, empty database
//! there and returns its URL, so that tests never see each other's rows. `make test` discards
//! the server and its databases when the tests end (`scripts/postgres discard DIR`).
//!
//! A failure to start the server panics with the script's own words: a test that needs
//! PostgreSQL fails rather than passing without it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the shared test server lives.
pub fn server_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target"));
    target.join("tools/pg-tests")
}

/// The shared server's URL (of its database `mnemo`), starting it if needed.
///
/// # Panics
/// The server cannot be installed or started.
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let output = Command::new(repository().join("scripts/postgres"))
            .arg("start")
            .arg(server_dir())
            .output()
            .expect("scripts/postgres runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "scripts/postgres start failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
            .lines()
            .last()
            .filter(|line| line.starts_with("postgres://"))
            .expect("scripts/postgres prints the URL last")
            .to_owned()
    })
}

/// The URL of a new, empty database on the shared server.
///
/// # Panics
/// The server cannot be started, or the database cannot be created.
pub fn fresh_database() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let server = server_url();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or_default();
    let name = format!(
        "t{}_{}_{nanos}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    );
    let (base, _) = server
        .rsplit_once('/')
        .expect("a postgres:// URL names its database");
    let status = Command::new("psql")
        .arg(server)
        .args(["--quiet", "--no-psqlrc", "--command"])
        .arg(format!("CREATE DATABASE {name}"))
        .env("PATH", psql_path())
        .status()
        .expect("psql runs");
    assert!(status.success(), "cannot create the database {name}");
    format!("{base}/{name}")
}

/// `PATH` with the server's own programs first.
fn psql_path() -> String {
    static BIN: OnceLock<String> = OnceLock::new();
    let bin = BIN.get_or_init(|| {
        let output = Command::new(repository().join("scripts/postgres"))
            .arg("bin")
            .output()
            .expect("scripts/postgres runs");
        assert!(output.status.success(), "scripts/postgres bin failed");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    });
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

/// Every row of the database at `url`, as `pg_dump --data-only` writes it.
///
/// # Panics
/// `pg_dump` fails.
pub fn dump(url: &str) -> String {
    let output = Command::new("pg_dump")
        .args(["--data-only", "--no-owner"])
        .arg(url)
        .env("PATH", psql_path())
        .output()
        .expect("pg_dump runs");
    assert!(
        output.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The rows `sql` returns from the database at `url`, one line each with `|` between columns.
///
/// # Panics
/// `psql` fails.
pub fn query(url: &str, sql: &str) -> String {
    let output = Command::new("psql")
        .arg(url)
        .args([
            "--no-psqlrc",
            "--tuples-only",
            "--no-align",
            "--command",
            sql,
        ])
        .env("PATH", psql_path())
        .output()
        .expect("psql runs");
    assert!(
        output.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
