//! Without any LLM configured, consolidation, enrichment and reflection say they are skipped,
//! while ingest, search and decay keep working.

use chrono::{TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::{ConversationEvent, ToolScope};
use serde_json::json;

#[tokio::test]
async fn maintenance_degrades_without_a_model() {
    let config = Config::parse(
        "[extensions.ner]\n[extensions.memory]\ntools = \"all\"\n[extensions.memory_maintenance]\n[extensions.memory_reflection]\n",
        "test.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 6, 1, 18, 0, 0).unwrap();
    let kernel = Kernel::builder(mnemo::builtin_extensions(), config)
        .virtual_clock(start)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    assert!(kernel.context().llm().is_none());
    for (session, text) in [
        ("s1", "my sister Dana lives in Lisbon"),
        ("s2", "new session"),
    ] {
        let line = json!({"type": "user_message", "at": start.to_rfc3339(), "session_id": session,
                          "user_id": "ana", "text": text});
        kernel
            .publish(ConversationEvent::from_value(line).unwrap().into_event())
            .await
            .unwrap();
    }
    kernel.settle().await;
    assert_eq!(
        kernel
            .context()
            .router()
            .published("memory.session_completed"),
        1
    );

    let consolidation = kernel.run_job("execute_consolidation").await.unwrap();
    assert_eq!(
        consolidation.outcome,
        Ok("skipped: no LLM is configured".to_owned())
    );
    let enrichment = kernel.run_job("execute_entity_enrichment").await.unwrap();
    assert_eq!(
        enrichment.outcome,
        Ok("skipped: no accurate NER provider".to_owned())
    );
    let reflection = kernel.run_job("execute_reflection").await.unwrap();
    assert_eq!(
        reflection.outcome,
        Ok("skipped: no LLM is configured".to_owned())
    );

    let scope = ToolScope {
        user_id: "ana".into(),
        session_id: Some("s2".into()),
        chat_id: None,
        at: start,
    };
    let found = kernel
        .call_tool(&scope, "search_memory", json!({"query": "Lisbon"}))
        .await
        .unwrap();
    assert_eq!(found[0]["content"], "my sister Dana lives in Lisbon");
    kernel
        .call_tool(
            &scope,
            "remember_fact",
            json!({"content": "Dana likes fado"}),
        )
        .await
        .unwrap();
    let runs = kernel
        .advance_to(start + chrono::Duration::days(40))
        .await
        .unwrap();
    let decay: Vec<_> = runs
        .iter()
        .filter(|run| run.job == "execute_decay")
        .collect();
    assert_eq!(decay.len(), 40);
    assert!(decay.iter().all(|run| run.outcome.is_ok()));
    assert!(
        decay
            .iter()
            .any(|run| run.outcome.as_ref().unwrap().contains("1 pruned")),
        "the untouched fact fades within 40 days"
    );
    kernel.shutdown().await;
}
