//! The consolidator: turns a finished session's episodes into durable facts with an LLM.
//!
//! Steps: idempotency guard; the episodes no earlier consolidation of the session read (a turn
//! added after one makes the session pending again), in pages; one model call per page that extracts facts
//! (a `save_facts` tool call, or a JSON reply read tolerantly), keeping only statements grounded
//! in the user's turns of the page, with those turns as their sources ([`facts`]);
//! `save_facts_batch` (deduplicated by the store); one model call that names contradictions
//! between the new facts and similar old ones (`resolve_conflict` for each);
//! `mark_session_consolidated`. A model that fails or answers
//! nonsense during extraction leaves the session pending, records the attempt, and saves nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use mnemo_kernel::{
    extract_json, schema_for, ChatMessage, ChatRequest, ChatResponse, KernelContext, LlmClient,
    LlmError, ToolChoice, ToolSpec,
};
use mnemo_memory_api::{Memory, MemoryApi, NewFact, SearchHit, SessionKey};
use schemars::JsonSchema;
use serde_json::Value;

use facts::{parse_facts, transcript};

mod facts;

const EXTRACT_PROMPT: &str = "You read a conversation between a user and an assistant and extract durable facts worth remembering for future conversations: preferences, plans, relationships, biographical details, decisions, commitments. Each fact is one short, self-contained sentence in the third person that names who it is about (write \"the user\" for the user). Only what the user said counts: the assistant's turns are context, not evidence. Skip small talk, questions, and anything only true during this conversation. Reply with JSON only: {\"facts\": [{\"content\": \"...\", \"sources\": [numbers of the user's turns that say it], \"confidence\": 0.0 to 1.0}]}. Reply {\"facts\": []} when there is nothing worth keeping.";

const CONFLICT_PROMPT: &str = "You check new facts (N1, N2, ...) against older facts (O1, O2, ...) about the same user. Two facts contradict when both cannot be true now (a changed preference, a new address, a cancelled plan). Facts that merely add detail do not contradict. Reply with JSON only: {\"contradictions\": [{\"new\": \"N1\", \"old\": \"O2\"}]}, or {\"contradictions\": []}.";

/// What happened to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Facts saved (and skipped: duplicates, fragments, or facts not found in the user's turns),
    /// contradictions resolved.
    Consolidated {
        saved: usize,
        skipped: usize,
        conflicts: usize,
    },
    /// Nothing to do: already consolidated, or running elsewhere.
    Skipped(String),
    /// Given up after this many failed attempts (`max_consolidation_attempts`): it stays
    /// pending, and every run passes it over until `mnemo jobs retry`.
    GivenUp(i64),
    /// The model failed; the session stays pending.
    Failed(String),
}

/// Consolidation settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) max_attempts: i64,
    pub(crate) conflict_candidates: usize,
}

/// Sessions being consolidated right now; a second request for one of them is skipped.
#[derive(Debug, Default)]
pub(crate) struct InFlight(Mutex<HashSet<SessionKey>>);

struct Claim<'a> {
    in_flight: &'a InFlight,
    session: SessionKey,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.in_flight
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&self.session);
    }
}

impl InFlight {
    fn claim(&self, session: &SessionKey) -> Option<Claim<'_>> {
        let mut sessions = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        sessions.insert(session.clone()).then(|| Claim {
            in_flight: self,
            session: session.clone(),
        })
    }
}

/// The arguments the `save_facts` tool asks the model for. Only its schema is used: the reply is
/// read field by field by [`facts::parse_facts`], so that one malformed fact does not lose the
/// others.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct SaveFacts {
    facts: Vec<ExtractedFact>,
}

/// One fact in [`SaveFacts`].
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ExtractedFact {
    content: String,
    sources: Option<Vec<i64>>,
}

fn save_facts_tool() -> ToolSpec {
    ToolSpec {
        name: "save_facts".to_owned(),
        description: "Save the durable facts extracted from the conversation.".to_owned(),
        parameters: schema_for::<SaveFacts>(),
    }
}

/// The JSON object the model produced: a `save_facts` tool call's arguments, or its text.
fn reply_json(response: &ChatResponse) -> Option<Value> {
    if let Some(call) = response.tool_calls.first() {
        return match &call.arguments {
            Value::String(text) => extract_json(text),
            other => Some(other.clone()),
        };
    }
    response.content.as_deref().and_then(extract_json)
}

