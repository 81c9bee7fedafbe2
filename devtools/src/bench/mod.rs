//! `mnemo bench`: hot-path ingest and hybrid-search latency, database size and peak memory for
//! a store of N synthetic memories.
//!
//! 1. N chat turns (one to three templated sentences naming people, places, plans and numbers;
//!    event times spread over about a year) go through the memory extension's real hot path
//!    (`MemoryService::ingest`: session bookkeeping, fast NER, one transaction). The last
//!    `--timed-ingest` of them (default: all) are timed one by one with the configured
//!    durability; the ones before are written with `synchronous = off`, 500 to a transaction
//!    (`MemoryService::ingest_batch`, the same path), so that large stores build in minutes.
//! 2. Vectors: the first `--real-embeddings` distinct turns are embedded by the real model; every
//!    other memory gets a mix of two of those real embeddings plus a little noise (embedding
//!    100k texts would take about 25 minutes here). This keeps the embeddings' distribution,
//!    which matters for the quantised vector stage. The turns the user spoke also get their
//!    sentence keys (`mnemo_memory::sentence_keys`), the same way.
//! 3. Hybrid search with distinct queries (query embedding by the real model, FTS5, vector
//!    stage, entities, score fusion), several rounds; then the last round again, when every query's
//!    vector is cached, for search without the model; then one round of questions in the first
//!    person, which read the sentence keys too; then each list alone.
//! 4. The vector stage against exact search: recall@10 and @50 of the quantised mirror's
//!    neighbours against `vec_memories` brute force, with the time of each.
//! 5. The embedder's speed on fresh turns.
//! 6. With `--users N` (memories spread over N owners, each search one owner's): the first
//!    owner's search here beside the same owner's search in a store holding only their
//!    memories, query by query (see `owner_alone.rs`); on SQLite only, since a second store
//!    on PostgreSQL would be the same database.
//! 7. Forgetting with lineage: `--forgets` turns, each with two facts drawn on it, forgotten one
//!    by one (see `forget.rs`); last, since it removes them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::{Event, EventPayload};
use mnemo_memory::{sentence_keys, MemoryService, SearchMode, SearchRequest, VectorStatus};
use serde_json::json;

use crate::progress::Progress;

mod data;
mod forget;
pub(crate) mod measure;
mod owner_alone;
mod report;

use data::FIRST_PERSON_TEMPLATES;
pub(crate) use data::{Random, QUERY_TEMPLATES};
pub(crate) use measure::summary;
use measure::{database_bytes, median_summary, ms, peak_rss_bytes};

pub(crate) async fn start_kernel(
    base: &Config,
    dir: &Path,
    with_embedding: bool,
) -> anyhow::Result<Kernel> {
    let mut config = base.clone();
    config.set_enabled("memory", true);
    config.set_enabled("ner", true);
    config.set_enabled("embedding", with_embedding);
    for other in ["memory_maintenance", "memory_reflection", "markdown_memory"] {
        config.set_enabled(other, false);
    }
    Ok(Kernel::builder(mnemo_host::builtin_extensions(), config)
        .virtual_clock(
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
                .single()
                .context("start time")?,
        )
        .data_dir(dir)
        .start()
        .await?)
}

pub(crate) fn service_of(kernel: &Kernel) -> anyhow::Result<Arc<MemoryService>> {
    kernel
        .context()
        .services()
        .get::<MemoryService>()
        .context("the memory extension is not running")
}

/// The kernel's embedding provider, once its model is ready.
fn embedder_of(kernel: &Kernel) -> anyhow::Result<Arc<dyn mnemo_embedding::EmbeddingApi>> {
    kernel
        .context()
        .services()
        .get::<dyn mnemo_embedding::EmbeddingApi>()
        .filter(|embedder| embedder.health() == mnemo_embedding::EmbeddingHealth::Ready)
        .context(
            "the embedding model is not available: run scripts/fetch-model (bench measures \
             search with vectors)",
        )
}

