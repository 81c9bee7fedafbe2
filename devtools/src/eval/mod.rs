//! `mnemo eval`: retrieval quality on LoCoMo-format data (see `../shared/eval/README.md`).
//!
//! For each conversation: a fresh store; every turn ingested as an episode (speaker prefixed,
//! image caption appended, an assistant's turn as the agent's reply and every other as the
//! user's message, the session's date as event time, one session id per session); the
//! indexer finishes; then each question with evidence is searched in every mode (fts, vector,
//! entity, hybrid), as of when it is asked (its `question_date_iso`, else right after the last
//! turn: "last week" means the week before that), and scored at turn level: evidence recall@k, hit@k and MRR (within the
//! largest k), overall and per category. Questions without evidence are skipped and counted.
//!
//! LongMemEval cases (`source` starting with `longmemeval`) are scored at session level, as the
//! data's README asks: the ranked turns are mapped to their sessions (first occurrence kept) and
//! recall@k, recall_all@k (every evidence session in the top k), hit@k (recall_any) and nDCG@10
//! are computed against `evidence_session_ids`. A `.gz` file is read through `gunzip -c`.
//!
//! `--dump FILE` also writes, per question, the candidate lists hybrid search fuses (fts with
//! BM25 relevance, vector with cosine, entity with matched entities), mapped to turn ids (the
//! evidence is session ids at session level), and hybrid search's own ranking with its scores,
//! for studying fusion offline.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write as _};
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use chrono::{NaiveDateTime, TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::{Event, EventPayload};
use mnemo_memory::{MemoryKind, MemoryService, SearchMode, SearchRequest};
use serde_json::{json, Map, Value};

use crate::progress::Progress;

const MODES: [(&str, SearchMode); 4] = [
    ("fts", SearchMode::Fts),
    ("vector", SearchMode::Vector),
    ("entity", SearchMode::Entity),
    ("hybrid", SearchMode::Hybrid),
];

/// Results of one search mode over a set of questions.
#[derive(Default, Clone)]
struct Totals {
    questions: usize,
    recall: BTreeMap<usize, f64>,
    recall_all: BTreeMap<usize, f64>,
    hit: BTreeMap<usize, f64>,
    reciprocal_rank: f64,
    ndcg10: f64,
}

impl Totals {
    /// Scores one ranking (turn or session ids, best first, no duplicates) against `evidence`.
    fn add(&mut self, ks: &[usize], ranked: &[String], evidence: &[String]) {
        self.questions += 1;
        for &k in ks {
            let top: Vec<&String> = ranked.iter().take(k).collect();
            let found = evidence.iter().filter(|id| top.contains(id)).count();
            *self.recall.entry(k).or_default() += found as f64 / evidence.len() as f64;
            *self.recall_all.entry(k).or_default() += f64::from(u8::from(found == evidence.len()));
            *self.hit.entry(k).or_default() += f64::from(u8::from(found > 0));
        }
        if let Some(rank) = ranked.iter().position(|id| evidence.contains(id)) {
            self.reciprocal_rank += 1.0 / (rank + 1) as f64;
        }
        let gain = |position: usize| 1.0 / ((position + 2) as f64).log2();
        let dcg: f64 = ranked
            .iter()
            .take(10)
            .enumerate()
            .filter(|(_, id)| evidence.contains(id))
            .map(|(position, _)| gain(position))
            .sum();
        let ideal: f64 = (0..evidence.len().min(10)).map(gain).sum();
        if ideal > 0.0 {
            self.ndcg10 += dcg / ideal;
        }
    }

    fn json(&self) -> Value {
        let n = self.questions.max(1) as f64;
        let mut object = Map::new();
        for (k, value) in &self.recall {
            object.insert(format!("recall@{k}"), json!(round(value / n)));
        }
        for (k, value) in &self.recall_all {
            object.insert(format!("recall_all@{k}"), json!(round(value / n)));
        }
        for (k, value) in &self.hit {
            object.insert(format!("hit@{k}"), json!(round(value / n)));
        }
        object.insert("mrr".to_owned(), json!(round(self.reciprocal_rank / n)));
        object.insert("ndcg@10".to_owned(), json!(round(self.ndcg10 / n)));
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
    ] {
        config.set_enabled(name, on);
    }
    Ok(Kernel::builder(mnemo_host::builtin_extensions(), config)
        .virtual_clock(start)
        .data_dir(dir)
        .start()
        .await?)
}

/// The data file's lines; a `.gz` file is decompressed by `gunzip -c` (no gzip crate needed).
fn open_lines(data: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    if data.extension().is_some_and(|extension| extension == "gz") {
        let child = std::process::Command::new("gunzip")
            .arg("-c")
            .arg(data)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run gunzip -c {}", data.display()))?;
        let stdout = child
            .stdout
            .with_context(|| format!("gunzip -c {} gave no output", data.display()))?;
        return Ok(Box::new(std::io::BufReader::new(stdout)));
    }
    let file =
        std::fs::File::open(data).with_context(|| format!("cannot open {}", data.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

/// `items` without repeats, first occurrence kept, in order.
fn first_occurrences(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|item| seen.insert(item.clone()))
        .collect()
}

/// Depth of the candidate lists written by `--dump`.
const DUMP_DEPTH: usize = 100;

/// Runs the evaluation; prints a table, or JSON with `json_output`. With `dump`, also writes
/// each question's candidate lists there (JSONL).
pub async fn run(
    base: &Config,
    data: &Path,
    ks: &[usize],
    json_output: bool,
    dump: Option<&Path>,
) -> anyhow::Result<()> {
    let lines = open_lines(data)?;
    let mut dump = match dump {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let max_k = ks.iter().copied().max().unwrap_or(10).max(10);
    let mut overall: HashMap<&str, Totals> = HashMap::new();
    let mut by_category: BTreeMap<String, HashMap<&str, Totals>> = BTreeMap::new();
    let (mut skipped, mut cases, mut refused_turns) = (0_usize, 0_usize, 0_usize);
    let progress = Progress::new(
        None,
        "{spinner} mnemo eval: {pos} cases done, the last {msg} ({elapsed})",
    );
    for (index, line) in lines.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let case: Value = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not JSON", data.display(), index + 1))?;
        let sessions = case["sessions"].as_array().cloned().unwrap_or_default();
        let session_level = case["source"]
            .as_str()
            .is_some_and(|source| source.starts_with("longmemeval"));
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
        // Memory id -> turn id, and turn id -> session id (the unit scored at session level).
        let mut turn_of: HashMap<String, String> = HashMap::new();
        let mut session_of: HashMap<String, String> = HashMap::new();
        // When the last turn was said: questions without a date of their own are asked then.
        let mut last_said = start;
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
                let said = at + chrono::Duration::seconds(position as i64);
                last_said = last_said.max(said);
                // An assistant's turn (LongMemEval's) is the agent's reply, stored apart from
                // what the user said, as an agent's memory stores it.
                let payload = if turn["role"].as_str() == Some("assistant") {
                    EventPayload::AgentResponse { text }
                } else {
                    EventPayload::UserMessage { text }
                };
                let event = Event::new(said, payload).with_scope(
                    Some(session_id.clone()),
                    Some("eval".to_owned()),
                    None,
                );
                // A turn the memory refuses (longer than max_content_chars) is left out and
                // counted, as a user's memory would leave it out; the case still runs.
                match service.ingest(&event).await {
                    Ok(Some(memory_id)) => {
                        session_of.insert(turn_id.clone(), session_id.clone());
                        turn_of.insert(memory_id, turn_id);
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(%turn_id, %error, "eval: turn not stored");
                        refused_turns += 1;
                    }
                }
            }
        }
        kernel.settle().await;
        for question in case["questions"].as_array().into_iter().flatten() {
            let evidence_key = if session_level {
                "evidence_session_ids"
            } else {
                "evidence_turn_ids"
            };
            let evidence: Vec<String> = question[evidence_key]
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
            let query = question["question"].as_str().unwrap_or_default().to_owned();
            // Searched as of the question's date, so that "last week" means what it meant then.
            let asked = question["question_date_iso"]
                .as_str()
                .and_then(parse_date)
                .map_or(last_said, |date| date.max(last_said));
            // Sessions repeat among ranked turns: ask for more turns to fill the top k.
            let limit = if session_level { max_k * 5 } else { max_k };
            if let Some(out) = dump.as_mut() {
                let lists = service
                    .candidate_lists(
                        &SearchRequest {
                            query: query.clone(),
                            user_id: Some("eval".to_owned()),
                            kinds: vec![MemoryKind::Episode],
                            mode: SearchMode::Hybrid,
                            ..SearchRequest::default()
                        },
                        DUMP_DEPTH,
                    )
                    .await?;
                let lists: Map<String, Value> = lists
                    .into_iter()
                    .map(|list| {
                        let hits: Vec<Value> = list
                            .hits
                            .iter()
                            .filter_map(|(id, score)| {
                                turn_of.get(id).map(|unit| json!([unit, round(*score)]))
                            })
                            .collect();
                        (list.name.to_owned(), Value::Array(hits))
                    })
                    .collect();
                // The ranking hybrid search returns, with scores, deeper than the metrics read.
                let ranked = service
                    .search(&SearchRequest {
                        query: query.clone(),
                        user_id: Some("eval".to_owned()),
                        kinds: vec![MemoryKind::Episode],
                        limit: DUMP_DEPTH,
                        mode: SearchMode::Hybrid,
                        at: Some(asked),
                        ..SearchRequest::default()
                    })
                    .await?;
                let ranked: Vec<Value> = ranked
                    .iter()
                    .filter_map(|hit| {
                        turn_of
                            .get(&hit.memory.id)
                            .map(|unit| json!([unit, round(hit.score)]))
                    })
                    .collect();
                let record = json!({
                    "case": case["id"],
                    "qid": question["qid"],
                    "category": category,
                    "question": query,
                    "evidence": evidence,
                    "lists": lists,
                    "hybrid": ranked,
                });
                writeln!(out, "{record}")?;
            }
            for (name, mode) in MODES {
                let hits = service
                    .search(&SearchRequest {
                        query: query.clone(),
                        user_id: Some("eval".to_owned()),
                        kinds: vec![MemoryKind::Episode],
                        limit,
                        mode,
                        at: Some(asked),
                        ..SearchRequest::default()
                    })
                    .await?;
                let turns = hits.iter().filter_map(|hit| turn_of.get(&hit.memory.id));
                let ranked = if session_level {
                    first_occurrences(turns.filter_map(|turn| session_of.get(turn).cloned()))
                } else {
                    first_occurrences(turns.cloned())
                };
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
        let id = case["id"].as_str().unwrap_or("?");
        if progress.shown() {
            progress.set(cases as u64);
            progress.message(id.to_owned());
        } else {
            eprintln!("mnemo eval: case {cases} ({id}) done");
        }
    }
    drop(progress);
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
        "turns_refused": refused_turns,
        "cases": cases,
        "modes": modes,
        "categories": categories,
    });
    if let Some(mut out) = dump {
        out.flush()?;
    }
    if json_output {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{questions} questions in {cases} cases ({skipped} without evidence skipped, \
             {refused_turns} turns refused by the store)"
        );
        for (name, _) in MODES {
            println!("{name:<7} {}", report["modes"][name]);
        }
    }
    Ok(())
}
