//! `mnemo bench`: hot-path ingest and hybrid-search latency at several store sizes.
//!
//! For each size N: a fresh store; N synthetic chat turns go through the memory extension's real
//! hot path (`MemoryService::ingest`: session bookkeeping, fast NER, one transaction), each timed.
//! The vector index is then filled with random unit vectors under the embedding model's id (a KNN
//! costs the same whatever the vectors hold, and embedding N texts for real would take minutes),
//! the kernel restarts with the embedding extension, and distinct queries run through hybrid
//! search (query embedding with the real model, FTS5, KNN, entities, RRF), in several rounds,
//! then one round per single list (FTS5, vector, entity) to show where the time goes.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{TimeZone, Utc};
use mnemo_kernel::{Config, Event, EventPayload, Kernel};
use mnemo_memory::{MemoryService, SearchMode, SearchRequest, VectorStatus};
use serde_json::json;

const NAMES: [&str; 24] = [
    "Dana", "Robert", "Maya", "Priya", "Tom", "Sarah", "Lukas", "Aiko", "Omar", "Elena", "Jonas",
    "Fatima", "Chen", "Ines", "Marco", "Nadia", "Pavel", "Grace", "Yusuf", "Lena", "Hugo", "Zara",
    "Kofi", "Mila",
];
const PLACES: [&str; 16] = [
    "Lisbon", "Porto", "Berlin", "Kyoto", "Nairobi", "Lima", "Oslo", "Austin", "Seville", "Hanoi",
    "Dublin", "Quito", "Tbilisi", "Perth", "Bergen", "Cusco",
];
const THINGS: [&str; 20] = [
    "the aquarium job",
    "a pottery class",
    "the marathon",
    "the dentist",
    "a birthday dinner",
    "the new apartment",
    "a jazz concert",
    "the quarterly report",
    "a hiking trip",
    "the wedding",
    "the car repair",
    "a chess tournament",
    "the book club",
    "a job interview",
    "the garden",
    "the flight booking",
    "a cooking course",
    "the violin lessons",
    "the tax return",
    "a museum visit",
];
const TEMPLATES: [&str; 8] = [
    "{n} told me about {t} in {p} last week",
    "I need to remember {t} with {n} on day {d}",
    "Can you remind me what {n} said about {p}?",
    "We talked about {t} and {n} seemed happy about it",
    "My friend {n} is moving to {p} after {t}",
    "Note: {t} costs {d} euros, {n} will pay half",
    "Yesterday {n} and I planned {t} near {p}",
    "Sure, I will keep {t} in mind for {n} ({d})",
];
const QUERY_TEMPLATES: [&str; 5] = [
    "what did {n} say about {p}",
    "when is {t}",
    "who is moving to {p}",
    "how much does {t} cost",
    "plans with {n}",
];

