//! `mnemo serve` fuzzed from its own OpenAPI document by schemathesis (`scripts/schemathesis`,
//! pinned in its own virtualenv): every operation, about 100 generated requests each, every check
//! (`--checks all`): no 5xx for any input, responses as documented (status, content type, body
//! schema), schema-valid requests accepted and schema-invalid ones refused.
//!
//! Twice: with a user's key, and with an admin key acting for a user (`X-Mnemo-User`), so that
//! the admin operations (`/v1/users`, the jobs and their runs, erasing another user) answer 2xx too
//! and not only 403. Seeded memories, job names and a user to erase are offered to the fuzzer
//! for the path parameters, so that the operations on one memory get past 404.
//!
//! Needs python3 with venv and pip (as `make test` does); the first run installs schemathesis.
//! `MNEMO_SCHEMATHESIS_SEED` picks another seed (the default is fixed, so a run is repeatable).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";

/// Generated requests per operation.
const EXAMPLES: &str = "100";

/// A request with `key` (acting for `act_for`), answered 2xx with JSON.
async fn call(
    served: &Served,
    key: &str,
    act_for: Option<&str>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let (status, value) = served.call(Some(key), act_for, method, path, body).await;
    assert!(status.is_success(), "{path}: {status}: {value}");
    value
}

/// Stores a few turns and facts for `user`; returns the ids of the memories made.
async fn seed(served: &Served, key: &str, act_for: Option<&str>, user: &str) -> Vec<String> {
    let turn = |n: u32, text: &str| {
        json!({"id": format!("{user}-e{n}"), "type": "user_message",
               "at": "2026-11-20T10:00:00Z", "session_id": format!("{user}-s1"), "text": text})
    };
    let stored = call(
        served,
        key,
        act_for,
        reqwest::Method::POST,
        "/v1/events",
        Some(json!({"events": [
            turn(1, "My sister Maria moved to Lisbon last spring."),
            turn(2, "She teaches surfing there on weekends."),
            turn(3, "I am training for the Porto half marathon in May."),
        ]})),
    )
    .await;
    let mut ids: Vec<String> = stored["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["memory_id"].as_str().unwrap().to_owned())
        .collect();
    for (content, subjects) in [
        ("Ana is allergic to peanuts", json!([])),
        ("Maria's birthday is on 3 June", json!(["Maria"])),
        ("Ana prefers window seats on trains", json!([])),
    ] {
        let made = call(
            served,
            key,
            act_for,
            reqwest::Method::POST,
            "/v1/memories",
            Some(json!({"content": content, "subjects": subjects})),
        )
        .await;
        ids.push(made["id"].as_str().unwrap().to_owned());
    }
    ids
}

/// Where a check cannot apply, and why; every other check runs on every operation.
const EXCEPTIONS: &str = r#"
# POST /v1/import takes NDJSON, documented as a string: no schema states that each line is a JSON
# object, so a "schema-valid" string is almost never an importable one. The other checks (no 5xx,
# documented responses, invalid requests refused) still run on it.
[[operations]]
include-path = "/v1/import"
include-method = "POST"
checks.positive_data_acceptance.enabled = false

# POST /v1/memories refuses with 400 what JSON Schema cannot state: an `expires_at` that is not in
# the future (a rule against the server's clock), and the rules between fields (`subjects`,
# `expires_at` and `shared` only for facts; `shared` only with a `chat_id`). A schema-valid body
# may be refused with 400 here, and only here; tests/it/http_api.rs checks those refusals.
[[operations]]
include-path = "/v1/memories"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 401, 403, 404]

# POST /v1/keys refuses with 400 the rules between fields: a user key needs `user_id`, an admin
# key takes no `user_id` and no `chats`. tests/it/http_api.rs checks those refusals.
[[operations]]
include-path = "/v1/keys"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 401, 403]
"#;

/// A TOML array of strings.
fn toml_strings(values: &[String]) -> String {
    toml::Value::Array(values.iter().cloned().map(toml::Value::String).collect()).to_string()
}

