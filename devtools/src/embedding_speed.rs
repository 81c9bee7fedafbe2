//! How fast the configured embedder embeds, for `mnemo bench`: short sentences in batches, and
//! long turns in tokens per second (issue #21's two throughput targets). The texts are the
//! bench's own turns, so a run measures what the indexer embeds.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use mnemo_embedding::EmbeddingApi;
use serde_json::{json, Value};

/// Texts per timed batch of short sentences.
const SHORT_BATCH: usize = 64;
/// Long texts per timed batch.
const LONG_BATCH: usize = 32;
/// The fewest tokens of a long text (issue #21: turns of 200 to 500 tokens), as far as the
/// model's input limit lets it read them.
const LONG_TOKENS: usize = 200;
/// Timed runs of each batch, after one run to warm up; the median is reported.
const RUNS: usize = 5;

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or_default()
}

/// Embeds `batch` once to warm up, then [`RUNS`] times; the median of `amount / seconds`.
async fn rate(
    embedder: &Arc<dyn EmbeddingApi>,
    batch: &[String],
    amount: f64,
) -> anyhow::Result<f64> {
    embedder
        .embed_batch(batch)
        .await
        .context("embedding a batch")?;
    let mut rates = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let clock = Instant::now();
        embedder
            .embed_batch(batch)
            .await
            .context("embedding a batch")?;
        rates.push(amount / clock.elapsed().as_secs_f64().max(1e-9));
    }
    Ok(median(rates))
}

/// Long texts made of `turns` joined, each until the model reads at least [`LONG_TOKENS`] of it
/// (or reads no more of it: its input limit), with the tokens it reads of each; `None` when the
/// embedder cannot count tokens.
fn long_texts(embedder: &Arc<dyn EmbeddingApi>, turns: &[String]) -> Option<Vec<(String, usize)>> {
    let mut texts = Vec::with_capacity(LONG_BATCH);
    let mut next = turns.iter().cycle();
    for _ in 0..LONG_BATCH {
        let mut text = String::new();
        let mut tokens = embedder.token_count(&text)?;
        while tokens < LONG_TOKENS {
            let turn = next.next()?;
            let longer = format!("{text}{turn}. ");
            let read = embedder.token_count(&longer)?;
            if read == tokens && !text.is_empty() {
                break; // the input limit: more text is not read
            }
            text = longer;
            tokens = read;
        }
        texts.push((text, tokens));
    }
    Some(texts)
}

/// `{"sentences_per_s", "tokens_per_s", "long_text_tokens"}`: short turns per second in batches
/// of 64, and tokens per second over 32 long texts (null when the embedder cannot count its
/// tokens, as a remote one cannot), with their mean length in tokens.
///
/// # Errors
/// The embedder fails.
pub(crate) async fn measure(
    embedder: &Arc<dyn EmbeddingApi>,
    turns: &[String],
) -> anyhow::Result<Value> {
    anyhow::ensure!(!turns.is_empty(), "no texts to embed");
    let short: Vec<String> = turns.iter().cycle().take(SHORT_BATCH).cloned().collect();
    let sentences_per_s = rate(embedder, &short, SHORT_BATCH as f64).await?;
    let (tokens_per_s, mean_tokens) = match long_texts(embedder, turns) {
        Some(long) => {
            let tokens: usize = long.iter().map(|(_, tokens)| tokens).sum();
            let texts: Vec<String> = long.into_iter().map(|(text, _)| text).collect();
            let per_s = rate(embedder, &texts, tokens as f64).await?;
            (Some(per_s.round()), Some(tokens / LONG_BATCH))
        }
        None => (None, None),
    };
    Ok(json!({
        "sentences_per_s": sentences_per_s.round(),
        "tokens_per_s": tokens_per_s,
        "long_text_tokens": mean_tokens,
    }))
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median(vec![5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(vec![]), 0.0);
    }
}
