//! The `ner` service through its public API and through a kernel: the fast hot path, the accurate
//! strategy with a scripted model (fenced JSON, JSON in prose, a model error), availability, and
//! config errors.

use std::sync::Arc;

use mnemo_kernel::host::{Config, ExtensionRegistry, Kernel, ScriptedLlm, ScriptedReply};
use mnemo_kernel::LlmClient;
use mnemo_ner::{EntityType, ExtractedEntity, NerApi, NerConfig, NerError, NerService, Strategy};

fn summary(entities: &[ExtractedEntity]) -> Vec<(String, EntityType, Option<String>, String)> {
    entities
        .iter()
        .map(|e| {
            (
                e.surface.clone(),
                e.entity_type,
                e.relation.clone(),
                e.provider.clone(),
            )
        })
        .collect()
}

fn entry(
    surface: &str,
    entity_type: EntityType,
    relation: Option<&str>,
    provider: &str,
) -> (String, EntityType, Option<String>, String) {
    (
        surface.to_owned(),
        entity_type,
        relation.map(str::to_owned),
        provider.to_owned(),
    )
}

fn with_scripted(replies: &[ScriptedReply]) -> (NerService, Arc<ScriptedLlm>) {
    let llm = Arc::new(ScriptedLlm::new());
    for reply in replies {
        llm.push(reply.clone());
    }
    let service =
        NerService::new(&NerConfig::default()).with_llm(Arc::clone(&llm) as Arc<dyn LlmClient>);
    (service, llm)
}

#[test]
fn the_fast_strategy_handles_a_hundred_typical_sentences() {
    let templates = [
        "My wife Sarah wants to go hiking on 2026-03-14.",
        "@dana can you check #apollo before Friday?",
        "I had lunch with Tom Hardy yesterday at Acme Corp.",
        "Send the slides to ops@northwind.io, see https://example.com/deck.",
        "Sounds good, thanks!",
        "We moved to Lisbon in March 2025 and I love it.",
        "Hi Mark, my boss, Michael, says the University of Toronto called.",
        "ok",
        "",
        "Zoë Ångström’s birthday is on 3 March — don't forget 🎂",
    ];
    let ner = NerService::default();
    let mut n_entities = 0;
    for index in 0..100 {
        let text = templates[index % templates.len()];
        let entities = ner.extract_fast(text);
        for pair in entities.windows(2) {
            assert!(
                pair[0].end <= pair[1].start,
                "overlap in {text:?}: {entities:?}"
            );
        }
        for entity in &entities {
            assert_eq!(&text[entity.start..entity.end], entity.surface);
            assert!((0.0..=1.0).contains(&entity.confidence));
            assert!(!entity.canonical.is_empty());
        }
        n_entities += entities.len();
    }
    assert!(n_entities >= 100, "found only {n_entities} entities");
}

#[test]
fn odd_input_never_panics() {
    let pieces = [
        "Dr.",
        "Mr",
        ".",
        ",",
        "'s",
        "’s",
        "@",
        "#",
        "@a",
        "#1",
        "x@y.io",
        "http://",
        "www.",
        "https://a.b/(c",
        ")",
        "Zoë",
        "Ångström",
        "é",
        "🎂",
        "\n",
        "\u{301}",
        "My",
        "wife",
        "Sarah",
        "and",
        "I",
        "in",
        "moved to",
        "New",
        "York",
        "Inc",
        "University",
        "of",
        "03/04/",
        "2026",
        "-",
        "March",
        "3rd",
        "31",
        "&",
        "'",
        "\"",
        "O'",
        "ß",
        "İ",
        "ǅ",
        " ",
        "  ",
    ];
    let ner = NerService::default();
    // A fixed linear congruential sequence: the same strings on every run.
    let mut state: u64 = 0x5eed;
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..(state % 12) {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            text.push_str(pieces[(state >> 33) as usize % pieces.len()]);
            if state & 1 == 0 {
                text.push(' ');
            }
        }
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        for entity in ner.extract_fast(&text) {
            assert_eq!(
                text.get(entity.start..entity.end),
                Some(entity.surface.as_str())
            );
        }
    }
}

#[test]
fn fast_results_in_text_order_with_canonical_names() {
    let ner = NerService::default();
    let entities = ner.extract_fast(
        "My sister Dana Kim (@dana) emailed Dana.Kim@Example.com about #offsite on 3 March 2026.",
    );
    let canonical: Vec<(&str, &str)> = entities
        .iter()
        .map(|e| (e.entity_type.as_str(), e.canonical.as_str()))
        .collect();
    assert_eq!(
        canonical,
        vec![
            ("person", "Dana Kim"),
            ("person", "dana"),
            ("email", "dana.kim@example.com"),
            ("project", "offsite"),
            ("date", "2026-03-03"),
        ]
    );
    assert_eq!(entities[0].relation.as_deref(), Some("sister"));
}

#[test]
fn min_confidence_drops_weak_guesses() {
    let strict = NerService::new(&NerConfig {
        min_confidence: 0.9,
        ..NerConfig::default()
    });
    let entities = strict.extract_fast("Sarah and John met my wife Ana on 2026-01-02.");
    let surfaces: Vec<&str> = entities.iter().map(|e| e.surface.as_str()).collect();
    assert_eq!(surfaces, vec!["Ana", "2026-01-02"]);
}

