//! `mnemo eval`: retrieval quality on LoCoMo-format data (see `../shared/eval/README.md`).
//!
//! Isolated (the default): for each conversation, a fresh store; every turn ingested as an
//! episode of the user `eval` (see [`case::ingest`]); the indexer finishes; then each question
//! with evidence is searched in every mode (fts, vector, entity, hybrid), as of when it is
//! asked, and scored at turn level: evidence recall@k, hit@k and MRR (within the largest k),
//! overall and per category. Questions without evidence are skipped and counted.
//!
//! Shared (`--shared-store`): then again with every conversation in ONE store, each as a user
//! of its own (`case-N`), beside the conversations of `--distractors FILE` as more users
//! (`distractor-N`, ingested first, never asked), and each case's questions asked as its user.
//! The report gives both, side by side: a service holds many users in one store, and one user's
//! search should find the same whatever the others hold.
//!
//! LongMemEval cases (`source` starting with `longmemeval`) are scored at session level, as the
//! data's README asks: the ranked turns are mapped to their sessions (first occurrence kept) and
//! recall@k, recall_all@k (every evidence session in the top k), hit@k (recall_any) and nDCG@10
//! are computed against `evidence_session_ids`. A `.gz` file is read through `gunzip -c`.
//!
//! `--dump FILE` also writes, per question, the candidate lists hybrid search fuses (fts with
//! BM25 relevance, vector with cosine, entity with matched entities), mapped to turn ids (the
//! evidence is session ids at session level), and hybrid search's own ranking with its scores,
//! for studying fusion offline (from the isolated run).

mod case;
mod totals;

use std::io::{BufRead, Write as _};
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_memory::MemoryService;
use serde_json::{json, Value};

use crate::progress::Progress;
use case::{Scores, MODES};

/// What `mnemo eval` measures.
#[derive(Debug, Clone, Copy)]
pub struct EvalOptions<'a> {
    /// The cases (JSONL, or `.gz`).
    pub data: &'a Path,
    /// Cut-offs of recall@k and hit@k.
    pub ks: &'a [usize],
    /// Print JSON.
    pub json: bool,
    /// Write each question's candidate lists here (JSONL), from the isolated run.
    pub dump: Option<&'a Path>,
    /// Also run every case in one store, each as its own user.
    pub shared_store: bool,
    /// More users for the shared store: every case of this file, ingested and never asked.
    pub distractors: Option<&'a Path>,
}

