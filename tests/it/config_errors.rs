//! A bad configuration stops start-up with a message naming the file, the key and the reason.

use std::process::Command;

use mnemo_kernel::host::{Config, Kernel};

/// A kernel on `text` with the registry the tests replay on: the built-in extensions and the
/// example `notes`, whose options these tests get wrong.
async fn start(text: &str) -> Result<Kernel, String> {
    start_with(mnemo_devtools::dev_extensions(), text).await
}

async fn start_with(
    registry: mnemo_kernel::host::ExtensionRegistry,
    text: &str,
) -> Result<Kernel, String> {
    let config = Config::parse(text, "test.toml").map_err(|err| err.to_string())?;
    let dir = tempfile::tempdir().unwrap();
    Kernel::builder(registry, config)
        .data_dir(dir.path())
        .start()
        .await
        .map_err(|err| err.to_string())
}

#[tokio::test]
async fn unknown_extension_is_named_with_the_known_ones() {
    let err = start("[extensions.memroy]\nenabled = true\n")
        .await
        .unwrap_err();
    assert!(err.starts_with("test.toml: "), "{err}");
    assert!(err.contains("unknown extension `memroy`"), "{err}");
    assert!(
        err.contains("known extensions: memory, memory_maintenance"),
        "{err}"
    );
}

/// Configs copied from earlier releases switch off `[extensions.notes]`, an example that is no
/// longer built in: switched off, an extension the host lacks is ignored; switched on, it is
/// an error.
#[tokio::test]
async fn a_switched_off_extension_the_host_lacks_is_ignored() {
    let kernel = start_with(
        mnemo_host::builtin_extensions(),
        "[extensions.notes]\nenabled = false\n[extensions.memory]\n",
    )
    .await
    .unwrap();
    assert_eq!(kernel.extension_names(), vec!["memory"]);
    kernel.shutdown().await;
    let err = start_with(
        mnemo_host::builtin_extensions(),
        "[extensions.notes]\nenabled = true\n",
    )
    .await
    .unwrap_err();
    assert!(err.contains("unknown extension `notes`"), "{err}");
}

#[tokio::test]
async fn unknown_key_in_an_extension_section_is_named() {
    let err = start("[extensions.notes]\ndigest_cronn = \"0 3 * * *\"\n")
        .await
        .unwrap_err();
    assert!(err.contains("test.toml"), "{err}");
    assert!(err.contains("[extensions.notes]"), "{err}");
    assert!(err.contains("unknown field `digest_cronn`"), "{err}");
}

#[tokio::test]
async fn disabled_sections_are_checked_too() {
    let err = start("[extensions.notes]\nenabled = false\nmax_notes_per_user = \"lots\"\n")
        .await
        .unwrap_err();
    assert!(err.contains("key `max_notes_per_user`"), "{err}");
    assert!(err.contains("invalid type"), "{err}");
}

#[tokio::test]
async fn bad_value_in_kernel_section_is_named() {
    let err = start("[kernel]\nqueue_capacity = -3\n").await.unwrap_err();
    assert!(err.contains("key `kernel.queue_capacity`"), "{err}");
}

#[tokio::test]
async fn bad_cron_expression_names_job_and_reason() {
    let err = start("[extensions.notes]\ndigest_cron = \"at three\"\n")
        .await
        .unwrap_err();
    assert!(err.contains("job `notes_digest`"), "{err}");
    assert!(err.contains("invalid cron expression `at three`"), "{err}");
}

#[tokio::test]
async fn several_problems_are_reported_at_once() {
    let err = start("[extensions.memroy]\n[extensions.notes]\ncolour = 1\n")
        .await
        .unwrap_err();
    assert!(err.contains("2 problems"), "{err}");
    assert!(err.contains("memroy") && err.contains("colour"), "{err}");
}

#[tokio::test]
async fn every_bad_type_in_an_extension_section_is_reported() {
    let err =
        start("[extensions.notes]\nmax_notes_per_user = \"lots\"\ndigest_cron = 5\ncolour = 1\n")
            .await
            .unwrap_err();
    assert!(err.starts_with("test.toml: 3 problems"), "{err}");
    for (key, reason) in [
        ("max_notes_per_user", "invalid type: string \"lots\""),
        ("digest_cron", "invalid type: integer `5`"),
        ("colour", "unknown field `colour`"),
    ] {
        assert!(
            err.lines().any(|line| line.contains("[extensions.notes]")
                && line.contains(key)
                && line.contains(reason)),
            "{key}: {err}"
        );
    }
}