/// What `mnemo bench` measures.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Memories in the store.
    pub memories: usize,
    /// Ingests timed: the last ones, on a store already holding the rest, which are written
    /// through the batch path with `synchronous = off` to build large stores in minutes.
    pub timed_ingest: usize,
    /// Distinct queries per round.
    pub queries: usize,
    /// Rounds of hybrid search.
    pub rounds: usize,
    /// Distinct texts embedded by the real model; the other memories get mixes of these.
    pub real_embeddings: usize,
    /// Owners the memories are spread over (each search is one owner's).
    pub users: usize,
    /// Keep the store in this directory instead of a temporary one (for inspection).
    pub keep: Option<std::path::PathBuf>,
    /// Measure search on this store, made earlier by `keep`, instead of building one.
    pub reuse: Option<std::path::PathBuf>,
    /// Forgets timed at the end (a turn with two facts drawn on it each); they remove those
    /// turns and facts from the store.
    pub forgets: usize,
    /// Print JSON.
    pub json: bool,
}

/// Fills `vec_memories` with real embeddings of the first distinct texts and mixes of them for
/// the rest; returns how many texts the model embedded.
async fn fill_vectors(
    service: &MemoryService,
    embedder: &Arc<dyn mnemo_embedding::EmbeddingApi>,
    texts: &[String],
    real: usize,
    random: &mut Random,
) -> anyhow::Result<usize> {
    let status = service
        .ensure_vector_index(embedder.dimensions(), embedder.model_id())
        .await?;
    anyhow::ensure!(
        matches!(status, VectorStatus::Enabled { .. }),
        "the vector index does not match the model: {status:?}"
    );
    let mut distinct: Vec<String> = Vec::new();
    for text in texts {
        if distinct.len() >= real.max(1) {
            break;
        }
        if !distinct.contains(text) {
            distinct.push(text.clone());
        }
    }
    let mut real_vectors: HashMap<String, Vec<f32>> = HashMap::new();
    let progress = Progress::new(
        Some(distinct.len() as u64),
        "mnemo bench: embedding {wide_bar} {pos}/{len} texts ({eta} left)",
    );
    for chunk in distinct.chunks(32) {
        let vectors = embedder.embed_batch(chunk).await?;
        real_vectors.extend(chunk.iter().cloned().zip(vectors));
        progress.set(real_vectors.len() as u64);
    }
    drop(progress);
    let pool: Vec<Vec<f32>> = real_vectors.values().cloned().collect();
    anyhow::ensure!(
        !pool.is_empty(),
        "no text to embed: the store holds no memories"
    );
    loop {
        let batch = service.next_index_batch(2_000).await?;
        if batch.is_empty() {
            break;
        }
        // The turns the user spoke get sentence keys, as the indexer gives them: a turn of one
        // sentence is its own key, with its own vector; the sentences of a longer one get mixed
        // vectors, as the memories without a real embedding do.
        let mut sentences: HashMap<String, Vec<Vec<f32>>> = HashMap::new();
        let items: Vec<_> = batch
            .into_iter()
            .map(|item| {
                let vector = real_vectors
                    .get(&item.content)
                    .cloned()
                    .unwrap_or_else(|| random.mixed_vector(&pool));
                if item.spoken_by_user {
                    let keys = sentence_keys(&item.content)
                        .iter()
                        .map(|key| match real_vectors.get(key) {
                            Some(known) => known.clone(),
                            None if *key == item.content => vector.clone(),
                            None => random.mixed_vector(&pool),
                        })
                        .collect();
                    sentences.insert(item.memory_id.clone(), keys);
                }
                (item, Some(vector))
            })
            .collect();
        service
            .store_vectors_and_sentences(&items, &sentences)
            .await?;
    }
    Ok(distinct.len())
}

/// Times `queries` searches in `mode`; returns the latencies.
pub(crate) async fn time_searches(
    service: &MemoryService,
    queries: &[(String, String)],
    mode: SearchMode,
) -> anyhow::Result<Vec<Duration>> {
    let mut latencies = Vec::with_capacity(queries.len());
    for (user, query) in queries {
        let request = SearchRequest {
            query: query.clone(),
            user_id: Some(user.clone()),
            limit: 10,
            mode,
            ..SearchRequest::default()
        };
        let clock = Instant::now();
        service.search(&request).await?;
        latencies.push(clock.elapsed());
    }
    Ok(latencies)
}

