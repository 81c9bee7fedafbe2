//! Three `mnemo serve` instances on one PostgreSQL database, as behind a load balancer: users'
//! turns arrive at any instance, some sent twice to different ones, while every instance's
//! scheduler fires the same jobs every two seconds. Nothing is lost, nothing is stored twice,
//! every memory gets one vector, and each due run of a job runs in one instance only.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

mod common;

use common::server::{create_key, Served};

const USERS: [&str; 3] = ["ana", "ben", "cal"];
const TURNS_PER_USER: usize = 40;
/// Jobs every instance schedules every two seconds.
const JOBS: [&str; 2] = ["expire_memories", "execute_decay"];

fn config(url: &str) -> String {
    format!(
        "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\ndatabase_url = \"{url}\"\n\
         expiry_cron = \"*/2 * * * * *\"\n\
         [extensions.memory_maintenance]\ndecay_cron = \"*/2 * * * * *\"\n"
    )
}

fn turn(user: &str, index: usize) -> Value {
    let at = chrono::DateTime::parse_from_rfc3339("2026-03-02T08:00:00Z").unwrap()
        + chrono::Duration::minutes(index as i64);
    json!({
        "id": format!("{user}-{index}"),
        "type": if index.is_multiple_of(2) { "user_message" } else { "agent_response" },
        "at": at.to_rfc3339(),
        "session_id": format!("{user}-s{}", index / 10),
        "text": format!("{user} turn {index}: the Lisbon trip with Dana, note {}", index * 7),
    })
}

