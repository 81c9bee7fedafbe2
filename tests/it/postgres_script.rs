//! `scripts/postgres`: a real PostgreSQL server with pgvector, installed from PyPI by the
//! project's own script, started on a loopback port and stopped again. The PostgreSQL backend
//! (issue #20) is tested against servers started this way.

use std::path::Path;
use std::process::Command;

fn script() -> Command {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres"))
}

/// `psql` of the installed server, on `url`, running `sql`; its output, or its error.
fn psql(url: &str, sql: &str) -> Result<String, String> {
    let bin = script().arg("bin").output().unwrap();
    assert!(
        bin.status.success(),
        "{}",
        String::from_utf8_lossy(&bin.stderr)
    );
    let bin = String::from_utf8(bin.stdout).unwrap();
    let output = Command::new(Path::new(bin.trim()).join("psql"))
        .args([
            url,
            "--no-psqlrc",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .unwrap();
    if output.status.success() {
        Ok(String::from_utf8(output.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// Stops the server when the test ends, passed or not.
struct Stop<'a>(&'a Path);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        let _ = script().arg("stop").arg(self.0).status();
    }
}

#[test]
fn the_script_starts_postgres_with_pgvector_and_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let started = script().arg("start").arg(dir.path()).output().unwrap();
    assert!(
        started.status.success(),
        "scripts/postgres start: {}",
        String::from_utf8_lossy(&started.stderr)
    );
    let _stop = Stop(dir.path());
    let stdout = String::from_utf8(started.stdout).unwrap();
    let url = stdout.lines().last().unwrap().trim().to_owned();
    assert!(
        url.starts_with("postgres://mnemo@127.0.0.1:"),
        "the last line is the URL: {stdout}"
    );

    // pgvector with an HNSW index answers a cosine query.
    psql(
        &url,
        "CREATE EXTENSION vector; CREATE TABLE t (v vector(3)); \
         CREATE INDEX ON t USING hnsw (v vector_cosine_ops); \
         INSERT INTO t VALUES ('[1,0,0]'), ('[0,1,0]');",
    )
    .unwrap();
    let version = psql(
        &url,
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
    );
    assert_eq!(version.unwrap().trim(), "0.6.2");
    let nearest = psql(&url, "SELECT v FROM t ORDER BY v <=> '[0.9,0.1,0]' LIMIT 1");
    assert_eq!(nearest.unwrap().trim(), "[1,0,0]");

    let stopped = script().arg("stop").arg(dir.path()).output().unwrap();
    assert!(
        stopped.status.success(),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    assert!(
        psql(&url, "SELECT 1").is_err(),
        "the server is gone after stop"
    );
}
