//! Every product of the packed forward against sentence-transformers' reference vectors.
//!
//! `tests/it/embedding/fidelity.rs` checks the provider end to end, which only ever runs the best kernels
//! this CPU has (the product timed fastest, and AVX-512 for the rest); this checks each set the
//! CPU can run: every product it has, and the forward a CPU with only AVX2 runs (scalar
//! attention, GELU and layer norm).
//! Needs the model, as `tests/it/embedding/fidelity.rs` does (`scripts/fetch-model`).

use std::path::PathBuf;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config;
use tokenizers::{Tokenizer, TruncationParams};

use super::{Kernels, Precision, SingleTextBert};
use crate::EmbeddingConfig;

/// The sentences and vectors of `tests/data/minilm-reference.json`.
fn reference() -> (Vec<String>, Vec<Vec<f32>>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/minilm-reference.json"
    );
    let text = std::fs::read_to_string(path).expect("read tests/data/minilm-reference.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("parse the reference");
    let sentences = serde_json::from_value(json["sentences"].clone()).expect("sentences");
    let embeddings = serde_json::from_value(json["embeddings"].clone()).expect("embeddings");
    (sentences, embeddings)
}

fn cosine(left: &[f32], right: &[f32]) -> f32 {
    let dot: f32 = left.iter().zip(right).map(|(a, b)| a * b).sum();
    let norm = |vector: &[f32]| vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(left) * norm(right))
}

#[test]
fn every_kernel_set_matches_sentence_transformers() {
    let dir = std::env::var_os("MNEMO_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| EmbeddingConfig::default().resolved_model_dir());
    let config: Config = serde_json::from_str(
        &std::fs::read_to_string(dir.join("config.json"))
            .expect("the model is installed (scripts/fetch-model)"),
    )
    .expect("config.json");
    let tensors = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu)
        .expect("model.safetensors");
    let weights = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).expect("tokenizer");
    // One text at a time: no padding; the reference was made at 256 tokens.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: 256,
            ..TruncationParams::default()
        }))
        .expect("truncation");

    let (sentences, expected) = reference();
    let mut sets = vec![
        Kernels {
            precision: Precision::Half,
            avx512: false,
        },
        Kernels {
            precision: Precision::Half,
            avx512: true,
        },
    ];
    for precision in [Precision::NativeHalf, Precision::Brain, Precision::Tiles] {
        if precision.available() {
            sets.push(Kernels {
                precision,
                avx512: true,
            });
        }
    }
    let mut vectors = Vec::new();
    for &kernels in &sets {
        let Some(bert) = SingleTextBert::load_with(&weights, &config, kernels).expect("load")
        else {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C, so the path is never taken");
            return;
        };
        let mut worst = f32::MAX;
        let mut these = Vec::new();
        for (sentence, expected) in sentences.iter().zip(&expected) {
            let encoding = tokenizer.encode(sentence.as_str(), true).expect("encode");
            let vector = bert
                .embed(encoding.get_ids(), encoding.get_type_ids())
                .expect("embed");
            let similarity = cosine(&vector, expected);
            worst = worst.min(similarity);
            assert!(
                similarity >= 0.999,
                "{kernels:?}: cosine {similarity} < 0.999 for {sentence:?}"
            );
            these.push(vector);
        }
        eprintln!("{kernels:?}: lowest cosine with sentence-transformers {worst:.7}");
        vectors.push(these);
    }
    // Every set against the first (the AVX2 one): the same forward, rounded differently.
    for (kernels, these) in sets.iter().zip(&vectors).skip(1) {
        for ((sentence, first), this) in sentences.iter().zip(&vectors[0]).zip(these) {
            let similarity = cosine(first, this);
            assert!(
                similarity > 0.9999,
                "{kernels:?} and {:?} differ for {sentence:?}: cosine {similarity}",
                sets[0]
            );
        }
    }
}
