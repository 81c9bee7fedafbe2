//! One evaluation case: its turns ingested as one user's conversation, then its questions
//! searched as that user, in every mode, and scored.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use mnemo_kernel::{Event, EventPayload};
use mnemo_memory::{MemoryKind, MemoryService, SearchMode, SearchRequest};
use serde_json::{json, Map, Value};

use super::totals::{round, Totals};

pub(super) const MODES: [(&str, SearchMode); 4] = [
    ("fts", SearchMode::Fts),
    ("vector", SearchMode::Vector),
    ("entity", SearchMode::Entity),
    ("hybrid", SearchMode::Hybrid),
];

/// Depth of the candidate lists written by `--dump`.
const DUMP_DEPTH: usize = 100;

fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S"))
        .ok()
        .map(|time| Utc.from_utc_datetime(&time))
}

/// When the case's first session took place (the Unix epoch when no session has a date).
pub(super) fn start_of(case: &Value) -> DateTime<Utc> {
    case["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|session| session["date_iso"].as_str().and_then(parse_date))
        .min()
        .unwrap_or_default()
}

/// Whether the case is scored at session level (LongMemEval's).
fn session_level(case: &Value) -> bool {
    case["source"]
        .as_str()
        .is_some_and(|source| source.starts_with("longmemeval"))
}

/// What ingesting a case left to score it by.
pub(super) struct Ingested {
    /// Memory id -> turn id.
    turn_of: HashMap<String, String>,
    /// Turn id -> session id (the unit scored at session level).
    session_of: HashMap<String, String>,
    /// When the last turn was said: questions without a date of their own are asked then.
    last_said: DateTime<Utc>,
    /// Turns the store refused (longer than `max_content_chars`).
    pub(super) refused: usize,
}

/// Ingests every turn of `case` as `user`'s: the speaker prefixed, an image caption appended,
/// an assistant's turn as the agent's reply and every other as the user's message, the
/// session's date as event time (a second apart within a session), one session id per session.
///
/// # Errors
/// The store fails other than by refusing a turn.
pub(super) async fn ingest(
    service: &MemoryService,
    case: &Value,
    user: &str,
) -> anyhow::Result<Ingested> {
    let start = start_of(case);
    let mut ingested = Ingested {
        turn_of: HashMap::new(),
        session_of: HashMap::new(),
        last_said: start,
        refused: 0,
    };
    for session in case["sessions"].as_array().into_iter().flatten() {
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
            ingested.last_said = ingested.last_said.max(said);
            // An assistant's turn (LongMemEval's) is the agent's reply, stored apart from what
            // the user said, as an agent's memory stores it.
            let payload = if turn["role"].as_str() == Some("assistant") {
                EventPayload::AgentResponse { text }
            } else {
                EventPayload::UserMessage { text }
            };
            let event = Event::new(said, payload).with_scope(
                Some(session_id.clone()),
                Some(user.to_owned()),
                None,
            );
            // A turn the memory refuses (longer than max_content_chars) is left out and
            // counted, as a user's memory would leave it out; the case still runs.
            match service.ingest(&event).await {
                Ok(Some(memory_id)) => {
                    ingested
                        .session_of
                        .insert(turn_id.clone(), session_id.clone());
                    ingested.turn_of.insert(memory_id, turn_id);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%turn_id, %error, "eval: turn not stored");
                    ingested.refused += 1;
                }
            }
        }
    }
    Ok(ingested)
}

/// The metrics of a set of cases, overall and per question category, by mode.
#[derive(Default)]
pub(super) struct Scores {
    pub(super) overall: HashMap<&'static str, Totals>,
    pub(super) by_category: BTreeMap<String, HashMap<&'static str, Totals>>,
    /// Questions without evidence, skipped.
    pub(super) skipped: usize,
}

impl Scores {
    /// The report of one layout: per mode overall, and per category.
    pub(super) fn json(&self) -> Value {
        let per_mode = |totals: &HashMap<&'static str, Totals>| -> Map<String, Value> {
            MODES
                .iter()
                .map(|(name, _)| {
                    (
                        (*name).to_owned(),
                        totals.get(name).cloned().unwrap_or_default().json(),
                    )
                })
                .collect()
        };
        let categories: Map<String, Value> = self
            .by_category
            .iter()
            .map(|(category, totals)| (category.clone(), Value::Object(per_mode(totals))))
            .collect();
        json!({
            "questions": self.overall.get("hybrid").map_or(0, |totals| totals.questions),
            "modes": per_mode(&self.overall),
            "categories": categories,
        })
    }
}

/// `items` without repeats, first occurrence kept, in order.
fn first_occurrences(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|item| seen.insert(item.clone()))
        .collect()
}

/// Searches each question of `case` that has evidence as `user`, in every mode, as of when it
/// is asked (its `question_date_iso`, else right after the last turn: "last week" means the week
/// before that), and adds the rankings to `scores`: at turn level, or for LongMemEval's cases
/// at session level (ranked turns mapped to their sessions, first occurrence kept). With
/// `dump`, also writes each question's candidate lists there.
///
/// # Errors
/// A search fails, or the dump cannot be written.
pub(super) async fn score(
    service: &MemoryService,
    case: &Value,
    user: &str,
    ingested: &Ingested,
    ks: &[usize],
    mut dump: Option<&mut dyn Write>,
    scores: &mut Scores,
) -> anyhow::Result<()> {
    let session_level = session_level(case);
    let max_k = ks.iter().copied().max().unwrap_or(10).max(10);
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
            scores.skipped += 1;
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
            .map_or(ingested.last_said, |date| date.max(ingested.last_said));
        // Sessions repeat among ranked turns: ask for more turns to fill the top k.
        let limit = if session_level { max_k * 5 } else { max_k };
        let request = |mode: SearchMode, limit: usize| SearchRequest {
            query: query.clone(),
            user_id: Some(user.to_owned()),
            kinds: vec![MemoryKind::Episode],
            limit,
            mode,
            at: Some(asked),
            ..SearchRequest::default()
        };
        if let Some(out) = dump.as_deref_mut() {
            let lists = service
                .candidate_lists(
                    &SearchRequest {
                        query: query.clone(),
                        user_id: Some(user.to_owned()),
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
                            ingested
                                .turn_of
                                .get(id)
                                .map(|unit| json!([unit, round(*score)]))
                        })
                        .collect();
                    (list.name.to_owned(), Value::Array(hits))
                })
                .collect();
            // The ranking hybrid search returns, with scores, deeper than the metrics read.
            let ranked: Vec<Value> = service
                .search(&request(SearchMode::Hybrid, DUMP_DEPTH))
                .await?
                .iter()
                .filter_map(|hit| {
                    ingested
                        .turn_of
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
            let hits = service.search(&request(mode, limit)).await?;
            let turns = hits
                .iter()
                .filter_map(|hit| ingested.turn_of.get(&hit.memory.id));
            let ranked = if session_level {
                first_occurrences(turns.filter_map(|turn| ingested.session_of.get(turn).cloned()))
            } else {
                first_occurrences(turns.cloned())
            };
            scores
                .overall
                .entry(name)
                .or_default()
                .add(ks, &ranked, &evidence);
            scores
                .by_category
                .entry(category.clone())
                .or_default()
                .entry(name)
                .or_default()
                .add(ks, &ranked, &evidence);
        }
    }
    Ok(())
}
