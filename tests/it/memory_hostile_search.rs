//! Hostile search strings reach the memory store through the real tool path and come back as
//! results or a clean empty answer, never an error.

use chrono::{TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::{ConversationEvent, ToolScope};
use serde_json::{json, Value};

#[tokio::test]
async fn hostile_queries_never_error() {
    let config = Config::parse("[extensions.memory]\n", "test.toml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 3, 1, 10, 0, 0).unwrap();
    let kernel = Kernel::builder(mnemo_host::builtin_extensions(), config)
        .virtual_clock(start)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let stored = [
        "I \"love\" coffee AND tea",
        "NEAR(the office) is where OR-gates live",
        "emoji time 🎉🦀 with ünïcödé",
        "column:value and prefix* and ^caret",
    ];
    for (n, text) in stored.iter().enumerate() {
        let line = json!({"type": "user_message", "at": start.to_rfc3339(), "session_id": "s1",
                          "user_id": "ana", "text": text, "id": format!("e{n}")});
        kernel
            .publish(ConversationEvent::from_value(line).unwrap().into_event())
            .await
            .unwrap();
    }
    kernel.settle().await;
    let scope = ToolScope {
        user_id: "ana".into(),
        session_id: Some("s2".into()),
        chat_id: None,
        at: start,
        caller: mnemo_kernel::ToolCaller::Client,
    };
    let huge = "lorem ipsum dolor ".repeat(100_000 / 18 + 1);
    let hostile: Vec<String> = vec![
        String::new(),
        "   ".into(),
        "\"".into(),
        "\"\"\"".into(),
        "'".into(),
        "coffee\" OR \"1\"=\"1".into(),
        "AND".into(),
        "OR NOT AND".into(),
        "NEAR(coffee tea, 2)".into(),
        "*".into(),
        "coffee*".into(),
        "content:coffee".into(),
        "((((".into(),
        "))".into(),
        "(coffee".into(),
        "^coffee".into(),
        "-coffee".into(),
        "coffee; DROP TABLE memories; --".into(),
        "\u{0}coffee\u{0}".into(),
        "🎉🦀".into(),
        "ünïcödé".into(),
        huge.clone(),
    ];
    assert!(huge.len() >= 100_000);
    for query in &hostile {
        let result = kernel
            .call_tool(&scope, "search_memory", json!({"query": query}))
            .await;
        let shown: String = query.chars().take(40).collect();
        let Ok(Value::Array(hits)) = result else {
            panic!("query {shown:?} gave {result:?}");
        };
        // Whatever the query, a hit is one of ana's four turns, each at most once.
        let mut ids: Vec<&str> = hits.iter().filter_map(|hit| hit["id"].as_str()).collect();
        assert_eq!(ids.len(), hits.len(), "query {shown:?}: {hits:?}");
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            hits.len(),
            "query {shown:?} repeated a hit: {hits:?}"
        );
        for hit in &hits {
            let content = hit["content"].as_str().unwrap_or_default();
            assert!(
                stored.contains(&content),
                "query {shown:?} found {content:?}, which ana never said"
            );
        }
    }
    // The hostile text still finds what it names.
    let hits = kernel
        .call_tool(
            &scope,
            "search_memory",
            json!({"query": "\"love\" AND coffee"}),
        )
        .await
        .unwrap();
    assert!(
        hits[0]["content"].as_str().unwrap().contains("coffee"),
        "{hits}"
    );
    let hits = kernel
        .call_tool(&scope, "search_memory", json!({"query": "🎉🦀"}))
        .await
        .unwrap();
    assert_eq!(
        hits.as_array().unwrap().len(),
        0,
        "emoji are not words: {hits}"
    );
    let hits = kernel
        .call_tool(&scope, "search_memory", json!({"query": "ünïcödé"}))
        .await
        .unwrap();
    assert!(
        hits[0]["content"].as_str().unwrap().contains("emoji"),
        "{hits}"
    );
    kernel.shutdown().await;
}