#[tokio::test]
async fn accurate_reads_a_fenced_json_reply_and_merges_with_the_fast_providers() {
    let reply = "```json\n{\"entities\": [\
        {\"text\": \"Sarah\", \"type\": \"person\"},\
        {\"text\": \"Globex\", \"type\": \"organization\"},\
        {\"text\": \"Porto\", \"type\": \"place\"},\
        {\"text\": \"the gala\", \"type\": \"event\"}]}\n```";
    let (ner, llm) = with_scripted(&[ScriptedReply::Text(reply.to_owned())]);
    assert!(ner.accurate_available());
    let text = "My wife Sarah starts at Globex in Porto after the gala on 2026-05-01.";
    let entities = ner.extract(text, Strategy::Accurate).await.unwrap();
    assert_eq!(
        summary(&entities),
        vec![
            entry("Sarah", EntityType::Person, Some("wife"), "pattern"),
            entry("Globex", EntityType::Organization, None, "llm"),
            entry("Porto", EntityType::Location, None, "llm"),
            entry("the gala", EntityType::Other, None, "llm"),
            entry("2026-05-01", EntityType::Date, None, "regex"),
        ]
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].json_reply);
    assert_eq!(
        requests[0].messages.last().map(|m| m.content.as_str()),
        Some(text)
    );
}

#[tokio::test]
async fn accurate_reads_json_wrapped_in_prose() {
    let reply = "Sure! Here are the entities I found: {\"entities\": [{\"text\": \"priya\", \
                 \"type\": \"person\", \"relation\": \"colleague\"}]} Anything else?";
    let (ner, _llm) = with_scripted(&[ScriptedReply::Text(reply.to_owned())]);
    let entities = ner
        .extract("lunch with priya tomorrow", Strategy::Accurate)
        .await
        .unwrap();
    assert_eq!(
        summary(&entities),
        vec![entry("priya", EntityType::Person, Some("colleague"), "llm")]
    );
    assert_eq!(entities[0].start, 11);
}

#[tokio::test]
async fn a_model_error_is_a_provider_error_not_a_fallback() {
    let (ner, llm) = with_scripted(&[
        ScriptedReply::Error("overloaded".to_owned()),
        ScriptedReply::Timeout,
        ScriptedReply::Text("I cannot help with that.".to_owned()),
    ]);
    for _ in 0..3 {
        let err = ner
            .extract("My wife Sarah", Strategy::Accurate)
            .await
            .unwrap_err();
        let NerError::Provider { provider, reason } = &err else {
            panic!("unexpected error {err:?}");
        };
        assert_eq!(provider, "llm");
        assert!(!reason.is_empty());
    }
    assert_eq!(llm.remaining(), 0);
    // The fast strategy never asks the model.
    assert_eq!(
        ner.extract("My wife Sarah", Strategy::Fast)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(llm.requests().len(), 3);
}

#[tokio::test]
async fn without_a_model_accurate_is_unavailable_and_says_so() {
    let ner = NerService::default();
    assert!(!ner.accurate_available());
    assert!(matches!(
        ner.extract("My wife Sarah", Strategy::Accurate).await,
        Err(NerError::Provider { .. })
    ));
    let fast_only = NerService::new(&NerConfig {
        accurate: vec![mnemo_ner::ProviderName::Regex],
        ..NerConfig::default()
    })
    .with_llm(Arc::new(ScriptedLlm::new()));
    assert!(!fast_only.accurate_available(), "no slow provider listed");
    let entities = fast_only
        .extract("see #apollo", Strategy::Accurate)
        .await
        .unwrap();
    assert_eq!(entities.len(), 1);
}

async fn start_kernel(
    config: &str,
    llm: Option<Arc<dyn LlmClient>>,
) -> (Kernel, tempfile::TempDir) {
    let registry = ExtensionRegistry::new().with(mnemo_ner::factory());
    let config = Config::parse(config, "test.toml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut builder = Kernel::builder(registry, config).data_dir(dir.path());
    if let Some(llm) = llm {
        builder = builder.llm(llm);
    }
    (builder.start().await.unwrap(), dir)
}

#[tokio::test]
async fn the_extension_publishes_the_service_and_attaches_the_kernels_model() {
    let llm = Arc::new(ScriptedLlm::new());
    llm.push(ScriptedReply::Text(
        "{\"entities\": [{\"text\": \"Acme\", \"type\": \"organization\"}]}".to_owned(),
    ));
    let (kernel, _dir) = start_kernel(
        "[extensions.ner]\n",
        Some(Arc::clone(&llm) as Arc<dyn LlmClient>),
    )
    .await;
    let ner = kernel.context().services().get::<dyn NerApi>().unwrap();
    assert!(ner.accurate_available());
    let entities = ner
        .extract("I work with Acme now", Strategy::Accurate)
        .await
        .unwrap();
    assert_eq!(
        summary(&entities),
        vec![entry("Acme", EntityType::Organization, None, "llm")]
    );
    kernel.shutdown().await;

    let (without_model, _dir) = start_kernel("[extensions.ner]\n", None).await;
    let ner = without_model
        .context()
        .services()
        .get::<dyn NerApi>()
        .unwrap();
    assert!(!ner.accurate_available());
    assert_eq!(ner.extract_fast("ping @dana").len(), 1);
    without_model.shutdown().await;
}

#[tokio::test]
async fn config_errors_name_the_key() {
    for (section, key) in [
        ("fast = [\"regex\", \"spacy\"]", "fast"),
        ("fast = [\"llm\"]", "fast"),
        ("min_confidence = 2.0", "min_confidence"),
        ("colour = \"blue\"", "colour"),
    ] {
        let registry = ExtensionRegistry::new().with(mnemo_ner::factory());
        let config = Config::parse(&format!("[extensions.ner]\n{section}\n"), "test.toml").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = Kernel::builder(registry, config)
            .data_dir(dir.path())
            .start()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("test.toml"), "{err}");
        assert!(err.contains("[extensions.ner]"), "{err}");
        assert!(err.contains(key), "{section}: {err}");
    }
}