/// Untimed turns written per transaction while the store is built.
const FILL_BATCH: usize = 500;

/// What building the store measured.
#[derive(Default)]
struct Built {
    /// The timed ingests' latencies.
    ingest: Vec<Duration>,
    /// Wall time of the timed ingests.
    ingest_seconds: f64,
    /// Texts embedded by the real model.
    embedded: usize,
    /// The poisoning screen (`mnemo_memory::screening`) on each turn's text.
    screening: Vec<Duration>,
}

/// Steps 1 and 2: ingests `options.memories` turns into `dir` and fills their vectors.
async fn build_store(
    base: &Config,
    dir: &Path,
    options: &BenchOptions,
    random: &mut Random,
) -> anyhow::Result<Built> {
    let size = options.memories;
    let users = options.users.max(1);
    // 1. Ingest through the hot path, embedding off so that no indexer competes for the CPU.
    //    The last `timed` ingests are timed, with the configured durability, on a store that
    //    already holds the others (written in batches with synchronous = off to save time).
    let timed = options.timed_ingest.clamp(1, size.max(1));
    let untimed = size - timed;
    let mut fast = base.clone();
    if untimed > 0 {
        fast.set_extension_key("memory", "synchronous", "off".into());
    }
    let mut kernel = start_kernel(&fast, dir, false).await?;
    let mut service = service_of(&kernel)?;
    let start = kernel.context().now();
    let mut texts = Vec::with_capacity(size);
    let mut ingest = Vec::with_capacity(timed);
    let mut started = Instant::now();
    let progress = Progress::new(
        Some(size as u64),
        "mnemo bench: ingesting {wide_bar} {pos}/{len} ({elapsed}, {eta} left)",
    );
    // The untimed turns go in batches of one transaction each (the HTTP API's batch path),
    // which builds a store of a million in minutes rather than an hour.
    let mut untimed_batch = Vec::with_capacity(FILL_BATCH);
    for index in 0..size {
        if index == untimed && untimed > 0 {
            kernel.shutdown().await;
            kernel = start_kernel(base, dir, false).await?;
            service = service_of(&kernel)?;
            started = Instant::now();
        }
        let session = format!("s{}", index / 40);
        let text = random.turn();
        let payload = if index % 2 == 0 {
            EventPayload::UserMessage { text: text.clone() }
        } else {
            EventPayload::AgentResponse { text: text.clone() }
        };
        // About a year of turns at 100k: one every 5 minutes.
        let at = start + chrono::Duration::seconds(300 * index as i64);
        let event = Event::new(at, payload).with_scope(
            Some(session),
            Some(format!("user{}", index % users)),
            None,
        );
        texts.push(text);
        if index < untimed {
            untimed_batch.push(event);
            if untimed_batch.len() == FILL_BATCH || index + 1 == untimed {
                service.ingest_batch(&untimed_batch, false).await?;
                untimed_batch.clear();
            }
        } else {
            let clock = Instant::now();
            service.ingest(&event).await?;
            ingest.push(clock.elapsed());
        }
        if progress.shown() {
            progress.set(index as u64 + 1);
        } else if !options.json && index > 0 && index % 20_000 == 0 {
            eprintln!("ingested {index} of {size}");
        }
    }
    drop(progress);
    let ingest_seconds = started.elapsed().as_secs_f64();
    kernel.shutdown().await;
    let screening = texts
        .iter()
        .map(|text| {
            let clock = Instant::now();
            std::hint::black_box(mnemo_memory::screening::screen(std::hint::black_box(text)));
            clock.elapsed()
        })
        .collect();

    // 2. Vectors: real embeddings and mixes of them.
    let kernel = start_kernel(base, dir, true).await?;
    let service = service_of(&kernel)?;
    let embedder = embedder_of(&kernel)?;
    let embedded =
        fill_vectors(&service, &embedder, &texts, options.real_embeddings, random).await?;
    kernel.shutdown().await;
    Ok(Built {
        ingest,
        ingest_seconds,
        embedded,
        screening,
    })
}

