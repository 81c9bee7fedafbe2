//! Crash safety: `mnemo ingest` is killed with SIGKILL at random points (after a random number
//! of acknowledgements, or a random time after it starts: while it opens the store, loads the
//! model, stores turns or embeds them) and restarted, each restart resending every event it had
//! no acknowledgement for. Afterwards `PRAGMA integrity_check` passes, the full-text index agrees
//! with the table, once the indexer has caught up every active memory has exactly one vector and
//! no vector is an orphan, and every acknowledged event is stored exactly once.
//!
//! The same loop runs with the store in PostgreSQL (`…_on_postgres`); there the database is
//! PostgreSQL's to keep, and the check is that every acknowledged event is there once.
//!
//! `MNEMO_CRASH_KILLS` sets how many kills (default 20, 10 on PostgreSQL; `make stress` runs
//! 200).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common;

const CONFIG: &str = "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n";

/// Events sent to a run that is to be killed.
const KILL_WINDOW: usize = 60;

/// A seeded xorshift generator: each run kills at the same points, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// `mnemo` on `dir`, whose `config.toml` [`crash_loop`] wrote.
fn mnemo(dir: &Path) -> Command {
    common::mnemo_in(dir)
}

fn event(index: usize) -> String {
    const NAMES: [&str; 6] = ["Sarah", "Tom", "Priya", "Jonas", "Mei", "Carlos"];
    const TOPICS: [&str; 5] = [
        "the Kyoto trip",
        "the quarterly budget",
        "a broken printer",
        "Sunday's dinner",
        "the new apartment",
    ];
    let at = chrono::DateTime::parse_from_rfc3339("2026-03-02T08:00:00Z").unwrap()
        + chrono::Duration::minutes(index as i64);
    let session = index / 10;
    json!({
        "type": if index.is_multiple_of(2) { "user_message" } else { "agent_response" },
        "id": format!("ev-{index}"),
        "at": at.to_rfc3339(),
        "session_id": format!("s{session}"),
        "user_id": format!("u{}", session % 3),
        "text": format!(
            "Turn {index}: {} talked about {} again, note number {}",
            NAMES[index % NAMES.len()],
            TOPICS[index % TOPICS.len()],
            index * 7 % 101
        ),
    })
    .to_string()
}

/// What one run of the child did.
struct Run {
    /// Events acknowledged, in order, and whether each was newly stored.
    acks: Vec<(String, bool)>,
    killed: bool,
}

/// Starts `mnemo ingest` on `events[next..]` and kills it when `kill_after_acks` events are
/// acknowledged or `kill_after` has passed. A run that is to be killed gets at most
/// [`KILL_WINDOW`] events and its input stays open, so it is still running (storing, embedding
/// or waiting for input) when the kill comes; a run with neither limit gets every remaining
/// event, its input closes, and it must end by itself.
fn run_child(
    dir: &Path,
    events: &[String],
    next: usize,
    kill_after_acks: Option<usize>,
    kill_after: Option<Duration>,
) -> Run {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("ingest.stderr"))
        .unwrap();
    let mut child = mnemo(dir)
        .arg("ingest")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let to_be_killed = kill_after_acks.is_some() || kill_after.is_some();
    let end = if to_be_killed {
        (next + KILL_WINDOW).min(events.len())
    } else {
        events.len()
    };
    let lines: Vec<String> = events[next..end].to_vec();
    // The producer: a broken pipe just means the child died. It hands the pipe back so that a
    // run to be killed keeps its input open.
    let writer = std::thread::spawn(move || {
        for line in lines {
            if writeln!(stdin, "{line}").is_err() {
                break;
            }
        }
        let _ = stdin.flush();
        to_be_killed.then_some(stdin)
    });
    let child: Arc<Mutex<Child>> = Arc::new(Mutex::new(child));
    let killed = Arc::new(Mutex::new(false));
    let kill = {
        let (child, killed) = (Arc::clone(&child), Arc::clone(&killed));
        move || {
            let mut child = child.lock().unwrap();
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap(); // SIGKILL on Unix
                *killed.lock().unwrap() = true;
            }
        }
    };
    let timer = kill_after.map(|after| {
        let kill = kill.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            kill();
        })
    });
    let mut acks = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let reply: Value = serde_json::from_str(&line).unwrap_or_else(|error| {
            panic!("the child printed {line:?}, not a JSON acknowledgement: {error}")
        });
        let id = reply["ack"]
            .as_str()
            .unwrap_or_else(|| panic!("not an acknowledgement: {reply}"));
        // One event at a time, in order: the ack must be for the next event sent.
        let expected = format!("ev-{}", next + acks.len());
        assert_eq!(id, expected, "acknowledgements out of order");
        acks.push((id.to_owned(), reply["memory_id"].is_string()));
        if Some(acks.len()) == kill_after_acks {
            kill();
            break;
        }
    }
    let status = loop {
        if let Some(status) = child.lock().unwrap().try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(timer) = timer {
        // The timer may still be sleeping; it finds the child gone and does nothing.
        drop(timer);
    }
    drop(writer.join().unwrap());
    let killed = *killed.lock().unwrap();
    if !killed {
        let log = std::fs::read_to_string(dir.join("ingest.stderr")).unwrap_or_default();
        assert!(status.success(), "mnemo ingest failed: {status}\n{log}");
    }
    Run { acks, killed }
}