/// Writes `dir/schemathesis.toml`: the seeded values offered for path parameters, half the time
/// (the other half stays generated, to fuzz the lookups too).
fn write_config(dir: &Path, memory_ids: &[String], job_names: &[String], users: &[String]) {
    let mut dictionaries = String::new();
    let mut parameters = String::from("[parameters]\n");
    for (dictionary, parameter, values) in [
        ("memory_ids", "id", memory_ids),
        ("job_names", "name", job_names),
        ("users", "user_id", users),
    ] {
        if values.is_empty() {
            continue;
        }
        dictionaries.push_str(&format!(
            "[dictionaries.{dictionary}]\nvalues = {}\n",
            toml_strings(values)
        ));
        parameters.push_str(&format!(
            "\"path.{parameter}\" = {{ dictionary = \"{dictionary}\", probability = 0.5 }}\n"
        ));
    }
    std::fs::write(
        dir.join("schemathesis.toml"),
        format!(
            "# Written by tests/it/http_schemathesis.rs.\n{dictionaries}{parameters}{EXCEPTIONS}"
        ),
    )
    .unwrap();
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// How many operations the server's OpenAPI document describes.
async fn operations(url: &str) -> usize {
    let document: Value = reqwest::get(format!("{url}/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    document["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|path| path.as_object().unwrap().len())
        .sum()
}

/// Runs `scripts/schemathesis` in `dir` (its config file, and where hypothesis keeps its
/// database) with `headers`; panics with its output unless it passes and tests all `operations`.
fn run_schemathesis(label: &str, dir: &Path, url: &str, headers: &[String], operations: usize) {
    let seed = std::env::var("MNEMO_SCHEMATHESIS_SEED").unwrap_or_else(|_| "19".to_owned());
    let mut command = Command::new(repo().join("scripts/schemathesis"));
    command
        .current_dir(dir)
        .env(
            "SCHEMATHESIS_HOOKS",
            repo().join("tests/schemathesis/hooks.py"),
        )
        .env("NO_COLOR", "1")
        .arg(format!("{url}/openapi.json"))
        .args([
            "--checks",
            "all",
            "--max-examples",
            EXAMPLES,
            "--seed",
            &seed,
        ])
        .args(["--workers", "2", "--request-timeout", "30"]);
    for header in headers {
        command.args(["--header", header]);
    }
    let started = Instant::now();
    let output = command.output().expect("cannot run scripts/schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!(
        "schemathesis ({label}) took {:.1} s; its summary:\n{}",
        started.elapsed().as_secs_f64(),
        stdout
            .lines()
            .skip_while(|line| !line.contains("SUMMARY"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        output.status.success(),
        "schemathesis ({label}) failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains(&format!("Tested: {operations}\n")),
        "schemathesis ({label}) did not test every operation:\n{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_with_a_user_key_or_an_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), CONFIG, &[]);
    let key = create_key(dir.path(), &["--user", "ana"]);
    let admin = served.admin_key.clone();

    let mut memories = seed(&served, &key, None, "ana").await;
    // Someone for the admin run to erase.
    seed(&served, &admin, Some("zoe"), "zoe").await;
    let jobs = call(
        &served,
        &admin,
        None,
        reqwest::Method::GET,
        "/v1/jobs",
        None,
    )
    .await;
    let job_names: Vec<String> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!job_names.is_empty(), "{jobs}");

    let operations = operations(&served.url).await;
    assert!(
        operations >= 20,
        "the document lists {operations} operations"
    );

    // A user's key: everything but the admin operations can answer 2xx.
    let user_dir = dir.path().join("user-run");
    std::fs::create_dir(&user_dir).unwrap();
    write_config(&user_dir, &memories, &[], &[]);
    run_schemathesis(
        "user key",
        &user_dir,
        &served.url,
        &[format!("Authorization: Bearer {key}")],
        operations,
    );

    // An admin key acting for ana: the jobs, and erasing zoe, answer 2xx too. Memories the first
    // run forgot are still offered: they answer 404 now.
    memories.extend(seed(&served, &admin, Some("ana"), "ana2").await);
    let admin_dir = dir.path().join("admin-run");
    std::fs::create_dir(&admin_dir).unwrap();
    write_config(&admin_dir, &memories, &job_names, &["zoe".to_owned()]);
    run_schemathesis(
        "admin key",
        &admin_dir,
        &served.url,
        &[
            format!("Authorization: Bearer {admin}"),
            "X-Mnemo-User: ana".to_owned(),
        ],
        operations,
    );
    assert!(served.stop(), "mnemo serve did not stop cleanly");
}
