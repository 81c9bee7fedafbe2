//! `mnemo eval`: retrieval quality on LoCoMo-format data (see `../shared/eval/README.md`).
//!
//! For each conversation: a fresh store; every turn ingested as an episode (speaker prefixed,
//! image caption appended, the session's date as event time, one session id per session); the
//! indexer finishes; then each question with evidence is searched in every mode (fts, vector,
//! entity, hybrid) and scored at turn level: evidence recall@k, hit@k and MRR (within the
//! largest k), overall and per category. Questions without evidence are skipped and counted.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use chrono::{NaiveDateTime, TimeZone, Utc};
use mnemo_kernel::{Config, Event, EventPayload, Kernel};
use mnemo_memory::{MemoryKind, MemoryService, SearchMode, SearchRequest};
use serde_json::{json, Map, Value};

const MODES: [(&str, SearchMode); 4] = [
    ("fts", SearchMode::Fts),
    ("vector", SearchMode::Vector),
    ("entity", SearchMode::Entity),
    ("hybrid", SearchMode::Hybrid),
];

#[derive(Default, Clone)]
struct Totals {
    questions: usize,
    recall: BTreeMap<usize, f64>,
    hit: BTreeMap<usize, f64>,
    reciprocal_rank: f64,
}

impl Totals {
    fn add(&mut self, ks: &[usize], ranked: &[String], evidence: &[String]) {
        self.questions += 1;
        for &k in ks {
            let top: Vec<&String> = ranked.iter().take(k).collect();
            let found = evidence.iter().filter(|id| top.contains(id)).count();
            *self.recall.entry(k).or_default() += found as f64 / evidence.len() as f64;
            *self.hit.entry(k).or_default() += f64::from(u8::from(found > 0));
        }
        if let Some(rank) = ranked.iter().position(|id| evidence.contains(id)) {
            self.reciprocal_rank += 1.0 / (rank + 1) as f64;
        }
    }

    fn json(&self) -> Value {
        let n = self.questions.max(1) as f64;
        let mut object = Map::new();
        for (k, value) in &self.recall {
            object.insert(format!("recall@{k}"), json!(round(value / n)));
        }
        for (k, value) in &self.hit {
            object.insert(format!("hit@{k}"), json!(round(value / n)));
        }
        object.insert("mrr".to_owned(), json!(round(self.reciprocal_rank / n)));
        object.insert("questions".to_owned(), json!(self.questions));
        Value::Object(object)
    }
}

fn round(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

fn parse_date(text: &str) -> Option<chrono::DateTime<Utc>> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S"))
        .ok()
        .map(|time| Utc.from_utc_datetime(&time))
}

async fn start_kernel(
    base: &Config,
    dir: &Path,
    start: chrono::DateTime<Utc>,
) -> anyhow::Result<Kernel> {
    let mut config = base.clone();
    for (name, on) in [
        ("embedding", true),
        ("ner", true),
        ("memory", true),
        ("memory_maintenance", false),
        ("memory_reflection", false),
        ("markdown_memory", false),
        ("notes", false),
    ] {
        config.set_enabled(name, on);
    }
    Ok(Kernel::builder(mnemo::builtin_extensions(), config)
        .virtual_clock(start)
        .data_dir(dir)
        .start()
        .await?)
}

