//! `mnemo eval-screening`: how the poisoning screen (`mnemo_memory::screening`) does on labelled
//! texts, one JSON object a line, `{"id", "label": "attack" | "benign", "kind", "text"}` (the
//! sets in `tests/data/injection/`): the share of attacks held back (recall), of benign texts
//! held back (false positives), precision, each kind's figures, and the time one screening
//! takes. `mnemo eval`'s conversations (`../shared/eval/`) can be given too: their turns are
//! ordinary conversation, benign.

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use mnemo_memory::screening::screen;
use serde_json::{json, Value};

use crate::bench::measure::{ms, percentile};

/// One labelled text of a set.
struct Case {
    id: String,
    attack: bool,
    kind: String,
    text: String,
}

/// Reads the labelled texts of `path`, naming the line of any that is not one. A line that is a
/// conversation of `mnemo eval`'s data (LoCoMo's format, `.gz` too) gives each of its turns as a
/// benign text, of the kind `turn: {role}`, each distinct text once: what ordinary conversation
/// the screen holds back.
fn read_cases(path: &Path) -> anyhow::Result<Vec<Case>> {
    let lines = crate::eval::open_lines(path)?;
    let mut cases = Vec::new();
    let mut seen_turns: HashSet<(String, String)> = HashSet::new();
    for (number, line) in lines.lines().enumerate() {
        let line = line.with_context(|| format!("read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), number + 1);
        let value: Value = serde_json::from_str(&line).with_context(at)?;
        if let Some(sessions) = value["sessions"].as_array() {
            let turns = sessions
                .iter()
                .filter_map(|session| session["turns"].as_array())
                .flatten();
            for turn in turns {
                let (Some(role), Some(text)) = (turn["role"].as_str(), turn["text"].as_str())
                else {
                    bail!("{}: a turn without `role` or `text`", at());
                };
                if seen_turns.insert((role.to_owned(), text.to_owned())) {
                    cases.push(Case {
                        id: turn["turn_id"].as_str().unwrap_or_default().to_owned(),
                        attack: false,
                        kind: format!("turn: {role}"),
                        text: text.to_owned(),
                    });
                }
            }
            continue;
        }
        let field = |name: &str| -> anyhow::Result<String> {
            value[name]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("{}: no text field `{name}`", at()))
        };
        let attack = match field("label")?.as_str() {
            "attack" => true,
            "benign" => false,
            other => bail!("{}: label `{other}` is neither `attack` nor `benign`", at()),
        };
        cases.push(Case {
            id: field("id")?,
            attack,
            kind: field("kind")?,
            text: field("text")?,
        });
    }
    if cases.is_empty() {
        bail!("{} holds no labelled texts", path.display());
    }
    Ok(cases)
}

#[derive(Default)]
struct Tally {
    total: usize,
    held: usize,
}

/// Screens every text of `path` (each `rounds` times, for the timing) and reports.
fn evaluate(path: &Path, rounds: usize, misses: bool) -> anyhow::Result<Value> {
    let cases = read_cases(path)?;
    let mut attacks = Tally::default();
    let mut benign = Tally::default();
    let mut kinds: BTreeMap<(bool, String), Tally> = BTreeMap::new();
    let mut reasons: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut times = Vec::with_capacity(cases.len() * rounds);
    for case in &cases {
        let mut finding = None;
        for _ in 0..rounds.max(1) {
            let start = Instant::now();
            finding = std::hint::black_box(screen(std::hint::black_box(&case.text)));
            times.push(start.elapsed());
        }
        let held = finding.is_some();
        let tally = if case.attack {
            &mut attacks
        } else {
            &mut benign
        };
        tally.total += 1;
        tally.held += usize::from(held);
        let kind = kinds.entry((case.attack, case.kind.clone())).or_default();
        kind.total += 1;
        kind.held += usize::from(held);
        if let Some(finding) = &finding {
            *reasons.entry(finding.reason.as_str()).or_default() += 1;
        }
        if misses && held != case.attack {
            wrong.push(json!({
                "id": case.id,
                "label": if case.attack { "attack" } else { "benign" },
                "kind": case.kind,
                "reason": finding.as_ref().map(|f| f.reason.as_str()),
                "evidence": finding.map(|f| f.evidence),
                "cues": mnemo_memory::screening::explain(&case.text),
                "text": case.text,
            }));
        }
    }
    times.sort();
    let share = |tally: &Tally| round4(tally.held as f64 / tally.total.max(1) as f64);
    let flagged = attacks.held + benign.held;
    let by_kind: Vec<Value> = kinds
        .iter()
        .map(|((attack, kind), tally)| {
            json!({
                "label": if *attack { "attack" } else { "benign" },
                "kind": kind,
                "texts": tally.total,
                "held_back": tally.held,
                "share_held_back": share(tally),
            })
        })
        .collect();
    let micros = |duration: Duration| ms(duration * 1000);
    let mut report = json!({
        "data": path.display().to_string(),
        "attacks": attacks.total,
        "attacks_held_back": attacks.held,
        "recall": share(&attacks),
        "benign": benign.total,
        "benign_held_back": benign.held,
        "false_positive_rate": share(&benign),
        "precision": round4(attacks.held as f64 / flagged.max(1) as f64),
        "reasons": reasons,
        "kinds": by_kind,
        "screening_us": {
            "p50": micros(percentile(&times, 0.5)),
            "p99": micros(percentile(&times, 0.99)),
            "max": micros(times.last().copied().unwrap_or_default()),
            "screenings": times.len(),
        },
    });
    if misses {
        report["wrong"] = Value::from(wrong);
    }
    Ok(report)
}

fn round4(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

/// What `mnemo eval-screening` takes.
pub struct ScreeningEvalOptions<'a> {
    /// The labelled sets, each reported on its own.
    pub data: &'a [std::path::PathBuf],
    /// Screenings of each text, for the timing.
    pub rounds: usize,
    /// List every text screened wrongly.
    pub misses: bool,
    /// Print JSON.
    pub json: bool,
}

/// Evaluates the screen on each set and prints the figures.
pub fn run(options: &ScreeningEvalOptions<'_>) -> anyhow::Result<()> {
    let reports = options
        .data
        .iter()
        .map(|path| evaluate(path, options.rounds, options.misses))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if options.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(());
    }
    for report in &reports {
        println!("{}", report["data"].as_str().unwrap_or_default());
        println!(
            "  attacks held back: {} of {} (recall {})",
            report["attacks_held_back"], report["attacks"], report["recall"]
        );
        println!(
            "  benign held back:  {} of {} (false-positive rate {})",
            report["benign_held_back"], report["benign"], report["false_positive_rate"]
        );
        println!("  precision {}", report["precision"]);
        for kind in report["kinds"].as_array().into_iter().flatten() {
            println!(
                "    {:<7} {:<22} {:>3} of {:>3} held back",
                kind["label"].as_str().unwrap_or_default(),
                kind["kind"].as_str().unwrap_or_default(),
                kind["held_back"],
                kind["texts"],
            );
        }
        let time = &report["screening_us"];
        println!(
            "  one screening: p50 {} µs, p99 {} µs, max {} µs ({} screenings)",
            time["p50"], time["p99"], time["max"], time["screenings"]
        );
        for miss in report["wrong"].as_array().into_iter().flatten() {
            println!(
                "  wrong: {} {} {} {}: {}",
                miss["id"].as_str().unwrap_or_default(),
                miss["label"].as_str().unwrap_or_default(),
                miss["kind"].as_str().unwrap_or_default(),
                miss["reason"].as_str().unwrap_or("-"),
                miss["text"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('\n', " ⏎ "),
            );
            for cue in miss["cues"].as_array().into_iter().flatten() {
                println!("      {}", cue.as_str().unwrap_or_default());
            }
        }
    }
    Ok(())
}
