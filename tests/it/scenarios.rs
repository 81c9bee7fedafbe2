//! Every replay scenario of `tests/scenarios/` is its own test case, twice: the real binary
//! replays it on the shipped config, with the memory store in SQLite (`sqlite::…`) and in
//! PostgreSQL (`postgres::…`, a fresh database of the shared test server each), and every
//! expectation in it must hold on both. A scenario file without a test case here is an error
//! (`every_scenario_file_is_a_test_case`).

use std::path::Path;
use std::process::Command;

/// Replays one scenario, on PostgreSQL when `database_url` is given; every expectation must
/// hold.
fn replay(scenario: &str, database_url: Option<String>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    match database_url {
        Some(url) => command.env("MNEMO_DATABASE_URL", url),
        None => command.env_remove("MNEMO_DATABASE_URL"),
    };
    let output = command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .args(["--config", "config.toml", "replay"])
        .arg(format!("tests/scenarios/{scenario}"))
        .output()
        .expect("mnemo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success() && last.ends_with(" passed, 0 failed") && !last.starts_with("0 "),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    super::replay(concat!(stringify!($name), ".jsonl"), None);
                }
            )*
        }

        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[test]
                fn $name() {
                    super::replay(
                        concat!(stringify!($name), ".jsonl"),
                        Some(mnemo_pg_fixture::fresh_database()),
                    );
                }
            )*
        }

        /// Every scenario with a test case above.
        const SCENARIOS: &[&str] = &[$(concat!(stringify!($name), ".jsonl")),*];
    };
}

scenarios!(
    agent_turn,
    agent_turn_empty_reply,
    agent_turn_imitated_calls,
    agent_turn_small_model,
    as_of,
    consolidation,
    consolidation_failures,
    consolidation_grounding,
    consolidation_incremental,
    consolidation_nightly_announces,
    consolidation_sanity,
    context_current_message,
    context_small_store,
    context_statements_first,
    context_window_turns,
    decay_faded_facts,
    decay_soft_delete,
    enrichment,
    enrichment_failures,
    forget_lineage,
    forget_soft,
    kernel_basics,
    maintenance_without_llm,
    markdown_beside_memory,
    markdown_consolidation,
    markdown_fallback,
    markdown_compression,
    markdown_memory_history,
    markdown_new_session,
    markdown_only,
    markdown_reference_settings,
    markdown_session_per_chat,
    markdown_shared_session_id,
    markdown_tools,
    markdown_two_sessions,
    markdown_window,
    markdown_world_per_user,
    markdown_world_shared_writers,
    memory_decay_and_corrections,
    memory_model_missing,
    memory_poisoning,
    memory_search,
    memory_semantic,
    memory_without_embedding,
    model_written_memories,
    model_written_memories_refused,
    people,
    people_external_ids,
    people_from_model_subjects,
    people_scopes,
    reflection,
    reflection_scopes,
    search_feedback,
    search_sentence_keys,
    search_sessions,
    search_speakers_and_periods,
    session_provider,
    shared_session_id,
    supersession_and_expiry,
    tools_change_only_this_conversation,
    trust_by_source,
    typed_tools,
    virtual_clock,
);

#[test]
fn every_scenario_file_is_a_test_case() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("tests/scenarios exists")
        .map(|entry| entry.expect("readable entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = SCENARIOS.iter().map(|name| (*name).to_owned()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "add each scenario file to `scenarios!` in tests/it/scenarios.rs"
    );
}