/// Runs the evaluation; prints a table, or JSON with `json_output`.
pub(crate) async fn run(
    base: &Config,
    data: &Path,
    ks: &[usize],
    json_output: bool,
) -> anyhow::Result<()> {
    let file =
        std::fs::File::open(data).with_context(|| format!("cannot open {}", data.display()))?;
    let max_k = ks.iter().copied().max().unwrap_or(10).max(10);
    let mut overall: HashMap<&str, Totals> = HashMap::new();
    let mut by_category: BTreeMap<String, HashMap<&str, Totals>> = BTreeMap::new();
    let (mut skipped, mut cases) = (0_usize, 0_usize);
    for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let case: Value = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not JSON", data.display(), index + 1))?;
        let sessions = case["sessions"].as_array().cloned().unwrap_or_default();
        let start = sessions
            .iter()
            .filter_map(|session| session["date_iso"].as_str().and_then(parse_date))
            .min()
            .unwrap_or_default();
        let dir = tempfile::tempdir()?;
        let kernel = start_kernel(base, dir.path(), start).await?;
        let service: Arc<MemoryService> = kernel
            .context()
            .services()
            .get::<MemoryService>()
            .context("the memory extension did not start")?;
        let mut turn_of: HashMap<String, String> = HashMap::new();
        for session in &sessions {
            let session_id = session["session_id"]
                .as_str()
                .unwrap_or("session")
                .to_owned();
            let at = session["date_iso"]
                .as_str()
                .and_then(parse_date)
                .unwrap_or(start);
            for (position, turn) in session["turns"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let mut text = format!(
                    "{}: {}",
                    turn["speaker"].as_str().unwrap_or("someone"),
                    turn["text"].as_str().unwrap_or_default()
                );
                if let Some(caption) = turn["image_caption"].as_str() {
                    text.push_str(&format!(" [shares an image: {caption}]"));
                }
                let turn_id = turn["turn_id"].as_str().unwrap_or_default().to_owned();
                let event = Event::new(
                    at + chrono::Duration::seconds(position as i64),
                    EventPayload::UserMessage { text },
                )
                .with_scope(
                    Some(session_id.clone()),
                    Some("eval".to_owned()),
                    None,
                );
                if let Some(memory_id) = service.ingest(&event).await? {
                    turn_of.insert(memory_id, turn_id);
                }
            }
        }
        kernel.settle().await;
        for question in case["questions"].as_array().into_iter().flatten() {
            let evidence: Vec<String> = question["evidence_turn_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if evidence.is_empty() {
                skipped += 1;
                continue;
            }
            let category = question["category"]
                .as_str()
                .unwrap_or("unknown")
                .to_owned();
            for (name, mode) in MODES {
                let hits = service
                    .search(&SearchRequest {
                        query: question["question"].as_str().unwrap_or_default().to_owned(),
                        user_id: Some("eval".to_owned()),
                        kinds: vec![MemoryKind::Episode],
                        limit: max_k,
                        mode,
                        ..SearchRequest::default()
                    })
                    .await?;
                let ranked: Vec<String> = hits
                    .iter()
                    .filter_map(|hit| turn_of.get(&hit.memory.id).cloned())
                    .collect();
                overall.entry(name).or_default().add(ks, &ranked, &evidence);
                by_category
                    .entry(category.clone())
                    .or_default()
                    .entry(name)
                    .or_default()
                    .add(ks, &ranked, &evidence);
            }
        }
        kernel.shutdown().await;
        cases += 1;
        eprintln!(
            "mnemo eval: case {cases} ({}) done",
            case["id"].as_str().unwrap_or("?")
        );
    }
    let modes: Map<String, Value> = MODES
        .iter()
        .map(|(name, _)| {
            (
                (*name).to_owned(),
                overall.get(name).cloned().unwrap_or_default().json(),
            )
        })
        .collect();
    let categories: Map<String, Value> = by_category
        .iter()
        .map(|(category, totals)| {
            let per_mode: Map<String, Value> = MODES
                .iter()
                .map(|(name, _)| {
                    (
                        (*name).to_owned(),
                        totals.get(name).cloned().unwrap_or_default().json(),
                    )
                })
                .collect();
            (category.clone(), Value::Object(per_mode))
        })
        .collect();
    let questions = overall.get("hybrid").map_or(0, |totals| totals.questions);
    let report = json!({
        "questions": questions,
        "skipped_without_evidence": skipped,
        "cases": cases,
        "modes": modes,
        "categories": categories,
    });
    if json_output {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{questions} questions in {cases} cases ({skipped} without evidence skipped)");
        for (name, _) in MODES {
            println!("{name:<7} {}", report["modes"][name]);
        }
    }
    Ok(())
}