fn command_output(dir: &Path, args: &[&str]) -> String {
    let output = mnemo(dir).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "mnemo {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn sigkill_at_random_points_loses_and_duplicates_nothing() {
    crash_loop(None, 20);
}

/// The same with the memory store in PostgreSQL: what was acknowledged was committed there.
#[test]
#[cfg(feature = "postgres")]
fn sigkill_at_random_points_loses_and_duplicates_nothing_on_postgres() {
    crash_loop(Some(mnemo_pg_fixture::fresh_database()), 10);
}

/// Kills `mnemo ingest` `MNEMO_CRASH_KILLS` times (default `default_kills`), on PostgreSQL
/// when `database_url` is given, then checks the store.
fn crash_loop(database_url: Option<String>, default_kills: usize) {
    let kills: usize = std::env::var("MNEMO_CRASH_KILLS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default_kills);
    let dir = tempfile::tempdir().unwrap();
    let database = database_url
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    std::fs::write(
        dir.path().join("config.toml"),
        format!("{CONFIG}{database}"),
    )
    .unwrap();
    let events: Vec<String> = (0..kills * KILL_WINDOW + 60).map(event).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut next, mut done_kills, mut resent_stored_before) = (0, 0, 0);
    while next < events.len() {
        let (by_acks, by_time) = if done_kills >= kills {
            (None, None)
        } else if rng.below(2) == 0 {
            (Some(1 + rng.below(40) as usize), None)
        } else {
            (None, Some(Duration::from_millis(rng.below(1_200))))
        };
        let run = run_child(dir.path(), &events, next, by_acks, by_time);
        resent_stored_before += run.acks.iter().filter(|(_, new)| !new).count();
        next += run.acks.len();
        if run.killed {
            done_kills += 1;
        } else {
            assert_eq!(
                next,
                events.len(),
                "a run that was not killed ends with every event"
            );
        }
    }
    assert!(done_kills >= kills, "only {done_kills} kills happened");
    eprintln!(
        "{done_kills} kills; {resent_stored_before} resent events were already stored and were not stored again"
    );

    // Let the indexer finish what the killed runs left queued, then check everything.
    command_output(dir.path(), &["reindex"]);
    let report: Value = serde_json::from_str(&command_output(dir.path(), &["check", "--json"]))
        .expect("check prints JSON");
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["database"], json!([]), "{report}");
    assert_eq!(report["full_text"], Value::Null, "{report}");
    assert_eq!(report["memories"], json!(events.len()), "{report}");
    assert_eq!(report["active"], json!(events.len()), "{report}");
    assert_eq!(report["vectors"], json!(events.len()), "{report}");
    assert_eq!(report["queued"], json!(0), "{report}");

    // Exactly once: each event id recorded once, pointing at its own episode.
    let export = command_output(dir.path(), &["export"]);
    let records: Vec<Value> = export
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let mut recorded: Vec<&str> = records
        .iter()
        .filter(|record| record["type"] == "ingested_events")
        .map(|record| record["row"]["event_id"].as_str().unwrap())
        .collect();
    recorded.sort_unstable();
    let mut expected: Vec<String> = (0..events.len())
        .map(|index| format!("ev-{index}"))
        .collect();
    expected.sort_unstable();
    assert_eq!(recorded, expected);
    let episodes = records
        .iter()
        .filter(|record| record["type"] == "memories" && record["row"]["kind"] == "episode")
        .count();
    assert_eq!(episodes, events.len());
}
