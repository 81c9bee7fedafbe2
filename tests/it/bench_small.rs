//! `mnemo bench` at a small size, so that the benchmark keeps working: it builds a store with
//! the real model, searches it, and reports figures that are internally consistent. Timings
//! are not asserted (this machine is shared); the full-size figures live in docs/BENCHMARKS.md.

use std::process::Command;

#[test]
fn bench_reports_latency_size_memory_and_vector_recall() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&config)
        .args([
            "bench",
            "--memories",
            "1500",
            "--queries",
            "20",
            "--rounds",
            "1",
            "--real-embeddings",
            "150",
            "--json",
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {stderr}"));
    assert_eq!(report["memories"], 1500);
    // Every one of the 1500 ingests was timed, and the searches are the ones asked for.
    assert_eq!(report["timed_ingests"], 1500, "{report}");
    assert_eq!(report["queries_per_round"], 20, "{report}");
    for section in ["ingest_ms", "search_ms", "search_ms_without_embedding"] {
        for key in ["p50", "p95", "p99"] {
            let value = report[section][key].as_f64().unwrap_or(-1.0);
            assert!(
                value > 0.0,
                "{section} {key} is missing or not a time: {report}"
            );
        }
    }
    // 1500 short turns take well over 100 KB and less than 100 MB.
    let db_bytes = report["db_bytes"].as_u64().unwrap();
    assert!((100_000..100_000_000).contains(&db_bytes), "{report}");
    assert!(
        report["rss_bytes"].as_u64().unwrap() > 10_000_000,
        "{report}"
    );
    assert_eq!(report["real_embeddings"], 150);
    let stage = &report["vector_stage"];
    assert_eq!(stage["mirror_rows"], 1500, "every memory has a vector");
    // Half the turns are the user's, each with at least one sentence key.
    let sentence_rows = stage["sentence_rows"].as_u64().unwrap();
    assert!(sentence_rows >= 750, "{report}");
    // The quantised stage must find most of the exact neighbours; a broken re-scoring or
    // bit packing falls far below this.
    let recall = stage["recall@10_vs_exact"].as_f64().unwrap();
    assert!((0.7..=1.0).contains(&recall), "recall {recall}: {report}");
    // The embedder's speed, measured on long texts the local model reads 200 tokens or more of.
    let embedding = &report["embedding"];
    assert!(
        embedding["sentences_per_s"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(
        embedding["tokens_per_s"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    let long = embedding["long_text_tokens"].as_u64().unwrap();
    assert!((200..=256).contains(&long), "{report}");
    // Twenty forgets, each of a turn with two facts drawn on it: the turn and the fact drawn
    // from it alone are removed, the fact that keeps another source is changed.
    let forget = &report["forget"];
    assert_eq!(forget["forgets"], 20, "{report}");
    assert!(
        forget["forget_ms"]["p50"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(
        forget["removed_per_forget"].as_f64().unwrap() >= 2.0,
        "{report}"
    );
    assert_eq!(forget["changed_per_forget"], 1.0, "{report}");
}

/// `mnemo bench --keep` then `mnemo bench-http --instances 2` on that store, with the store in
/// SQLite or in PostgreSQL: every phase answers without an error, from both servers.
fn bench_http_on(database_url: Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let mnemo = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mnemo"));
        match &database_url {
            Some(url) => command.env("MNEMO_DATABASE_URL", url),
            None => command.env_remove("MNEMO_DATABASE_URL"),
        };
        let output = command
            .arg("--config")
            .arg(&config)
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "mnemo {args:?}: {stderr}");
        serde_json::from_slice::<serde_json::Value>(&output.stdout)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {stderr}"))
    };
    let built = mnemo(&[
        "bench",
        "--memories",
        "300",
        "--queries",
        "5",
        "--rounds",
        "1",
        "--real-embeddings",
        "50",
        "--keep",
        store.to_str().unwrap(),
        "--json",
    ]);
    let backend = if database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(built["backend"], backend, "{built}");
    assert!(built["db_bytes"].as_u64().unwrap() > 10_000, "{built}");
    let served = mnemo(&[
        "bench-http",
        "--store",
        store.to_str().unwrap(),
        "--instances",
        "2",
        "--clients",
        "2",
        "--queries",
        "4",
        "--ingests",
        "10",
        "--json",
    ]);
    assert_eq!(served["backend"], backend, "{served}");
    assert_eq!(served["instances"], 2, "{served}");
    assert_eq!(served["memories"], 300, "{served}");
    for phase in [
        "http_search_one_client_ms",
        "http_search_ms",
        "http_ingest_ms",
    ] {
        assert_eq!(served[phase]["errors"], 0, "{phase}: {served}");
    }
    assert_eq!(served["http_ingest_ms"]["requests"], 10, "{served}");
    assert_eq!(served["http_search_ms"]["requests"], 2, "{served}");
}

#[test]
fn bench_http_serves_one_sqlite_store_from_two_instances() {
    bench_http_on(None);
}

#[test]
#[cfg(feature = "postgres")]
fn bench_http_serves_one_postgres_store_from_two_instances() {
    bench_http_on(Some(mnemo_pg_fixture::fresh_database()));
}
