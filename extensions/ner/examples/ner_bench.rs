//! Time of the fast strategy per sentence, over the labelled chat sentences.
//!
//! Run with `cargo run --release -p mnemo-ner --example ner_bench [ROUNDS]`; prints the median,
//! 90th percentile and mean microseconds per sentence.

use std::path::Path;
use std::time::Instant;

use mnemo_ner::{NerApi, NerService};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None => 200,
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/ner-labelled.jsonl");
    let mut sentences = Vec::new();
    for line in std::fs::read_to_string(&path)?.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line)?;
        if let Some(text) = value.get("text").and_then(|text| text.as_str()) {
            sentences.push(text.to_owned());
        }
    }
    let ner = NerService::default();
    // Warm up: compiles the regexes and builds the word lists.
    let mut n_entities = 0;
    for sentence in &sentences {
        n_entities += ner.extract_fast(sentence).len();
    }
    let mut micros = Vec::with_capacity(rounds * sentences.len());
    for _ in 0..rounds {
        for sentence in &sentences {
            let started = Instant::now();
            let entities = ner.extract_fast(sentence);
            micros.push(started.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(entities);
        }
    }
    if micros.is_empty() {
        return Err(format!("no sentences in {}", path.display()).into());
    }
    micros.sort_by(f64::total_cmp);
    let at = |quantile: f64| micros[((micros.len() - 1) as f64 * quantile).round() as usize];
    let mean = micros.iter().sum::<f64>() / micros.len() as f64;
    println!(
        "ner fast strategy: {} sentences x {rounds} rounds ({n_entities} entities a round): \
         median {:.1} us, p90 {:.1} us, mean {mean:.1} us per sentence",
        sentences.len(),
        at(0.5),
        at(0.9),
    );
    Ok(())
}
