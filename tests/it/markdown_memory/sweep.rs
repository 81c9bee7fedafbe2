//! Opening a workspace removes only the temporary files that are certainly abandoned: a write in
//! progress in this process or in another live process keeps its file and commits; the file of a
//! writer that died, or one far too old for any write, goes.
//!
//! The other processes are this test binary run again in a child mode (selected by an
//! environment variable), as `crash.rs` does.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use mnemo_markdown_memory::{StagedWrite, Workspace};

use crate::common::test_name;

/// Child mode: stage a write of `world/people.md` under this directory, print the temporary
/// file's path, then commit it once a line arrives on stdin (or never, with `exit`: the process
/// ends with the write unfinished, as a crash would leave it).
const CHILD: &str = "MNEMO_MD_SWEEP_CHILD";
const CHILD_MODE: &str = "MNEMO_MD_SWEEP_MODE";

fn child(root: &Path) {
    let target = root.join("world/people.md");
    let staged = StagedWrite::stage(&target, b"written by the child\n").expect("stage");
    println!("\ntemporary file: {}", staged.temp_path().display());
    std::io::stdout().flush().unwrap();
    if std::env::var(CHILD_MODE).as_deref() == Ok("exit") {
        std::mem::forget(staged);
        std::process::exit(0);
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    match staged.commit() {
        Ok(()) => println!("committed"),
        Err(error) => println!("commit failed: {error}"),
    }
}

/// Runs this test in child mode for `root`; returns the child and its temporary file.
fn spawn_writer(test: &str, root: &Path, mode: &str) -> (std::process::Child, PathBuf) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_name(module_path!(), test)])
        .args(["--nocapture", "--test-threads", "1"])
        .env(CHILD, root)
        .env(CHILD_MODE, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let temp = loop {
        let line = lines
            .next()
            .expect("the child prints its temporary file")
            .unwrap();
        if let Some((_, path)) = line.split_once("temporary file: ") {
            break PathBuf::from(path);
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (child, temp)
}

fn prepare() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    workspace.write_world("people", "before\n").unwrap();
    dir
}

#[test]
fn a_live_writers_temporary_file_survives_an_open() {
    if let Ok(root) = std::env::var(CHILD) {
        child(Path::new(&root));
        return;
    }
    let dir = prepare();
    let target = dir.path().join("world/people.md");

    // A write in progress in this process (another kernel, another thread).
    let staged = StagedWrite::stage(&target, b"written here\n").unwrap();
    let own = staged.temp_path().to_path_buf();

    // A write in progress in another live process.
    let (mut other, theirs) = spawn_writer(
        "a_live_writers_temporary_file_survives_an_open",
        dir.path(),
        "wait",
    );
    assert!(theirs.exists(), "{}", theirs.display());

    Workspace::open(dir.path()).unwrap();

    assert!(own.exists(), "this process's write in progress was removed");
    assert!(
        theirs.exists(),
        "a live process's write in progress was removed"
    );
    staged.commit().expect("this process's write commits");
    assert_eq!(fs::read_to_string(&target).unwrap(), "written here\n");

    let mut stdin = other.stdin.take().unwrap();
    writeln!(stdin).unwrap();
    drop(stdin);
    assert!(other.wait().unwrap().success());
    assert!(!theirs.exists());
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "written by the child\n",
        "the other process's write committed"
    );
}

#[test]
fn an_abandoned_temporary_file_is_removed() {
    if let Ok(root) = std::env::var(CHILD) {
        child(Path::new(&root));
        return;
    }
    let dir = prepare();
    let target = dir.path().join("world/people.md");

    // A writer that ended before its rename.
    let (mut dead, theirs) =
        spawn_writer("an_abandoned_temporary_file_is_removed", dir.path(), "exit");
    assert!(dead.wait().unwrap().success());
    assert!(theirs.exists());

    // A write of this (live) process, but two days old: no write takes that long.
    let staged = StagedWrite::stage(&target, b"stale\n").unwrap();
    let old = staged.temp_path().to_path_buf();
    std::mem::forget(staged);
    File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(2 * 24 * 3600))
        .unwrap();

    Workspace::open(dir.path()).unwrap();

    assert!(!theirs.exists(), "the dead writer's temporary file is left");
    assert!(!old.exists(), "the two-day-old temporary file is left");
    assert_eq!(fs::read_to_string(&target).unwrap(), "before\n");
}
