//! Speed of the local provider: single short-sentence latency and batch throughput.
//!
//! ```sh
//! scripts/fetch-model
//! CARGO_TARGET_DIR=/work/target-embedding cargo run --release -p mnemo-embedding --example embed_bench
//! ```
//!
//! Uses `$MNEMO_MODEL_DIR` or the default model directory. A measurement, not a test: numbers
//! depend on the machine and its load.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mnemo_embedding::{EmbeddingApi, EmbeddingConfig, EmbeddingHealth, LocalEmbedder};

const WARM_UP_RUNS: usize = 5;
const SINGLE_RUNS: usize = 50;
const BATCH_RUNS: usize = 5;
const SENTENCE: &str = "She likes Italian food, especially lasagna.";

const SENTENCES: [&str; 8] = [
    "My wife's name is Sarah.",
    "She likes Italian food, especially lasagna.",
    "What does my wife like?",
    "The quarterly report for Project Atlas is due on Friday.",
    "I moved to Lisbon in March 2024 and started learning Portuguese.",
    "Remind me to call the dentist about the appointment on 14 December.",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful!",
    "@alice sent the invoice to bob@example.com, see https://example.org/doc #billing",
];

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let idx = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[idx]
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model_dir = std::env::var_os("MNEMO_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| EmbeddingConfig::default().resolved_model_dir());
    let embedder = LocalEmbedder::new(&model_dir, 256, 64);

    let started = Instant::now();
    if let EmbeddingHealth::Unavailable { reason } = embedder.load() {
        return Err(format!("cannot benchmark: {reason}").into());
    }
    println!(
        "model {} ({} dims) from {} loaded in {:.0} ms",
        embedder.model_id(),
        embedder.dimensions(),
        model_dir.display(),
        millis(started.elapsed())
    );

    for _ in 0..WARM_UP_RUNS {
        embedder.embed(SENTENCE).await?;
    }
    let mut single = Vec::with_capacity(SINGLE_RUNS);
    for _ in 0..SINGLE_RUNS {
        let started = Instant::now();
        embedder.embed(SENTENCE).await?;
        single.push(started.elapsed());
    }
    single.sort();
    println!(
        "single sentence: median {:.1} ms, p90 {:.1} ms ({SINGLE_RUNS} runs after {WARM_UP_RUNS} warm-up)",
        millis(quantile(&single, 0.5)),
        millis(quantile(&single, 0.9)),
    );

    for batch_size in [32_usize, 64] {
        let batch: Vec<String> = SENTENCES
            .iter()
            .cycle()
            .take(batch_size)
            .map(|sentence| (*sentence).to_owned())
            .collect();
        embedder.embed_batch(&batch).await?;
        let mut rates = Vec::with_capacity(BATCH_RUNS);
        let mut times = Vec::with_capacity(BATCH_RUNS);
        for _ in 0..BATCH_RUNS {
            let started = Instant::now();
            embedder.embed_batch(&batch).await?;
            let elapsed = started.elapsed();
            times.push(elapsed);
            rates.push(batch_size as f64 / elapsed.as_secs_f64());
        }
        times.sort();
        rates.sort_by(f64::total_cmp);
        println!(
            "batch of {batch_size}: median {:.0} ms, {:.1} sentences/s (median of {BATCH_RUNS} runs; min {:.1}, max {:.1})",
            millis(quantile(&times, 0.5)),
            rates[rates.len() / 2],
            rates[0],
            rates[rates.len() - 1],
        );
    }
    // Long turns: the sentences joined into texts of 200 to 256 tokens (the model's input is cut
    // at 256), timed as one batch of 32.
    let mut tokenizer = tokenizers::Tokenizer::from_file(model_dir.join("tokenizer.json"))
        .map_err(|error| format!("tokenizer: {error}"))?;
    // The shipped tokenizer.json truncates at 128 tokens; count them all.
    tokenizer
        .with_truncation(None)
        .map_err(|error| format!("tokenizer: {error}"))?;
    let count = |text: &str| -> Result<usize, Box<dyn std::error::Error>> {
        let encoding = tokenizer
            .encode(text, true)
            .map_err(|error| format!("tokenizer: {error}"))?;
        Ok(encoding.get_ids().len().min(256))
    };
    let mut long = Vec::new();
    let mut tokens = 0;
    for start in 0..32 {
        let mut text = String::new();
        let mut index = start;
        while count(&text)? < 200 {
            text.push_str(SENTENCES[index % SENTENCES.len()]);
            text.push(' ');
            index += 1;
        }
        tokens += count(&text)?;
        long.push(text);
    }
    embedder.embed_batch(&long).await?;
    let mut rates = Vec::with_capacity(BATCH_RUNS);
    for _ in 0..BATCH_RUNS {
        let started = Instant::now();
        embedder.embed_batch(&long).await?;
        rates.push(tokens as f64 / started.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "long turns: 32 texts of {} tokens on average, {:.0} tokens/s (median of {BATCH_RUNS} runs; min {:.0}, max {:.0})",
        tokens / 32,
        rates[rates.len() / 2],
        rates[0],
        rates[rates.len() - 1],
    );
    Ok(())
}