/// Whether the memory store of `config` is PostgreSQL (`database_url` or `MNEMO_DATABASE_URL`):
/// then it is not a file in the data directory.
pub(crate) fn store_in_postgres(config: &Config) -> anyhow::Result<bool> {
    let memory: mnemo_memory::MemoryConfig = match config.extension(mnemo_memory::NAME) {
        Some(section) => section.parse_checked()?,
        None => mnemo_memory::MemoryConfig::default(),
    };
    Ok(memory
        .postgres_url(|key| std::env::var(key).ok())
        .map_err(anyhow::Error::msg)?
        .is_some())
}

/// Runs the benchmark; prints a summary, or JSON with `options.json`.
pub async fn run(base: &Config, options: &BenchOptions) -> anyhow::Result<()> {
    let postgres = store_in_postgres(base)?;
    let users = options.users.max(1);
    let temporary = tempfile::tempdir().context("temporary directory")?;
    let dir_path = match (&options.reuse, &options.keep) {
        (Some(path), _) => {
            anyhow::ensure!(
                postgres || path.join("memory.db").is_file(),
                "{} holds no memory.db: bench --reuse needs a store made by bench --keep",
                path.display()
            );
            path.clone()
        }
        (None, Some(path)) => {
            std::fs::create_dir_all(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            anyhow::ensure!(
                std::fs::read_dir(path)?.next().is_none(),
                "{} is not empty: bench --keep needs an empty directory",
                path.display()
            );
            path.clone()
        }
        (None, None) => temporary.path().to_path_buf(),
    };
    let dir = dir_path.as_path();
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ options.memories as u64);

    let mut built = match &options.reuse {
        Some(_) => Built::default(),
        None => build_store(base, dir, options, &mut random).await?,
    };

    let kernel = start_kernel(base, dir, true).await?;
    let service = service_of(&kernel)?;
    let embedder = embedder_of(&kernel)?;
    let size = if options.reuse.is_some() {
        if service.stats(None).await?.pending_index > 0 {
            // A store whose build stopped before its vectors: fill them as step 2 would.
            let head = service
                .next_index_batch(options.real_embeddings.max(1) * 2)
                .await?;
            let texts: Vec<String> = head.into_iter().map(|item| item.content).collect();
            built.embedded = fill_vectors(
                &service,
                &embedder,
                &texts,
                options.real_embeddings,
                &mut random,
            )
            .await?;
        }
        usize::try_from(service.stats(None).await?.episodes).unwrap_or_default()
    } else {
        options.memories
    };
    service
        .ensure_vector_index(embedder.dimensions(), embedder.model_id())
        .await?;
    let load = Instant::now();
    let mirror = service.vector_mirror_size().await?;
    let mirror_load_ms = ms(load.elapsed());

    // 3. Hybrid search, distinct queries per round; the last round again with cached vectors.
    let mut rounds = Vec::new();
    let mut last_round = Vec::new();
    for round in 0..options.rounds.max(1) {
        let queries: Vec<(String, String)> = (0..options.queries)
            .map(|index| {
                let template = random.pick(&QUERY_TEMPLATES);
                (
                    format!("user{}", index % users),
                    format!(
                        "{} {}",
                        random.fill(template),
                        round * options.queries + index
                    ),
                )
            })
            .collect();
        let mut latencies = time_searches(&service, &queries, SearchMode::Hybrid).await?;
        rounds.push(summary(&mut latencies));
        last_round = queries;
    }
    let mut cached = time_searches(&service, &last_round, SearchMode::Hybrid).await?;
    // Questions in the first person also read the sentence keys.
    let first_person: Vec<(String, String)> = (0..options.queries)
        .map(|index| {
            let template = random.pick(&FIRST_PERSON_TEMPLATES);
            (
                format!("user{}", index % users),
                format!("{} {index}", random.fill(template)),
            )
        })
        .collect();
    let mut first_person = time_searches(&service, &first_person, SearchMode::Hybrid).await?;
    let mut single = serde_json::Map::new();
    for (name, mode) in [
        ("fts", SearchMode::Fts),
        ("vector", SearchMode::Vector),
        ("entity", SearchMode::Entity),
    ] {
        let mut latencies = time_searches(&service, &last_round, mode).await?;
        single.insert(name.to_owned(), summary(&mut latencies)["p50"].clone());
    }

    // 4. The quantised vector stage against exact brute force, on the same query vectors and
    //    at the depth hybrid search asks it for (3 × candidates_per_list).
    let depth = 3 * service.config().candidates_per_list.max(1);
    let mut recall = [0.0_f64; 2];
    let mut quantized_ms = Vec::new();
    let mut exact_ms = Vec::new();
    let sample: Vec<&(String, String)> = last_round.iter().take(50).collect();
    for (user, query) in &sample {
        let vector = embedder.embed(query).await?;
        let clock = Instant::now();
        let approximate = service
            .nearest_approximate(&vector, Some(user), None, depth)
            .await?;
        quantized_ms.push(clock.elapsed());
        let clock = Instant::now();
        let exact = service
            .nearest_exact(&vector, Some(user), None, depth)
            .await?;
        exact_ms.push(clock.elapsed());
        for (slot, top) in [10_usize, 50].into_iter().enumerate() {
            let truth: Vec<&String> = exact.iter().take(top).map(|(id, _)| id).collect();
            let found = approximate
                .iter()
                .take(top)
                .filter(|(id, _)| truth.contains(&id))
                .count();
            recall[slot] += found as f64 / truth.len().max(1) as f64;
        }
    }
    // 5. How fast the embedder embeds: fresh turns of the bench's kind, in batches.
    let turns: Vec<String> = (0..256).map(|_| random.turn()).collect();
    let embedding = crate::embedding_speed::measure(&embedder, &turns).await?;
    // 6. With several owners: the first owner's search here and in a store of their own. Not
    //    on PostgreSQL: a second kernel reads the same `MNEMO_DATABASE_URL`, so "a store of
    //    their own" would be this database, and the copy would add to the owner's memories.
    let owner_alone = if users > 1 && !postgres {
        Some(
            owner_alone::compare(
                base,
                &service,
                "user0",
                options.queries,
                options.rounds,
                options.real_embeddings,
                &mut random,
            )
            .await?,
        )
    } else {
        None
    };
    // SQLite: the database file and its write-ahead log; PostgreSQL: the database's own size.
    let (backend, postgres_bytes) = service.database_size().await?;
    let db_bytes = if postgres {
        postgres_bytes
    } else {
        database_bytes(dir)
    };
    // 7. Forgetting with lineage, last: it removes what it times.
    let forgets = forget::time_forgets(&service, users, options.forgets).await?;
    kernel.shutdown().await;
    let samples = sample.len().max(1) as f64;
    let round3 = |value: f64| (value * 1_000.0).round() / 1_000.0;
    let report = json!({
        "memories": size,
        "backend": backend,
        "ingest_ms": summary(&mut built.ingest),
        "screening_ms": summary(&mut built.screening),
        "search_ms": median_summary(&rounds),
        "search_ms_without_embedding": summary(&mut cached),
        "first_person_search_ms": summary(&mut first_person),
        "db_bytes": db_bytes,
        "rss_bytes": peak_rss_bytes(),
        "ingest_per_second": (built.ingest.len() as f64 / built.ingest_seconds.max(1e-9)).round(),
        "timed_ingests": built.ingest.len(),
        "users": users,
        "memories_per_owner": size / users,
        "owner_alone": owner_alone,
        "forget": forgets,
        "rounds": options.rounds.max(1),
        "queries_per_round": options.queries,
        "real_embeddings": built.embedded,
        "single_list_p50_ms": single,
        "embedding": embedding,
        "vector_stage": {
            "oversample": service.config().vector_oversample,
            "depth": depth,
            "recall@10_vs_exact": round3(recall[0] / samples),
            "recall@50_vs_exact": round3(recall[1] / samples),
            "quantized_ms": summary(&mut quantized_ms),
            "exact_ms": summary(&mut exact_ms),
            "mirror_rows": mirror.memory_rows,
            "sentence_rows": mirror.sentence_rows,
            "mirror_bytes": mirror.heap_bytes,
            "mirror_load_ms": mirror_load_ms,
        },
    });
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        report::print(&report, postgres);
    }
    Ok(())
}
