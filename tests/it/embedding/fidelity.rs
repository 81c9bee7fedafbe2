//! The local provider against reference vectors from sentence-transformers
//! (`extensions/embedding/tests/data/minilm-reference.json`, see its `PROVENANCE.md`).
//!
//! Needs the model: `scripts/fetch-model` (run by `scripts/setup`, hence by `make test`) installs
//! it into `$MNEMO_MODEL_DIR` or the default model directory. Without it these tests fail, by design.

use std::path::PathBuf;
use std::sync::Arc;

use mnemo_embedding::{
    EmbeddingApi, EmbeddingConfig, EmbeddingError, EmbeddingHealth, EmbeddingProvider,
    LocalEmbedder,
};
use mnemo_kernel::host::{Config, ExtensionRegistry, Kernel};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    sentences: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/extensions/embedding/tests/data/minilm-reference.json"
    );
    let text = std::fs::read_to_string(path)
        .expect("read extensions/embedding/tests/data/minilm-reference.json");
    serde_json::from_str(&text)
        .expect("parse extensions/embedding/tests/data/minilm-reference.json")
}

/// Where `scripts/fetch-model` installs the model: `$MNEMO_MODEL_DIR` or the default.
fn model_dir() -> PathBuf {
    std::env::var_os("MNEMO_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| EmbeddingConfig::default().resolved_model_dir())
}

/// The local model, or a failing test that says how to install it.
fn embedder() -> LocalEmbedder {
    let embedder = LocalEmbedder::new(model_dir(), 256, 32);
    if let EmbeddingHealth::Unavailable { reason } = embedder.load() {
        panic!(
            "the local embedding model is not installed: {reason} \
             (`make test` runs scripts/fetch-model through scripts/setup)"
        );
    }
    embedder
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

fn assert_unit(vector: &[f32], what: &str) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{what}: norm {norm}");
}

#[tokio::test]
async fn vectors_match_sentence_transformers() {
    let embedder = embedder();
    let reference = reference();
    assert_eq!(reference.sentences.len(), 12);
    assert_eq!(embedder.dimensions(), 384);
    assert_eq!(embedder.model_id(), "all-MiniLM-L6-v2");
    assert_eq!(embedder.health(), EmbeddingHealth::Ready);

    let mut worst = f32::MAX;
    for (sentence, expected) in reference.sentences.iter().zip(&reference.embeddings) {
        let vector = embedder.embed(sentence).await.expect("embed");
        assert_eq!(vector.len(), 384, "{sentence:?}");
        assert_unit(&vector, sentence);
        let similarity = cosine(&vector, expected);
        worst = worst.min(similarity);
        assert!(
            similarity >= 0.999,
            "cosine {similarity} < 0.999 with the reference for {sentence:?}"
        );
    }
    // The batch path (the indexer's) against the reference too, all twelve in one batch.
    let batch = embedder
        .embed_batch(&reference.sentences)
        .await
        .expect("embed_batch");
    for ((sentence, expected), vector) in reference
        .sentences
        .iter()
        .zip(&reference.embeddings)
        .zip(&batch)
    {
        let similarity = cosine(vector, expected);
        worst = worst.min(similarity);
        assert!(
            similarity >= 0.999,
            "batch: cosine {similarity} < 0.999 with the reference for {sentence:?}"
        );
    }
    eprintln!("lowest cosine with sentence-transformers: {worst:.7}");
}

#[tokio::test]
async fn max_seq_len_truncates_and_the_reference_sees_it() {
    // The shipped tokenizer.json truncates at 128 tokens; the reference was made at 256. The
    // long sentence must come out different at 128, or the fidelity test could not notice.
    let _ = embedder();
    let reference = reference();
    let (long_idx, long) = reference
        .sentences
        .iter()
        .enumerate()
        .max_by_key(|(_, sentence)| sentence.len())
        .expect("sentences");
    let at_128 = LocalEmbedder::new(model_dir(), 128, 32)
        .with_max_passages(1)
        .embed(long)
        .await
        .expect("embed at 128");
    let similarity = cosine(&at_128, &reference.embeddings[long_idx]);
    assert!(
        similarity < 0.999,
        "truncating at 128 tokens still gives cosine {similarity}"
    );
}

/// About 400 tokens of talk about a garden, then one sentence on another subject.
fn long_turn_with_a_late_fact() -> (String, &'static str) {
    let garden = [
        "The tomatoes finally ripened after weeks of rain, and the basil next to them is thriving.",
        "I moved the lavender to the sunny corner by the fence because it kept drooping in the shade.",
        "Slugs ate half of the lettuce again, so I am trying copper tape around the raised beds.",
        "The compost heap is warm now; turning it every Sunday morning seems to make the difference.",
        "Next spring I want to add a row of sunflowers along the wall for the bees and the birds.",
    ];
    let mut text = String::new();
    for round in 0..3 {
        for sentence in garden {
            text.push_str(sentence);
            text.push_str(if round == 2 { " " } else { " Anyway. " });
        }
    }
    text.push_str("Oh, and my sister Ines is getting married in Lisbon next June.");
    (text, "Where is Ines getting married?")
}

#[tokio::test]
async fn a_long_text_is_read_to_its_end_in_passages() {
    let passages = embedder();
    let truncated = LocalEmbedder::new(model_dir(), 256, 32).with_max_passages(1);
    let (turn, question) = long_turn_with_a_late_fact();
    let tokens = passages.token_count(&turn).expect("token count");
    let first_only = truncated.token_count(&turn).expect("token count");
    assert_eq!(first_only, 256, "one passage is the first 256 tokens");
    assert!(
        tokens > 256 + 32,
        "the whole turn is read, in two passages or more: {tokens} tokens"
    );

    let query = passages.embed(question).await.expect("embed the question");
    let read_whole = passages.embed(&turn).await.expect("embed in passages");
    let cut = truncated.embed(&turn).await.expect("embed truncated");
    assert_unit(&read_whole, "pooled passages");
    let (whole, cut) = (cosine(&query, &read_whole), cosine(&query, &cut));
    eprintln!("question against the turn: {whole:.3} in passages, {cut:.3} cut at 256 tokens");
    assert!(
        whole > cut + 0.05,
        "the late fact should bring the question closer: {whole} in passages, {cut} cut"
    );

    // A text that fits in one passage gets exactly its one passage's vector.
    let short = "I moved the lavender to the sunny corner.";
    assert_eq!(
        passages.embed(short).await.expect("embed"),
        truncated.embed(short).await.expect("embed"),
    );
    // In a batch, a long text gets the vector it gets alone.
    let batch = passages
        .embed_batch(&[short.to_owned(), turn.clone()])
        .await
        .expect("batch");
    assert!(cosine(&batch[1], &read_whole) > 0.99999);
}

#[tokio::test]
async fn batch_and_single_give_the_same_vectors() {
    let embedder = embedder();
    let sentences = reference().sentences;
    let batch = embedder.embed_batch(&sentences).await.expect("embed_batch");
    assert_eq!(batch.len(), sentences.len());
    for (sentence, from_batch) in sentences.iter().zip(&batch) {
        // On CPUs with AVX2 both go through the packed forward of `single.rs` (a batch text
        // by text); elsewhere a single text and a batch both take candle's f32 path, padded
        // differently: they agree to a few parts in 10⁵.
        let single = embedder.embed(sentence).await.expect("embed");
        let max_diff = single
            .iter()
            .zip(from_batch)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0_f32, f32::max);
        assert!(
            max_diff < 2e-4 && cosine(&single, from_batch) > 0.99999,
            "{sentence:?}: batch and single differ by up to {max_diff}"
        );
    }

    // Batches larger than batch_size are split and keep their order.
    let small_batches = LocalEmbedder::new(model_dir(), 256, 5);
    let split = small_batches
        .embed_batch(&sentences)
        .await
        .expect("embed_batch in chunks");
    for ((sentence, a), b) in sentences.iter().zip(&split).zip(&batch) {
        assert!(
            cosine(a, b) > 0.99999,
            "{sentence:?} changed when batched by 5"
        );
    }
    assert!(embedder.embed_batch(&[]).await.expect("empty").is_empty());
}

