//! One owner's search in the bench's store of many owners beside the same owner's search in a
//! store holding only their own memories, query by query: in a store shared by many users, an
//! owner's search should cost what their own memories cost (issue 43's target: at most 1.5
//! times).

use anyhow::Context as _;
use mnemo_kernel::host::Config;
use mnemo_kernel::{Event, EventPayload};
use mnemo_memory::{ListRequest, MemoryApi, MemoryKind, MemoryService, SearchMode};
use serde_json::{json, Value};

use super::data::{Random, QUERY_TEMPLATES};
use super::measure::summary;
use super::{embedder_of, fill_vectors, service_of, start_kernel, time_searches};

/// Most memories of the owner copied (an owner of a shared bench store holds far fewer).
const MOST_COPIED: usize = 200_000;
/// Memories listed at a time (the memory API's most).
const PAGE: usize = 1_000;

/// Copies `owner`'s turns from `shared` into a fresh store (same text, times, sessions and
/// speakers; vectors from the real model for up to `real` distinct texts, as the bench fills
/// them), then times `queries × rounds` searches of theirs in both stores, alternating which
/// store goes first. Returns the report: both p50s and their ratio.
///
/// # Errors
/// Either store or the model fails.
pub(super) async fn compare(
    base: &Config,
    shared: &MemoryService,
    owner: &str,
    queries: usize,
    rounds: usize,
    real: usize,
    random: &mut Random,
) -> anyhow::Result<Value> {
    let mut memories = Vec::new();
    while memories.len() < MOST_COPIED {
        let page = shared
            .list_memories(ListRequest {
                kinds: vec![MemoryKind::Episode],
                offset: memories.len(),
                ..ListRequest::active(owner, PAGE)
            })
            .await?;
        let last = page.len() < PAGE;
        memories.extend(page);
        if last {
            break;
        }
    }
    memories.sort_by(|a, b| a.event_time.cmp(&b.event_time).then(a.id.cmp(&b.id)));
    let dir = tempfile::tempdir().context("temporary directory")?;
    let kernel = start_kernel(base, dir.path(), true).await?;
    let alone = service_of(&kernel)?;
    let mut texts = Vec::with_capacity(memories.len());
    for memory in &memories {
        let payload = if memory.source_role.as_deref() == Some("user") {
            EventPayload::UserMessage {
                text: memory.content.clone(),
            }
        } else {
            EventPayload::AgentResponse {
                text: memory.content.clone(),
            }
        };
        let event = Event::new(memory.event_time, payload).with_scope(
            memory.session_id.clone(),
            Some(owner.to_owned()),
            None,
        );
        alone.ingest(&event).await?;
        texts.push(memory.content.clone());
    }
    let embedder = embedder_of(&kernel)?;
    if !texts.is_empty() {
        fill_vectors(&alone, &embedder, &texts, real, random).await?;
    }
    let (mut in_shared, mut in_alone) = (Vec::new(), Vec::new());
    for index in 0..queries.saturating_mul(rounds.max(1)) {
        let template = random.pick(&QUERY_TEMPLATES);
        let query = format!("{} {index} alone", random.fill(template));
        let one = [(owner.to_owned(), query)];
        if index % 2 == 0 {
            in_shared.extend(time_searches(shared, &one, SearchMode::Hybrid).await?);
            in_alone.extend(time_searches(&alone, &one, SearchMode::Hybrid).await?);
        } else {
            in_alone.extend(time_searches(&alone, &one, SearchMode::Hybrid).await?);
            in_shared.extend(time_searches(shared, &one, SearchMode::Hybrid).await?);
        }
    }
    kernel.shutdown().await;
    let (shared_ms, alone_ms) = (summary(&mut in_shared), summary(&mut in_alone));
    let ratio = shared_ms["p50"].as_f64().unwrap_or_default()
        / alone_ms["p50"].as_f64().unwrap_or_default().max(1e-9);
    Ok(json!({
        "owner": owner,
        "owner_memories": memories.len(),
        "searches": in_shared.len(),
        "in_shared_store_ms": shared_ms,
        "alone_ms": alone_ms,
        "p50_ratio": (ratio * 100.0).round() / 100.0,
    }))
}
