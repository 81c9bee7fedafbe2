//! `mnemo bench-http`: ingest and search over HTTP against `mnemo serve`'s routes, on a store
//! that `mnemo bench --keep DIR` built, beside the same searches in process.
//!
//! The server runs in this process on a loopback port, with one API key per bench user; with
//! `--instances N`, N servers, each with its own kernel on the one store (as N `mnemo serve`
//! behind a load balancer, here sharing this machine's cores), and client `i` talks to server
//! `i mod N`. The clients are tokio tasks with their own HTTP connections. Phases, each with its own distinct
//! queries (so that no query vector is cached from an earlier phase):
//!
//! 1. and 2. hybrid search in process and over HTTP by one client, in pairs: each pair runs a
//!    query in process, then another over HTTP, so that both see the same machine (this one is
//!    shared and noisy); the difference is what HTTP, JSON and the key check add to a search;
//! 3. searches over HTTP by `--clients` concurrent clients: requests per second and latency
//!    under load;
//! 4. ingest over HTTP (`POST /v1/events`, one turn per request) by the concurrent clients;
//! 5. the same number of turns again in batches of 100 (one user's each): events per second;
//! 6. with `--import-turns N`, one user imports N turns while another says one thing: how long
//!    that turn waits for its vector (see `bench_http/fair_queue.rs`).
//!
//! Every non-2xx answer or failed connection counts as an error.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mnemo_kernel::host::Config;
use mnemo_memory::SearchMode;
use mnemo_server::{KeyStore, NewKey, ServeOptions, Server};
use serde_json::json;

use crate::bench::{service_of, start_kernel, summary, time_searches, Random, QUERY_TEMPLATES};

mod fair_queue;

/// Events in each request of the batched ingest phase.
const BATCH: usize = 100;

/// What `mnemo bench-http` measures.
#[derive(Debug, Clone)]
pub struct HttpBenchOptions {
    /// A store made by `mnemo bench --keep DIR`.
    pub store: PathBuf,
    /// Concurrent clients.
    pub clients: usize,
    /// Searches per phase.
    pub queries: usize,
    /// Events ingested in the ingest phase.
    pub ingests: usize,
    /// Servers, each with its own kernel on the store.
    pub instances: usize,
    /// Turns one user imports in phase 6 (0: no phase 6).
    pub import_turns: usize,
    /// Print JSON.
    pub json: bool,
}

/// One phase's latencies, errors and wall time.
struct Phase {
    latencies: Vec<Duration>,
    errors: usize,
    seconds: f64,
}

impl Phase {
    fn report(mut self) -> serde_json::Value {
        let requests = self.latencies.len() + self.errors;
        let mut report = summary(&mut self.latencies);
        report["requests"] = json!(requests);
        report["errors"] = json!(self.errors);
        report["per_second"] = json!((requests as f64 / self.seconds.max(1e-9)).round());
        report
    }
}

/// Sends `bodies` to `path`, `clients` at a time, each body with its user's key; client `i`
/// sends to `urls[i mod urls.len()]`.
async fn load(
    urls: &[String],
    path: &str,
    bodies: Vec<(String, serde_json::Value)>,
    clients: usize,
) -> Phase {
    let bodies = Arc::new(bodies);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client_index in 0..clients.max(1) {
        let bodies = bodies.clone();
        let endpoint = format!("{}{path}", urls[client_index % urls.len().max(1)]);
        tasks.push(tokio::spawn(async move {
            // One connection pool per client, as separate client processes would have.
            let client = reqwest::Client::new();
            let mut latencies = Vec::new();
            let mut errors = 0;
            for (key, body) in bodies.iter().skip(client_index).step_by(clients.max(1)) {
                let clock = Instant::now();
                let sent = client
                    .post(&endpoint)
                    .bearer_auth(key)
                    .json(body)
                    .send()
                    .await;
                let ok = match sent {
                    Ok(response) => {
                        let status = response.status();
                        // The whole body is part of the request's time.
                        response.bytes().await.is_ok() && status.is_success()
                    }
                    Err(_) => false,
                };
                if ok {
                    latencies.push(clock.elapsed());
                } else {
                    errors += 1;
                }
            }
            (latencies, errors)
        }));
    }
    let mut phase = Phase {
        latencies: Vec::new(),
        errors: 0,
        seconds: 0.0,
    };
    for task in tasks {
        match task.await {
            Ok((latencies, errors)) => {
                phase.latencies.extend(latencies);
                phase.errors += errors;
            }
            Err(_) => phase.errors += 1,
        }
    }
    phase.seconds = started.elapsed().as_secs_f64();
    phase
}

