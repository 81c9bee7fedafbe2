//! Embeds texts with the local provider, for offline retrieval studies: reads lines of
//! `{"key": ..., "text": ...}` on stdin and writes `{"key": ..., "v": [...]}` lines (unit
//! vectors, four decimals) on stdout, in the input's order.
//!
//! ```sh
//! scripts/fetch-model
//! cargo run --release -p mnemo-embedding --example embed_jsonl -- [MAX_PASSAGES] < in.jsonl > out.jsonl
//! ```
//!
//! `MAX_PASSAGES` (default 1) is the provider's `max_passages`: 8 gives the vectors the store
//! keeps with the default configuration. Uses `$MNEMO_MODEL_DIR` or the default model directory.

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

use mnemo_embedding::{EmbeddingApi, EmbeddingConfig, EmbeddingHealth, LocalEmbedder};

/// Texts per call to the provider.
const CHUNK: usize = 256;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let max_passages = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse::<usize>()
            .map_err(|err| format!("MAX_PASSAGES {arg:?}: {err}"))?,
        None => 1,
    };
    let model_dir = std::env::var_os("MNEMO_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| EmbeddingConfig::default().resolved_model_dir());
    let embedder = LocalEmbedder::new(&model_dir, 256, 64).with_max_passages(max_passages);
    if let EmbeddingHealth::Unavailable { reason } = embedder.load() {
        return Err(format!("cannot embed: {reason}").into());
    }
    let mut keys = Vec::new();
    let mut texts = Vec::new();
    for (index, line) in std::io::stdin().lock().lines().enumerate() {
        let record: serde_json::Value = serde_json::from_str(&line?)
            .map_err(|err| format!("line {}: not JSON: {err}", index + 1))?;
        let field = |name: &str| {
            record[name]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("line {}: no string {name:?}", index + 1))
        };
        keys.push(field("key")?);
        texts.push(field("text")?);
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    for (keys, texts) in keys.chunks(CHUNK).zip(texts.chunks(CHUNK)) {
        for (key, vector) in keys.iter().zip(embedder.embed_batch(texts).await?) {
            let rounded: Vec<f32> = vector
                .iter()
                .map(|value| (value * 10_000.0).round() / 10_000.0)
                .collect();
            writeln!(out, "{}", serde_json::json!({ "key": key, "v": rounded }))?;
        }
    }
    out.flush()?;
    Ok(())
}