/// A small deterministic generator (xorshift64*), so every run sees the same data.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    fn fill(&mut self, template: &str) -> String {
        template
            .replace("{n}", self.pick(&NAMES))
            .replace("{p}", self.pick(&PLACES))
            .replace("{t}", self.pick(&THINGS))
            .replace("{d}", &(self.next() % 500 + 1).to_string())
    }

    fn unit_vector(&mut self, dimensions: usize) -> Vec<f32> {
        let mut vector: Vec<f32> = (0..dimensions)
            .map(|_| (self.next() % 20_001) as f32 / 10_000.0 - 1.0)
            .collect();
        let norm = vector
            .iter()
            .map(|value| value * value)
            .sum::<f32>()
            .sqrt()
            .max(1e-6);
        vector.iter_mut().for_each(|value| *value /= norm);
        vector
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

async fn start_kernel(base: &Config, dir: &Path, with_embedding: bool) -> anyhow::Result<Kernel> {
    let mut config = base.clone();
    config.set_enabled("memory", true);
    config.set_enabled("ner", true);
    config.set_enabled("embedding", with_embedding);
    for other in ["memory_maintenance", "memory_reflection", "notes"] {
        config.set_enabled(other, false);
    }
    Ok(Kernel::builder(mnemo::builtin_extensions(), config)
        .virtual_clock(
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
                .single()
                .context("start time")?,
        )
        .data_dir(dir)
        .start()
        .await?)
}

fn service_of(kernel: &Kernel) -> anyhow::Result<Arc<MemoryService>> {
    kernel
        .context()
        .services()
        .get::<MemoryService>()
        .context("the memory extension is not running")
}

/// Runs the benchmark for each size; prints a table, or JSON with `json`.
pub(crate) async fn run(
    base: &Config,
    sizes: &[usize],
    queries: usize,
    rounds: usize,
    json_output: bool,
) -> anyhow::Result<()> {
    let mut report = Vec::new();
    for &size in sizes {
        let dir = tempfile::tempdir().context("temporary directory")?;
        let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ size as u64);

        // 1. Ingest through the hot path, embedding off so that no indexer competes for the CPU.
        let kernel = start_kernel(base, dir.path(), false).await?;
        let service = service_of(&kernel)?;
        let start = kernel.context().now();
        let mut ingest = Vec::with_capacity(size);
        let started = Instant::now();
        for index in 0..size {
            let session = format!("s{}", index / 40);
            let template = random.pick(&TEMPLATES);
            let text = random.fill(template);
            let payload = if index % 2 == 0 {
                EventPayload::UserMessage { text }
            } else {
                EventPayload::AgentResponse { text }
            };
            let event = Event::new(start + chrono::Duration::seconds(index as i64), payload)
                .with_scope(Some(session), Some(format!("user{}", index % 4)), None);
            let clock = Instant::now();
            service.ingest(&event).await?;
            ingest.push(clock.elapsed());
        }
        let ingest_total = started.elapsed();
        kernel.shutdown().await;
        ingest.sort();

        // 2. Random unit vectors under the real model's id, so that KNN runs at full size.
        let kernel = start_kernel(base, dir.path(), true).await?;
        let service = service_of(&kernel)?;
        let embedder = kernel
            .context()
            .services()
            .get::<dyn mnemo_embedding::EmbeddingApi>();
        let vector_search = match &embedder {
            Some(embedder) if embedder.health() == mnemo_embedding::EmbeddingHealth::Ready => {
                let store = service.store()?;
                let status = store
                    .ensure_vector_index(embedder.dimensions(), embedder.model_id())
                    .await?;
                if let VectorStatus::Enabled { dimensions, .. } = status {
                    loop {
                        let batch = store.next_index_batch(2_000).await?;
                        if batch.is_empty() {
                            break;
                        }
                        let items: Vec<_> = batch
                            .into_iter()
                            .map(|item| (item, Some(random.unit_vector(dimensions))))
                            .collect();
                        store.store_vectors(&items).await?;
                    }
                    true
                } else {
                    false
                }
            }
            _ => false,
        };

        // 3. Hybrid search, distinct queries, several rounds.
        let mut round_p50 = Vec::new();
        let mut round_p99 = Vec::new();
        for round in 0..rounds {
            let mut latencies = Vec::with_capacity(queries);
            for query_index in 0..queries {
                let template = random.pick(&QUERY_TEMPLATES);
                let query = format!(
                    "{} {}",
                    random.fill(template),
                    round * queries + query_index
                );
                let request = SearchRequest {
                    query,
                    user_id: Some(format!("user{}", query_index % 4)),
                    limit: 10,
                    ..SearchRequest::default()
                };
                let clock = Instant::now();
                service.search(&request).await?;
                latencies.push(clock.elapsed());
            }
            latencies.sort();
            round_p50.push(ms(percentile(&latencies, 0.5)));
            round_p99.push(ms(percentile(&latencies, 0.99)));
        }
        // 4. One round per single list, to see where hybrid time goes.
        let mut per_mode = serde_json::Map::new();
        for mode in [SearchMode::Fts, SearchMode::Vector, SearchMode::Entity] {
            let mut latencies = Vec::with_capacity(queries);
            for query_index in 0..queries {
                let template = random.pick(&QUERY_TEMPLATES);
                let query = format!("{} {}", random.fill(template), query_index);
                let request = SearchRequest {
                    query,
                    user_id: Some(format!("user{}", query_index % 4)),
                    limit: 10,
                    mode,
                    ..SearchRequest::default()
                };
                let clock = Instant::now();
                service.search(&request).await?;
                latencies.push(clock.elapsed());
            }
            latencies.sort();
            per_mode.insert(
                format!("{mode:?}").to_lowercase(),
                json!(ms(percentile(&latencies, 0.5))),
            );
        }
        kernel.shutdown().await;
        let row = json!({
            "memories": size,
            "ingest_p50_ms": ms(percentile(&ingest, 0.5)),
            "ingest_p99_ms": ms(percentile(&ingest, 0.99)),
            "ingest_per_second": size as f64 / ingest_total.as_secs_f64().max(1e-9),
            "search_p50_ms": median(&mut round_p50),
            "search_p99_ms": median(&mut round_p99),
            "search_rounds": rounds,
            "queries_per_round": queries,
            "vector_search": vector_search,
            "single_list_p50_ms": per_mode,
        });
        if !json_output {
            println!(
                "{size:>7} memories: ingest p50 {:.2} ms p99 {:.2} ms ({:.0}/s); hybrid search p50 {:.2} ms p99 {:.2} ms (median of {rounds} rounds × {queries} queries; vector {})",
                row["ingest_p50_ms"].as_f64().unwrap_or_default(),
                row["ingest_p99_ms"].as_f64().unwrap_or_default(),
                row["ingest_per_second"].as_f64().unwrap_or_default(),
                row["search_p50_ms"].as_f64().unwrap_or_default(),
                row["search_p99_ms"].as_f64().unwrap_or_default(),
                if vector_search { "on" } else { "off: no embedding model" },
            );
            println!(
                "         single lists p50: {}",
                row["single_list_p50_ms"]
                    .as_object()
                    .map(|modes| modes
                        .iter()
                        .map(|(mode, value)| format!(
                            "{mode} {:.2} ms",
                            value.as_f64().unwrap_or_default()
                        ))
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_default()
            );
        }
        report.push(row);
    }
    if json_output {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"bench": report}))?
        );
    }
    Ok(())
}