/// Each job's runs in each instance, from `GET /v1/jobs`.
async fn job_runs(instances: &[Served]) -> HashMap<String, u64> {
    let mut runs = HashMap::new();
    for instance in instances {
        let (_, body) = instance
            .call(
                Some(&instance.admin_key),
                None,
                Method::GET,
                "/v1/jobs",
                None,
            )
            .await;
        for job in body["jobs"].as_array().unwrap() {
            *runs
                .entry(job["name"].as_str().unwrap().to_owned())
                .or_default() += job["runs"].as_u64().unwrap();
        }
    }
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_lose_duplicate_and_repeat_nothing() {
    let url = mnemo_pg_fixture::fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let instances: Vec<Served> = (0..3)
        .map(|_| Served::start(dir.path(), &config(&url), &[]))
        .collect();
    let keys: HashMap<&str, String> = USERS
        .iter()
        .map(|user| (*user, create_key(dir.path(), &["--user", user])))
        .collect();
    let started = Instant::now();

    // Each user's turns go to the instances in turn, and every fourth is sent again to the next
    // instance at the same time.
    let instances = std::sync::Arc::new(instances);
    let mut writers = Vec::new();
    for user in USERS {
        let key = keys[user].clone();
        let instances = std::sync::Arc::clone(&instances);
        writers.push(tokio::spawn(async move {
            let mut stored: HashMap<String, usize> = HashMap::new();
            for index in 0..TURNS_PER_USER {
                let body = json!({"events": [turn(user, index)]});
                let first = &instances[index % 3];
                let second = &instances[(index + 1) % 3];
                let sends = if index.is_multiple_of(4) { 2 } else { 1 };
                let replies =
                    futures::future::join_all([first, second][..sends].iter().map(|instance| {
                        instance.call(
                            Some(&key),
                            None,
                            Method::POST,
                            "/v1/events",
                            Some(body.clone()),
                        )
                    }))
                    .await;
                for (status, reply) in replies {
                    assert_eq!(status, reqwest::StatusCode::OK, "{reply}");
                    if reply["results"][0]["stored"] == true {
                        *stored.entry(format!("{user}-{index}")).or_default() += 1;
                    }
                }
            }
            stored
        }));
    }
    let mut stored: HashMap<String, usize> = HashMap::new();
    for writer in writers {
        stored.extend(writer.await.unwrap());
    }
    let events = USERS.len() * TURNS_PER_USER;
    assert_eq!(
        stored.len(),
        events,
        "every event was acknowledged as stored once"
    );
    assert!(stored.values().all(|times| *times == 1), "{stored:?}");

    // Let the schedulers fire a few times, then compare the runs with the claims.
    tokio::time::sleep(Duration::from_secs(8).saturating_sub(started.elapsed())).await;
    let runs = job_runs(&instances).await;
    for job in JOBS {
        let claimed: u64 = mnemo_pg_fixture::query(
            &url,
            &format!("SELECT COUNT(*) FROM job_runs WHERE job = '{job}'"),
        )
        .parse()
        .unwrap();
        let ran = runs[job];
        assert!(ran >= 2, "{job} ran {ran} times in 8 s");
        // A run is claimed before it starts: at most the one due while we read was claimed and
        // not yet counted. Three instances each running every due time would count three times
        // the claims.
        assert!(
            ran <= claimed && claimed <= ran + 1,
            "{job}: {ran} runs for {claimed} claimed due times"
        );
    }

    // Every memory gets its vector once the indexers are done.
    let deadline = Instant::now() + Duration::from_secs(180);
    let report = loop {
        let output = common::mnemo_in(dir.path())
            .env("MNEMO_DATABASE_URL", &url)
            .args(["check", "--json"])
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        if report["queued"] == 0 || Instant::now() > deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["memories"], json!(events), "{report}");
    assert_eq!(report["vectors"], json!(events), "{report}");
    assert_eq!(report["queued"], json!(0), "{report}");
    let recorded = mnemo_pg_fixture::query(
        &url,
        "SELECT COUNT(*), COUNT(DISTINCT (user_id, event_id)) FROM ingested_events",
    );
    assert_eq!(recorded, format!("{events}|{events}"));
}

/// Whether every instance refuses `key` at its next request.
async fn refused_by_all(instances: &[Served], key: &str) -> bool {
    for instance in instances {
        let (status, _) = instance
            .call(Some(key), None, Method::GET, "/v1/stats", None)
            .await;
        if status != reqwest::StatusCode::UNAUTHORIZED {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_on_one_instance_works_on_all_and_a_revocation_reaches_all_at_once() {
    let url = mnemo_pg_fixture::fresh_database();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = format!("[extensions.memory]\ndatabase_url = \"{url}\"\n");
    // Each instance has its own data directory, as on separate machines: only the database is
    // shared.
    let instances: Vec<Served> = dirs
        .iter()
        .map(|dir| Served::start(dir.path(), &config, &[]))
        .collect();
    let admin = instances[0].admin_key.clone();
    let make = |user: &'static str| {
        let instance = &instances[0];
        let admin = admin.clone();
        async move {
            let (status, made) = instance
                .call(
                    Some(&admin),
                    None,
                    Method::POST,
                    "/v1/keys",
                    Some(json!({"user_id": user})),
                )
                .await;
            assert_eq!(status, reqwest::StatusCode::CREATED, "{made}");
            (
                made["id"].as_str().unwrap().to_owned(),
                made["key"].as_str().unwrap().to_owned(),
            )
        }
    };
    let (dora_id, dora) = make("dora").await;
    for instance in &instances {
        let (status, body) = instance
            .call(Some(&dora), None, Method::GET, "/v1/stats", None)
            .await;
        assert_eq!(status, reqwest::StatusCode::OK, "{body}");
        assert_eq!(body["user_id"], "dora");
    }

    // Revoked through the second instance (with the third's admin key): refused on all.
    let (status, body) = instances[1]
        .call(
            Some(&instances[2].admin_key),
            None,
            Method::DELETE,
            &format!("/v1/keys/{dora_id}"),
            None,
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    // Each server reads the key from the store at every request: no delay to wait out.
    assert!(refused_by_all(&instances, &dora).await);

    // Erasing a user through one instance revokes the user's keys on all.
    let (_, eve) = make("eve").await;
    let (status, body) = instances[2]
        .call(Some(&eve), None, Method::DELETE, "/v1/users/eve", None)
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert!(refused_by_all(&instances, &eve).await);
    let (_, listed) = instances[1]
        .call(Some(&admin), None, Method::GET, "/v1/keys", None)
        .await;
    let revoked: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|key| key["revoked_at"].is_string())
        .filter_map(|key| key["user_id"].as_str())
        .collect();
    assert_eq!(revoked, ["dora", "eve"], "{listed}");
}
