//! `mnemo import` is idempotent (an import killed half-way and run again stores each event
//! exactly once), and `export` → `import` into an empty store → `export` is byte for byte.

use std::path::Path;
use std::process::Command;

const CONFIG: &str =
    "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n";

fn mnemo(dir: &Path, data: &str, args: &[&str]) -> String {
    let config = dir.join("config.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join(data))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn conversation() -> String {
    let mut lines = String::new();
    for n in 0..40 {
        let (kind, text) = if n % 2 == 0 {
            (
                "user_message",
                format!("message {n}: my sister Dana visits Lisbon in week {n}"),
            )
        } else {
            ("agent_response", format!("reply {n}: noted"))
        };
        lines.push_str(&format!(
            "{{\"id\":\"evt-{n}\",\"type\":\"{kind}\",\"at\":\"2026-03-{:02}T10:00:00Z\",\"session_id\":\"s{}\",\"user_id\":\"{}\",\"text\":\"{text}\"}}\n",
            1 + n / 10,
            n / 10,
            if n % 3 == 0 { "ben" } else { "ana" }
        ));
    }
    lines
}

#[test]
fn import_is_idempotent_and_export_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("conversation.jsonl");
    std::fs::write(&full, conversation()).unwrap();
    // An import killed half-way: the first 17 events only, then the whole file, twice.
    let half = dir.path().join("half.jsonl");
    let first_lines: String = conversation()
        .lines()
        .take(17)
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&half, first_lines).unwrap();
    mnemo(dir.path(), "one", &["import", half.to_str().unwrap()]);
    mnemo(dir.path(), "one", &["import", full.to_str().unwrap()]);
    mnemo(dir.path(), "one", &["import", full.to_str().unwrap()]);
    mnemo(
        dir.path(),
        "one",
        &[
            "remember",
            "Dana is a marine biologist",
            "--user",
            "ana",
            "--subject",
            "my sister Dana",
        ],
    );
    let stats: serde_json::Value =
        serde_json::from_str(&mnemo(dir.path(), "one", &["stats", "--json"])).unwrap();
    assert_eq!(
        stats["counts"]["episode"], 40,
        "each event stored exactly once"
    );
    assert_eq!(stats["counts"]["fact"], 1);

    let first = mnemo(dir.path(), "one", &["export"]);
    assert!(first.lines().count() > 40);
    let export = dir.path().join("export.jsonl");
    std::fs::write(&export, &first).unwrap();
    let report = mnemo(dir.path(), "two", &["import", export.to_str().unwrap()]);
    assert!(report.contains("0 problems"), "{report}");
    let second = mnemo(dir.path(), "two", &["export"]);
    assert_eq!(
        first, second,
        "export -> import -> export must be identical"
    );
    // Importing the export again changes nothing.
    let again = mnemo(dir.path(), "two", &["import", export.to_str().unwrap()]);
    assert!(again.contains("0 rows"), "{again}");
    assert_eq!(mnemo(dir.path(), "two", &["export"]), first);

    // The restored store works: search finds the fact, for its owner only.
    let hits = mnemo(
        dir.path(),
        "two",
        &["search", "marine biologist", "--user", "ana", "--json"],
    );
    assert!(hits.contains("Dana is a marine biologist"), "{hits}");
    let none = mnemo(
        dir.path(),
        "two",
        &["search", "marine biologist", "--user", "ben", "--json"],
    );
    assert_eq!(none.trim(), "[]");

    // Per-user export and the readable rendering.
    let ben = mnemo(dir.path(), "two", &["export", "--user", "ben"]);
    assert!(
        !ben.contains("\"user_id\":\"ana\""),
        "ben's export holds none of ana's memories"
    );
    let markdown = mnemo(
        dir.path(),
        "two",
        &["export", "--format", "markdown", "--user", "ana"],
    );
    assert!(markdown.contains("#### Dana (sister)"), "{markdown}");
    assert!(
        markdown.contains("- Dana is a marine biologist"),
        "{markdown}"
    );
}

/// `metadata` of exactly `bytes` bytes as JSON, holding an array nested `depth` deep (the
/// object itself is level 1), filled with the characters JSON escapes longest.
fn metadata(bytes: usize, depth: usize) -> serde_json::Value {
    let mut deep = serde_json::json!("core");
    for _ in 1..depth {
        deep = serde_json::Value::Array(vec![deep]);
    }
    let mut value = serde_json::json!({"deep": deep, "note": ""});
    let missing = bytes - value.to_string().len();
    // "\u0001" takes 6 bytes as JSON, a quote 2 (\"), a letter 1.
    let filler =
        "\u{1}".repeat(missing / 6) + &"\"".repeat(missing % 6 / 2) + &"x".repeat(missing % 2);
    value["note"] = serde_json::json!(filler);
    assert_eq!(value.to_string().len(), bytes);
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_metadata_store_memory_accepts_exports_and_imports_back() {
    use mnemo_kernel::host::{Config, Kernel};
    use mnemo_kernel::ToolScope;
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(
        mnemo_host::builtin_extensions(),
        Config::parse(CONFIG, "test.toml").unwrap(),
    )
    .data_dir(dir.path().join("one"))
    .start()
    .await
    .unwrap();
    let scope = ToolScope {
        user_id: "ana".to_owned(),
        session_id: Some("s1".to_owned()),
        chat_id: None,
        at: chrono::Utc::now(),
        caller: mnemo_kernel::ToolCaller::Client,
    };
    // The largest content (max_content_chars, 20,000, of a character JSON writes in 6 bytes)
    // and the largest metadata: 16 KiB, 32 levels deep.
    let content = "\u{1}".repeat(20_000);
    let store = |metadata: serde_json::Value| {
        let (kernel, scope, content) = (kernel.clone(), scope.clone(), content.clone());
        async move {
            kernel
                .call_tool(
                    &scope,
                    "store_memory",
                    json!({"content": content, "memory_type": "fact", "metadata": metadata}),
                )
                .await
        }
    };
    store(metadata(16 * 1024, 32)).await.unwrap();
    for (metadata, limit) in [
        (metadata(16 * 1024 + 1, 32), "16384"),
        (metadata(200, 33), "32"),
        (metadata(10 << 20, 2), "16384"),
    ] {
        let refused = store(metadata).await.unwrap_err().to_string();
        assert!(
            refused.contains("argument `metadata`") && refused.contains(limit),
            "{refused}"
        );
    }
    let stats = kernel
        .call_tool(&scope, "memory_stats", json!({}))
        .await
        .unwrap();
    assert_eq!(stats["counts"]["fact"], 1, "nothing stored for a refusal");
    kernel.shutdown().await;

    let first = mnemo(dir.path(), "one", &["export"]);
    let longest = first.lines().map(str::len).max().unwrap();
    assert!(
        longest < 1 << 20,
        "a line of {longest} bytes is over max_event_bytes"
    );
    let export = dir.path().join("export.jsonl");
    std::fs::write(&export, &first).unwrap();
    let report = mnemo(dir.path(), "two", &["import", export.to_str().unwrap()]);
    assert!(report.contains("0 problems"), "{report}");
    assert_eq!(mnemo(dir.path(), "two", &["export"]), first);
}