/// Consolidates one session; see the module docs.
pub(crate) async fn consolidate(
    ctx: &KernelContext,
    memory: &dyn MemoryApi,
    in_flight: &InFlight,
    settings: &Settings,
    session: &SessionKey,
) -> Result<Outcome, mnemo_memory_api::MemoryApiError> {
    if memory.is_session_consolidated(session).await? {
        return Ok(Outcome::Skipped("already consolidated".to_owned()));
    }
    let Some(_claim) = in_flight.claim(session) else {
        return Ok(Outcome::Skipped(
            "a consolidation of it is running".to_owned(),
        ));
    };
    // Other processes may share the store (several servers on one database): one of them at a
    // time consolidates a session.
    if !memory
        .lease_consolidation(session, CONSOLIDATION_LEASE_SECS)
        .await?
    {
        return Ok(Outcome::Skipped(
            "another process is consolidating it".to_owned(),
        ));
    }
    let outcome = consolidate_leased(ctx, memory, settings, session).await;
    let released = memory.release_consolidation(session).await;
    let outcome = outcome?;
    released?;
    Ok(outcome)
}

/// How long a process holds a session's consolidation before another may take it over, from its
/// last page read: far longer than the model takes for a page, short enough that a process that
/// died leaves the session to the next nightly run.
const CONSOLIDATION_LEASE_SECS: i64 = 15 * 60;

/// Consolidates a session this process holds the lease of.
async fn consolidate_leased(
    ctx: &KernelContext,
    memory: &dyn MemoryApi,
    settings: &Settings,
    session: &SessionKey,
) -> Result<Outcome, mnemo_memory_api::MemoryApiError> {
    // Another process may have finished it between the check above and the lease.
    if memory.is_session_consolidated(session).await? {
        return Ok(Outcome::Skipped("already consolidated".to_owned()));
    }
    if let Some(pending) = memory
        .get_pending_consolidations()
        .await?
        .into_iter()
        .find(|pending| pending.session == *session)
    {
        if pending.attempts >= settings.max_attempts {
            return Ok(Outcome::GivenUp(pending.attempts));
        }
    }
    let Some(llm) = ctx.llm() else {
        return Ok(Outcome::Skipped("no LLM is configured".to_owned()));
    };

    // 1. Extract facts from every page before saving any, so a failure saves nothing.
    let mut facts = Vec::new();
    let mut read = Vec::new();
    let mut refused = 0;
    let mut offset = 0;
    loop {
        // Each page may wait minutes on the model: the lease runs from the last page read.
        if offset > 0
            && !memory
                .lease_consolidation(session, CONSOLIDATION_LEASE_SECS)
                .await?
        {
            return Ok(Outcome::Skipped(
                "another process took the consolidation over".to_owned(),
            ));
        }
        let page = memory
            .get_episodes_for_consolidation(session, offset)
            .await?;
        read.extend(page.episodes.iter().map(|episode| episode.id.clone()));
        // A quarantined turn is not shown to the model: its text carries instructions or
        // hides some, and it is no evidence for a fact.
        let readable: Vec<Memory> = page
            .episodes
            .into_iter()
            .filter(|episode| episode.quarantine.is_none())
            .collect();
        if !readable.is_empty() {
            match extract_page(llm.as_ref(), &session.user_id, &readable).await {
                Ok((mut page_facts, page_refused)) => {
                    facts.append(&mut page_facts);
                    refused += page_refused;
                }
                // Nothing was asked (no model for this user now): not a failed attempt.
                Err(PageError::Unavailable(reason)) => return Ok(Outcome::Skipped(reason)),
                Err(PageError::Failed(reason)) => {
                    let attempts = memory
                        .record_consolidation_failure(session, &reason)
                        .await?;
                    return Ok(Outcome::Failed(format!("{reason} (attempt {attempts})")));
                }
            }
        }
        match page.next_offset {
            Some(next) => offset = next,
            None => break,
        }
    }

    // 2. Save, deduplicated by the store.
    let saved = memory.save_facts_batch(session, facts).await?;

    // 3. Contradictions between the new facts and similar older ones.
    let mut conflicts = 0;
    let mut candidates: Vec<(Memory, Vec<SearchHit>)> = Vec::new();
    for id in &saved.saved {
        let Some(fact) = memory.get_memory(id).await? else {
            continue;
        };
        let hits: Vec<SearchHit> = memory
            .detect_conflicts(id, settings.conflict_candidates)
            .await?
            .into_iter()
            .filter(|hit| !saved.saved.contains(&hit.memory.id))
            .collect();
        if !hits.is_empty() {
            candidates.push((fact, hits));
        }
    }
    if !candidates.is_empty() {
        match find_contradictions(llm.as_ref(), &session.user_id, &candidates).await {
            Ok(pairs) => {
                for (new_id, old_id) in pairs {
                    memory.resolve_conflict(&old_id, &new_id).await?;
                    conflicts += 1;
                }
            }
            Err(reason) => {
                tracing::warn!(%session, %reason, "conflict check failed; the new facts are kept without it");
            }
        }
    }
    memory.mark_session_consolidated(session, &read).await?;
    Ok(Outcome::Consolidated {
        saved: saved.saved.len(),
        skipped: saved.skipped.len() + refused,
        conflicts,
    })
}

/// Why a page of a session could not be read.
enum PageError {
    /// No model can answer for this user now; nothing was asked.
    Unavailable(String),
    /// The model was asked and failed, or answered without facts.
    Failed(String),
}

