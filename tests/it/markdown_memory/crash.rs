//! A writer process killed with SIGKILL in the middle of a burst of whole-file writes leaves
//! every file either old or new, never truncated or mixed.
//!
//! The test re-runs its own binary as the writer (selected by an environment variable), kills it
//! at a random moment, and checks every world topic and agent memory file.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mnemo_markdown_memory::Workspace;

use crate::common::test_name;

const CHILD: &str = "MNEMO_MD_CRASH_CHILD";
const TOPICS: usize = 4;

/// A file body that shows whether it is whole: a header and a footer with the same number,
/// around enough text to span several disk blocks.
fn body(number: u64) -> String {
    format!(
        "BEGIN {number}\n{}\nEND {number}\n",
        "lorem ipsum ".repeat(2_000)
    )
}

fn is_whole(text: &str) -> bool {
    let Some(first) = text.lines().next() else {
        return false;
    };
    let Some(number) = first.strip_prefix("BEGIN ") else {
        return false;
    };
    text == body(number.parse().unwrap_or(u64::MAX))
}

/// The writer: rewrites world topics and the agent's memory as fast as it can, forever.
fn writer(root: &Path) {
    let workspace = Workspace::open(root).expect("open the workspace");
    let mut number = 0_u64;
    loop {
        number += 1;
        let topic = format!("topic-{}", number % TOPICS as u64);
        workspace
            .write_world(&topic, &body(number))
            .expect("write a world topic");
        workspace
            .write_agent_memory("assistant", chrono::Utc::now(), &body(number))
            .expect("write the agent memory");
    }
}

#[test]
fn sigkill_never_leaves_a_torn_file() {
    if let Ok(root) = std::env::var(CHILD) {
        writer(Path::new(&root));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut kills = 0;
    for round in 0..24_u64 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                &test_name(module_path!(), "sigkill_never_leaves_a_torn_file"),
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD, dir.path())
            .spawn()
            .unwrap();
        // A different moment each round: 30 to 260 ms into the burst.
        std::thread::sleep(Duration::from_millis(30 + (round * 37) % 230));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        kills += 1;
        // Reopening sweeps temporary files of interrupted writes; every real file is whole.
        let workspace = Workspace::open(dir.path()).unwrap();
        let mut checked = 0;
        for (topic, _, text) in workspace.world_files().unwrap() {
            assert!(
                is_whole(&text),
                "round {round}: world topic {topic} is torn"
            );
            checked += 1;
        }
        let memory = workspace.read_agent_memory("assistant").unwrap();
        if !memory.is_empty() {
            assert!(is_whole(&memory), "round {round}: agent memory is torn");
        }
        // The versions kept before each rewrite are whole too, and no more than configured (one
        // more when the kill came between keeping a version and pruning the oldest).
        let versions = workspace.agent_memory_versions("assistant").unwrap();
        assert!(
            versions.len() <= mnemo_markdown_memory::DEFAULT_MEMORY_VERSIONS + 1,
            "round {round}: {} versions",
            versions.len()
        );
        for version in &versions {
            let text = std::fs::read_to_string(dir.path().join(version)).unwrap();
            assert!(is_whole(&text), "round {round}: version {version} is torn");
        }
        if round > 3 {
            assert!(
                checked > 0,
                "round {round}: the writer never got to write anything"
            );
        }
        for entry in std::fs::read_dir(dir.path().join("world")).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            assert!(
                name.ends_with(".md"),
                "round {round}: leftover {name} after reopening"
            );
        }
    }
    assert_eq!(kills, 24);
}