async fn start_kernel(base: &Config, dir: &Path, start: DateTime<Utc>) -> anyhow::Result<Kernel> {
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

fn memory_of(kernel: &Kernel) -> anyhow::Result<Arc<MemoryService>> {
    kernel
        .context()
        .services()
        .get::<MemoryService>()
        .context("the memory extension did not start")
}

/// The data file's lines; a `.gz` file is decompressed by `gunzip -c` (no gzip crate needed).
pub(crate) fn open_lines(data: &Path) -> anyhow::Result<Box<dyn BufRead>> {
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

/// The cases of `data`, one JSON object a line (blank lines skipped).
fn cases(data: &Path) -> anyhow::Result<impl Iterator<Item = anyhow::Result<Value>>> {
    let path = data.display().to_string();
    Ok(open_lines(data)?
        .lines()
        .enumerate()
        .filter_map(move |(index, line)| match line {
            Err(error) => Some(Err(error.into())),
            Ok(line) if line.trim().is_empty() => None,
            Ok(line) => Some(
                serde_json::from_str(&line)
                    .with_context(|| format!("{path}:{}: not JSON", index + 1)),
            ),
        }))
}

/// What one layout measured.
#[derive(Default)]
struct Run {
    scores: Scores,
    cases: usize,
    refused_turns: usize,
    distractor_users: usize,
}

impl Run {
    fn json(&self) -> Value {
        let mut report = self.scores.json();
        report["skipped_without_evidence"] = json!(self.scores.skipped);
        report["turns_refused"] = json!(self.refused_turns);
        report["cases"] = json!(self.cases);
        report["distractor_users"] = json!(self.distractor_users);
        report
    }
}

/// Shows which case was done last, on a terminal or as a line.
fn case_done(progress: &Progress, layout: &str, done: usize, case: &Value) {
    let id = case["id"].as_str().unwrap_or("?");
    if progress.shown() {
        progress.set(done as u64);
        progress.message(id.to_owned());
    } else {
        eprintln!("mnemo eval ({layout}): case {done} ({id}) done");
    }
}

/// Every case in a fresh store of its own, as the user `eval`.
async fn isolated(base: &Config, options: &EvalOptions<'_>) -> anyhow::Result<Run> {
    let mut dump = match options.dump {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let progress = Progress::new(
        None,
        "{spinner} mnemo eval: {pos} cases done, the last {msg} ({elapsed})",
    );
    let mut run = Run::default();
    for case in cases(options.data)? {
        let case = case?;
        let dir = tempfile::tempdir()?;
        let kernel = start_kernel(base, dir.path(), case::start_of(&case)).await?;
        let service = memory_of(&kernel)?;
        let ingested = case::ingest(&service, &case, "eval").await?;
        kernel.settle().await;
        let out = dump.as_mut().map(|out| out as &mut dyn std::io::Write);
        case::score(
            &service,
            &case,
            "eval",
            &ingested,
            options.ks,
            out,
            &mut run.scores,
        )
        .await?;
        kernel.shutdown().await;
        run.cases += 1;
        run.refused_turns += ingested.refused;
        case_done(&progress, "isolated", run.cases, &case);
    }
    if let Some(mut out) = dump {
        out.flush()?;
    }
    Ok(run)
}

/// The earliest session date of every case in `files`.
fn earliest_start(files: &[&Path]) -> anyhow::Result<DateTime<Utc>> {
    let mut earliest: Option<DateTime<Utc>> = None;
    for file in files {
        for case in cases(file)? {
            let start = case::start_of(&case?);
            earliest = Some(earliest.map_or(start, |known| known.min(start)));
        }
    }
    Ok(earliest.unwrap_or_default())
}

/// Every case in one store, each as its own user, beside the distractors' users.
async fn shared(base: &Config, options: &EvalOptions<'_>) -> anyhow::Result<Run> {
    let mut files = vec![options.data];
    files.extend(options.distractors);
    let dir = tempfile::tempdir()?;
    let kernel = start_kernel(base, dir.path(), earliest_start(&files)?).await?;
    let service = memory_of(&kernel)?;
    let progress = Progress::new(
        None,
        "{spinner} mnemo eval (shared store): {pos} users stored, the last {msg} ({elapsed})",
    );
    let mut run = Run::default();
    let mut stored = 0;
    if let Some(distractors) = options.distractors {
        for (number, case) in cases(distractors)?.enumerate() {
            let case = case?;
            let ingested = case::ingest(&service, &case, &format!("distractor-{number}")).await?;
            run.distractor_users += 1;
            run.refused_turns += ingested.refused;
            stored += 1;
            case_done(&progress, "shared store, distractor", stored, &case);
        }
    }
    // The cases' turns first, all of them; their questions once every user is in the store.
    let mut asked = Vec::new();
    for (number, case) in cases(options.data)?.enumerate() {
        let mut case = case?;
        let user = format!("case-{number}");
        let ingested = case::ingest(&service, &case, &user).await?;
        run.refused_turns += ingested.refused;
        stored += 1;
        case_done(&progress, "shared store", stored, &case);
        // Only the questions are needed from here on.
        if let Some(object) = case.as_object_mut() {
            object.remove("sessions");
        }
        asked.push((user, case, ingested));
    }
    kernel.settle().await;
    for (user, case, ingested) in &asked {
        case::score(
            &service,
            case,
            user,
            ingested,
            options.ks,
            None,
            &mut run.scores,
        )
        .await?;
        run.cases += 1;
    }
    kernel.shutdown().await;
    Ok(run)
}

/// Runs the evaluation; prints a table, or JSON with `options.json`.
pub async fn run(base: &Config, options: &EvalOptions<'_>) -> anyhow::Result<()> {
    let isolated_run = isolated(base, options).await?;
    let shared_run = match options.shared_store {
        true => Some(shared(base, options).await?),
        false => None,
    };
    let mut report = isolated_run.json();
    if let Some(shared_run) = &shared_run {
        report["shared_store"] = shared_run.json();
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let print = |run: &Run, title: &str| {
        println!(
            "{title}: {} questions in {} cases ({} without evidence skipped, {} turns refused by \
             the store)",
            run.scores
                .overall
                .get("hybrid")
                .map_or(0, |totals| totals.questions),
            run.cases,
            run.scores.skipped,
            run.refused_turns
        );
        let report = run.json();
        for (name, _) in MODES {
            println!("{name:<7} {}", report["modes"][name]);
        }
    };
    print(&isolated_run, "isolated (a store per case)");
    if let Some(shared_run) = &shared_run {
        print(
            shared_run,
            &format!(
                "shared (one store, a user per case, {} distractor users)",
                shared_run.distractor_users
            ),
        );
    }
    Ok(())
}