/// Runs the benchmark; prints a summary, or JSON with `options.json`.
pub async fn run(base: &Config, options: &HttpBenchOptions) -> anyhow::Result<()> {
    let dir = &options.store;
    anyhow::ensure!(
        crate::bench::store_in_postgres(base)? || dir.join("memory.db").is_file(),
        "{} holds no memory.db: bench-http needs a store made by `mnemo bench --keep DIR`",
        dir.display()
    );
    let mut kernels = Vec::new();
    for _ in 0..options.instances.max(1) {
        kernels.push(start_kernel(base, dir, true).await?);
    }
    let service = service_of(&kernels[0])?;
    let stats = service.stats(None).await?;
    let memories = stats.episodes + stats.facts + stats.reflections;
    // The bench's owners are user0, user1, …; find how many hold memories.
    let mut users = Vec::new();
    while users.len() < 1_000 {
        let user = format!("user{}", users.len());
        if service.stats(Some(&user)).await?.episodes == 0 {
            break;
        }
        users.push(user);
    }
    anyhow::ensure!(
        !users.is_empty(),
        "the store holds no bench user's memories"
    );
    let keys = KeyStore::new(service.clone());
    let mut user_keys = Vec::new();
    for user in &users {
        let (_, key) = keys
            .create(NewKey {
                user_id: Some(user.clone()),
                ..NewKey::default()
            })
            .await?;
        user_keys.push(key);
    }
    let mut urls = Vec::new();
    let mut stops = Vec::new();
    let mut servings = Vec::new();
    for kernel in &kernels {
        let server = Server::bind(
            kernel.clone(),
            &ServeOptions {
                listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
                ..ServeOptions::default()
            },
            None,
        )
        .await?;
        urls.push(format!("http://{}", server.local_addr()?));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        stops.push(stop);
        servings.push(tokio::spawn(server.run(async {
            let _ = stopped.await;
        })));
    }
    let first = &urls[..1];

    let mut random = Random(0x51ED_270B_A5E2_13C7);
    // Users in turn across calls: the single-client phases ask one query a call, and each
    // went to the first user until the counter outlived the call.
    let mut asked = 0usize;
    let mut queries = |count: usize| -> Vec<(usize, String)> {
        (0..count)
            .map(|_| {
                let template = random.pick(&QUERY_TEMPLATES);
                asked += 1;
                (
                    (asked - 1) % users.len(),
                    format!("{} {}", random.fill(template), random.next() % 100_000),
                )
            })
            .collect()
    };
    let search_body = |(user, query): (usize, String)| {
        (
            user_keys[user].clone(),
            json!({"query": query, "limit": 10}),
        )
    };
    // Warm-up: the model, the statistics cache and the connection, outside the figures.
    let warm: Vec<(String, String)> = queries(20)
        .into_iter()
        .map(|(user, query)| (users[user].clone(), query))
        .collect();
    time_searches(&service, &warm, SearchMode::Hybrid).await?;
    for url in &urls {
        load(
            std::slice::from_ref(url),
            "/v1/search",
            queries(20).into_iter().map(search_body).collect(),
            1,
        )
        .await;
    }
    // 1. and 2. In process and over HTTP, in pairs.
    let mut reference = Vec::with_capacity(options.queries);
    let mut one = Phase {
        latencies: Vec::with_capacity(options.queries),
        errors: 0,
        seconds: 0.0,
    };
    let mut reference_seconds = 0.0;
    for _ in 0..options.queries {
        let (user, query) = queries(1).remove(0);
        let clock = Instant::now();
        reference.extend(
            time_searches(
                &service,
                &[(users[user].clone(), query)],
                SearchMode::Hybrid,
            )
            .await?,
        );
        reference_seconds += clock.elapsed().as_secs_f64();
        let single = load(
            first,
            "/v1/search",
            queries(1).into_iter().map(search_body).collect(),
            1,
        )
        .await;
        one.latencies.extend(single.latencies);
        one.errors += single.errors;
        one.seconds += single.seconds;
    }
    // 3. Concurrent clients.
    let many = load(
        &urls,
        "/v1/search",
        queries(options.queries * options.clients.max(1) / 4)
            .into_iter()
            .map(search_body)
            .collect(),
        options.clients,
    )
    .await;
    // 4. Ingest, with event ids no earlier run used (a resent id is not stored again).
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let events: Vec<(String, serde_json::Value)> = (0..options.ingests)
        .map(|index| {
            let user = index % users.len();
            (
                user_keys[user].clone(),
                json!({"id": format!("http-bench-{run_id:x}-{index}"), "type": "user_message",
                       "at": "2027-01-01T00:00:00Z", "session_id": format!("http-{}", index / 40),
                       "text": random.turn()}),
            )
        })
        .collect();
    let ingest = load(&urls, "/v1/events", events, options.clients).await;
    // 5. Ingest in batches of `BATCH` events of one user each: events per second.
    let batches: Vec<(String, serde_json::Value)> = (0..options.ingests.div_ceil(BATCH))
        .map(|batch| {
            let user = batch % users.len();
            let events: Vec<serde_json::Value> = (0..BATCH)
                .map(|index| {
                    json!({"id": format!("http-batch-{run_id:x}-{batch}-{index}"),
                           "type": "user_message", "at": "2027-01-02T00:00:00Z",
                           "session_id": format!("batch-{batch}"), "text": random.turn()})
                })
                .collect();
            (user_keys[user].clone(), json!({ "events": events }))
        })
        .collect();
    let batched = load(&urls, "/v1/events", batches, options.clients).await;
    let batched_events_per_second =
        (batched.latencies.len() * BATCH) as f64 / batched.seconds.max(1e-9);

    // 6. One user's import beside another user's new turn.
    let fair = if options.import_turns > 0 && users.len() > 1 {
        fair_queue::FairQueue {
            service: &service,
            url: &urls[0],
            importer_key: &user_keys[0],
            speaker: &users[1],
            speaker_key: &user_keys[1],
            run_id,
            turns: options.import_turns,
        }
        .run(&mut random)
        .await?
    } else {
        serde_json::Value::Null
    };

    let (backend, _) = service.database_size().await?;
    // Each server shuts its kernel down when it stops.
    for stop in stops {
        let _ = stop.send(());
    }
    for serving in servings {
        serving.await.context("a server task")??;
    }
    let report = json!({
        "memories": memories,
        "backend": backend,
        "instances": urls.len(),
        "users": users.len(),
        "clients": options.clients,
        "in_process_search_ms": {
            "p50": summary(&mut reference)["p50"],
            "p99": summary(&mut reference)["p99"],
            "per_second": (options.queries as f64 / reference_seconds.max(1e-9)).round(),
        },
        "http_search_one_client_ms": one.report(),
        "http_search_ms": many.report(),
        "http_ingest_ms": ingest.report(),
        "http_batch_ingest_ms": batched.report(),
        "http_batch_events_per_second": batched_events_per_second.round(),
        "fair_queue": fair,
    });
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let line = |name: &str, key: &str| {
            let value = &report[key];
            format!(
                "  {name:<26} p50 {:>7.2} ms  p99 {:>7.2} ms  {:>6}/s  {} errors",
                value["p50"].as_f64().unwrap_or_default(),
                value["p99"].as_f64().unwrap_or_default(),
                value["per_second"],
                value["errors"].as_u64().unwrap_or_default()
            )
        };
        println!(
            "{memories} memories ({backend}), {} users; HTTP on loopback, {} concurrent clients, {} instance(s)",
            users.len(),
            options.clients,
            urls.len()
        );
        println!("{}", line("search in process", "in_process_search_ms"));
        println!(
            "{}",
            line("search, 1 HTTP client", "http_search_one_client_ms")
        );
        println!(
            "{}",
            line(
                &format!("search, {} HTTP clients", options.clients),
                "http_search_ms"
            )
        );
        println!(
            "{}",
            line(
                &format!("ingest, {} HTTP clients", options.clients),
                "http_ingest_ms"
            )
        );
        println!(
            "{}  ({} events/s)",
            line(
                &format!("ingest, batches of {BATCH}"),
                "http_batch_ingest_ms"
            ),
            report["http_batch_events_per_second"]
        );
        if !report["fair_queue"].is_null() {
            println!(
                "  another user's turn during an import of {}: its vector after {} s ({} texts were waiting)",
                report["fair_queue"]["import_turns"],
                report["fair_queue"]["seconds_to_vector"],
                report["fair_queue"]["queued_when_acknowledged"]
            );
        }
    }
    Ok(())
}