async fn extract_page(
    llm: &dyn LlmClient,
    user: &str,
    page: &[Memory],
) -> Result<(Vec<NewFact>, usize), PageError> {
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system(EXTRACT_PROMPT),
            ChatMessage::user(format!("Conversation:\n{}", transcript(page))),
        ],
        tools: vec![save_facts_tool()],
        // Extraction always ends in the one tool call; a server that is not told so may
        // ignore the tool (llama.cpp's drops tools without a `tool_choice`).
        tool_choice: ToolChoice::Tool("save_facts".to_owned()),
        json_reply: false,
        max_tokens: Some(1_024),
        user: Some(user.to_owned()),
    };
    let response = llm.complete(request).await.map_err(|error| match error {
        LlmError::Unavailable(reason) => PageError::Unavailable(reason),
        other => PageError::Failed(format!("fact extraction failed: {other}")),
    })?;
    let reply = reply_json(&response).ok_or_else(|| {
        PageError::Failed(format!(
            "fact extraction: the model's reply holds no JSON: {:?}",
            response
                .content
                .unwrap_or_default()
                .chars()
                .take(120)
                .collect::<String>()
        ))
    })?;
    parse_facts(&reply, page).ok_or_else(|| {
        PageError::Failed("fact extraction: the model's JSON has no `facts` list".to_owned())
    })
}

/// Asks the model which new facts contradict which older ones. Facts are labelled `N1..` and
/// `O1..` in the prompt (short labels models copy reliably); returns (new id, old id) pairs.
async fn find_contradictions(
    llm: &dyn LlmClient,
    user: &str,
    candidates: &[(Memory, Vec<SearchHit>)],
) -> Result<Vec<(String, String)>, String> {
    let mut listing = String::new();
    let mut labels: HashMap<String, String> = HashMap::new();
    let mut asked: HashSet<(String, String)> = HashSet::new();
    let mut old_number = 0;
    for (index, (fact, hits)) in candidates.iter().enumerate() {
        let new_label = format!("N{}", index + 1);
        listing.push_str(&format!("{new_label}: {}\n", fact.content));
        labels.insert(new_label, fact.id.clone());
        for hit in hits {
            let old_label = match labels.iter().find(|(_, id)| **id == hit.memory.id) {
                Some((label, _)) => label.clone(),
                None => {
                    old_number += 1;
                    let label = format!("O{old_number}");
                    labels.insert(label.clone(), hit.memory.id.clone());
                    label
                }
            };
            listing.push_str(&format!("  {old_label} (older): {}\n", hit.memory.content));
            asked.insert((fact.id.clone(), hit.memory.id.clone()));
        }
    }
    let response = llm
        .complete(ChatRequest {
            user: Some(user.to_owned()),
            ..ChatRequest::new(CONFLICT_PROMPT, listing)
        })
        .await
        .map_err(|error| error.to_string())?;
    let reply = reply_json(&response).ok_or("the reply holds no JSON")?;
    let pairs = reply
        .get("contradictions")
        .and_then(Value::as_array)
        .ok_or("the reply has no `contradictions` list")?;
    Ok(pairs
        .iter()
        .filter_map(|pair| {
            let new_id = labels.get(pair.get("new")?.as_str()?.trim())?.clone();
            let old_id = labels.get(pair.get("old")?.as_str()?.trim())?.clone();
            // Only pairs we asked about: the model cannot retire an arbitrary fact.
            asked
                .contains(&(new_id.clone(), old_id.clone()))
                .then_some((new_id, old_id))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_kernel::LlmToolCall;
    use serde_json::json;

    #[test]
    fn the_reply_is_read_from_a_tool_call_or_from_json_in_prose() {
        let from_text = ChatResponse {
            content: Some("Sure!\n```json\n{\"facts\": [\"Dana moved to Lisbon\"]}\n```".into()),
            ..ChatResponse::default()
        };
        assert_eq!(
            reply_json(&from_text),
            Some(json!({"facts": ["Dana moved to Lisbon"]}))
        );
        let from_call = ChatResponse {
            content: None,
            tool_calls: vec![LlmToolCall {
                id: "call_1".into(),
                name: "save_facts".into(),
                arguments: json!("{\"facts\": []}"),
            }],
            ..ChatResponse::default()
        };
        assert_eq!(reply_json(&from_call), Some(json!({"facts": []})));
        let nothing = ChatResponse {
            content: Some("I found no facts.".into()),
            ..ChatResponse::default()
        };
        assert_eq!(reply_json(&nothing), None);
    }

    #[test]
    fn the_save_facts_schema_is_generated_and_lists_facts() {
        let tool = save_facts_tool();
        assert_eq!(tool.name, "save_facts");
        assert_eq!(tool.parameters["type"], "object");
        assert_eq!(tool.parameters["properties"]["facts"]["type"], "array");
    }
}
