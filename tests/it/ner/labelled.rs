//! Micro precision and recall of the fast strategy on the labelled chat sentences in
//! `tests/data/ner-labelled.jsonl` (see `tests/data/README.md`). A predicted entity is correct when
//! its surface matches an unmatched labelled entity of the same sentence case-insensitively and
//! the types agree.
//!
//! Run with `cargo test --test it ner::labelled -- --nocapture` to see the numbers and every
//! miss. `MNEMO_NER_LABELLED=path/to/other.jsonl` measures another set of the same shape instead
//! (the floors are then not asserted).

use std::path::{Path, PathBuf};

use mnemo_ner::{NerApi, NerService};
use serde::Deserialize;

/// Floors under what was measured on this set (precision 1.00, recall 0.96). The rules were
/// written knowing the set, so these overstate unseen text: on 50 sentences written afterwards and
/// never tuned on, the fast strategy scored precision 0.97 and recall 0.76.
const MIN_PRECISION: f64 = 0.9;
const MIN_RECALL: f64 = 0.85;

#[derive(Debug, Deserialize)]
struct Sentence {
    text: String,
    entities: Vec<Label>,
}

#[derive(Debug, Deserialize)]
struct Label {
    text: String,
    #[serde(rename = "type")]
    entity_type: String,
}

fn load(path: &Path) -> Vec<Sentence> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line).unwrap_or_else(|err| panic!("line {}: {err}", index + 1))
        })
        .collect()
}

#[test]
fn fast_strategy_precision_and_recall() {
    let other = std::env::var_os("MNEMO_NER_LABELLED")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from);
    let path = other.clone().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ner-labelled.jsonl")
    });
    let sentences = load(&path);
    let ner = NerService::default();
    let (mut n_predicted, mut n_labelled, mut n_correct) = (0usize, 0usize, 0usize);
    let mut wrong = Vec::new();
    let mut missed = Vec::new();
    for sentence in &sentences {
        let predicted = ner.extract_fast(&sentence.text);
        let mut unmatched: Vec<&Label> = sentence.entities.iter().collect();
        n_labelled += unmatched.len();
        n_predicted += predicted.len();
        for entity in &predicted {
            let position = unmatched.iter().position(|label| {
                label.text.to_lowercase() == entity.surface.to_lowercase()
                    && label.entity_type == entity.entity_type.as_str()
            });
            match position {
                Some(position) => {
                    unmatched.swap_remove(position);
                    n_correct += 1;
                }
                None => wrong.push(format!(
                    "{:?} as {} in {:?}",
                    entity.surface,
                    entity.entity_type.as_str(),
                    sentence.text
                )),
            }
        }
        missed.extend(unmatched.iter().map(|label| {
            format!(
                "{:?} ({}) in {:?}",
                label.text, label.entity_type, sentence.text
            )
        }));
    }
    let precision = n_correct as f64 / n_predicted.max(1) as f64;
    let recall = n_correct as f64 / n_labelled.max(1) as f64;
    println!(
        "ner fast strategy on {} sentences: precision {precision:.3} ({n_correct}/{n_predicted}), \
         recall {recall:.3} ({n_correct}/{n_labelled})",
        sentences.len()
    );
    for line in &wrong {
        println!("  wrong:  {line}");
    }
    for line in &missed {
        println!("  missed: {line}");
    }
    if other.is_some() {
        return;
    }
    assert!(
        sentences.len() >= 60,
        "the set has {} sentences",
        sentences.len()
    );
    assert!(
        precision >= MIN_PRECISION,
        "precision {precision:.3} < {MIN_PRECISION}"
    );
    assert!(recall >= MIN_RECALL, "recall {recall:.3} < {MIN_RECALL}");
}