#[tokio::test]
async fn every_bad_type_in_a_kernel_section_is_reported() {
    let err = start(
        "[kernel]\nqueue_capacity = \"many\"\nmax_tool_rounds = -1\nshutdown_grace_ms = 0\n\
         [llm]\ntimeout_secs = \"soon\"\ntemperature = 9.0\n",
    )
    .await
    .unwrap_err();
    assert!(err.starts_with("test.toml: 4 problems"), "{err}");
    for (key, reason) in [
        ("kernel.queue_capacity", "invalid type"),
        ("kernel.max_tool_rounds", "invalid value: integer `-1`"),
        ("llm.timeout_secs", "invalid type"),
        // A value check of a key that parsed, beside the type errors of the others.
        ("llm.temperature", "must be between 0 and 2"),
    ] {
        assert!(
            err.lines()
                .any(|line| line.contains(&format!("key `{key}`")) && line.contains(reason)),
            "{key}: {err}"
        );
    }
}

#[tokio::test]
async fn the_shipped_config_starts() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config.toml")).unwrap();
    assert_eq!(text, mnemo_host::DEFAULT_CONFIG);
    let kernel = start_with(mnemo_host::builtin_extensions(), &text)
        .await
        .expect("config.toml starts a kernel on the product's own extensions");
    kernel.shutdown().await;
}

/// Every config under `examples/` starts a kernel on the product's own extensions.
#[tokio::test]
async fn every_example_config_starts() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut started = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let kernel = start_with(mnemo_host::builtin_extensions(), &text)
            .await
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        kernel.shutdown().await;
        started += 1;
    }
    assert!(started >= 2, "markdown-only.toml and reference.toml");
}

/// `examples/reference.toml` is the reference design (seed 003) where mnemo's defaults differ:
/// Reciprocal Rank Fusion with k = 60, its orchestrator tools, soft forgetting and soft-deleting
/// decay.
#[test]
fn the_reference_profile_sets_what_the_reference_says() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/reference.toml"
    ))
    .unwrap();
    let file: toml::Table = toml::from_str(&text).unwrap();
    let mut section = file["extensions"]["memory"].as_table().unwrap().clone();
    // The kernel's own key of every section, not the extension's.
    section.remove("enabled");
    let memory: mnemo_memory::MemoryConfig = toml::Value::Table(section).try_into().unwrap();
    assert_eq!(memory.fusion, mnemo_memory_api::FusionMethod::Rrf);
    assert!((memory.rrf_k - 60.0).abs() < f64::EPSILON);
    assert_eq!(memory.tools, mnemo_memory::ToolProfile::Reference);
    assert_eq!(memory.forget, mnemo_memory::ForgetMode::Soft);
    let defaults = mnemo_memory::MemoryConfig::default();
    assert_eq!(defaults.fusion, mnemo_memory_api::FusionMethod::Scores);
    assert_eq!(defaults.forget, mnemo_memory::ForgetMode::Hard);
    assert_eq!(
        file["extensions"]["memory_maintenance"]["decay_action"].as_str(),
        Some("soft_delete")
    );
}

#[test]
fn the_binary_exits_non_zero_with_a_one_line_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[extensions.memroy]\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(&path)
        .args(["--data-dir"])
        .arg(dir.path())
        .args(["jobs", "list"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("mnemo: "), "{stderr}");
    assert!(stderr.contains("bad.toml"), "{stderr}");
    assert!(stderr.contains("unknown extension `memroy`"), "{stderr}");
}

/// `mnemo stats` on the config file `config`, with a fresh data directory and no model settings
/// from the environment: its output.
fn stats(config: &std::path::Path) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("RUST_LOG")
        .env_remove("MNEMO_LLM_BASE_URL")
        .env_remove("MNEMO_LLM_API_KEY")
        .env_remove("MNEMO_LLM_MODEL")
        .arg("stats")
        .output()
        .unwrap()
}

#[test]
fn the_default_config_is_quiet() {
    let output = stats(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config.toml"
    )));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The shipped config asks for the local embedding model; where `scripts/fetch-model` has not
    // installed it, saying so is right. Nothing else may warn.
    let model_installed = std::env::var_os("HOME").is_some_and(|home| {
        std::path::Path::new(&home)
            .join(".cache/mnemo/models/all-MiniLM-L6-v2/config.json")
            .exists()
    });
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("WARN") || line.contains("ERROR"))
        .filter(|line| model_installed || !line.contains("local embeddings unavailable"))
        .collect();
    assert!(warnings.is_empty(), "{stderr}");
}

#[test]
fn an_accurate_strategy_chosen_by_hand_warns_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[extensions.embedding]\nenabled = false\n[extensions.ner]\naccurate = [\"llm\"]\n[extensions.memory]\n",
    )
    .unwrap();
    let output = stats(&config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("WARN") && line.contains("`accurate` lists `llm`")),
        "{stderr}"
    );
}

/// `decay_action` is one of two words; another is refused, naming both, and nothing starts.
#[tokio::test]
async fn an_unknown_decay_action_names_both_choices() {
    let err =
        start("[extensions.memory]\n[extensions.memory_maintenance]\ndecay_action = \"delete\"\n")
            .await
            .unwrap_err();
    assert!(
        err.lines()
            .any(|line| line.contains("[extensions.memory_maintenance]")
                && line.contains("decay_action")
                && line.contains("unknown variant `delete`, expected `archive` or `soft_delete`")),
        "{err}"
    );
}