#[tokio::test]
async fn a_missing_model_leaves_the_extension_running_but_unavailable() {
    let empty = tempfile::tempdir().expect("temp dir");
    let missing = empty.path().join("all-MiniLM-L6-v2");
    let text = format!(
        "[extensions.embedding]\nmodel_dir = {}\n",
        toml_string(&missing.display().to_string())
    );
    let config = Config::parse(&text, "test.toml").expect("config");
    let data_dir = tempfile::tempdir().expect("temp dir");
    let kernel = Kernel::builder(
        ExtensionRegistry::new().with(mnemo_embedding::factory()),
        config,
    )
    .data_dir(data_dir.path())
    .start()
    .await
    .expect("the kernel starts without the model");

    let api: Arc<dyn EmbeddingApi> = kernel
        .context()
        .services()
        .get::<dyn EmbeddingApi>()
        .expect("the service is published even without the model");
    let EmbeddingHealth::Unavailable { reason } = api.health() else {
        panic!("health is Ready without a model");
    };
    assert!(reason.contains("scripts/fetch-model"), "{reason}");
    assert!(
        reason.contains(&missing.join("config.json").display().to_string()),
        "{reason}"
    );
    assert!(matches!(
        api.embed("hello").await,
        Err(EmbeddingError::Unavailable(message)) if message.contains("scripts/fetch-model")
    ));
    assert_eq!(api.dimensions(), 384);
    kernel.shutdown().await;
}

#[tokio::test]
async fn the_extension_publishes_the_local_model_when_installed() {
    let _ = embedder(); // fails with the install hint if the model is missing
    let config = EmbeddingConfig {
        provider: EmbeddingProvider::Local,
        model_dir: model_dir(),
        ..EmbeddingConfig::default()
    };
    let text = format!(
        "[extensions.embedding]\nmodel_dir = {}\n",
        toml_string(&config.model_dir.display().to_string())
    );
    let data_dir = tempfile::tempdir().expect("temp dir");
    let kernel = Kernel::builder(
        ExtensionRegistry::new().with(mnemo_embedding::factory()),
        Config::parse(&text, "test.toml").expect("config"),
    )
    .data_dir(data_dir.path())
    .start()
    .await
    .expect("kernel starts");
    let api = kernel
        .context()
        .services()
        .get::<dyn EmbeddingApi>()
        .expect("service");
    assert_eq!(api.health(), EmbeddingHealth::Ready);
    let vector = api.embed("My wife's name is Sarah.").await.expect("embed");
    assert_eq!(vector.len(), api.dimensions());
    kernel.shutdown().await;
}

fn toml_string(value: &str) -> String {
    toml::Value::String(value.to_owned()).to_string()
}
