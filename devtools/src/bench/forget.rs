//! Forgetting with lineage on the bench's store: what one forget costs when the store holds
//! many memories and many owners. Each forget takes a turn of an owner on which two facts were
//! drawn: one from it alone (removed with it) and one from it and the turn before it (kept,
//! without the forgotten source, after the grounding re-check). Forgetting waits for the whole store,
//! since what is derived from a memory may be anyone's, so its time is every writer's wait.

use std::time::{Duration, Instant};

use mnemo_memory::{FactInput, ListRequest, MemoryApi, MemoryKind, MemoryService};
use serde_json::{json, Value};

use super::measure::summary;

/// Times `count` forgets (`MemoryService::forget_with_lineage`, for good), spread over the
/// owners `user0`… `user{users - 1}`, each of a pair of turns no earlier forget touched; the
/// facts are saved, and their vectors written, before the clock starts. Returns the latencies
/// and what the receipts listed (memories; the entities left unmentioned are counted apart).
/// The bench's store loses the turns and the facts drawn from them alone.
///
/// # Errors
/// The store fails.
pub(super) async fn time_forgets(
    service: &MemoryService,
    users: usize,
    count: usize,
) -> anyhow::Result<Value> {
    let users = users.max(1);
    let mut latencies = Vec::<Duration>::new();
    let (mut removed, mut entities, mut changed) = (0, 0, 0);
    for index in 0..count {
        let owner = format!("user{}", index % users);
        // The owner's turns, newest first, lose one per earlier forget of theirs: skipping two
        // per round never takes a turn an earlier round drew a fact on.
        let turns = service
            .list_memories(ListRequest {
                kinds: vec![MemoryKind::Episode],
                offset: 2 * (index / users),
                ..ListRequest::active(&owner, 2)
            })
            .await?;
        let [turn, earlier] = turns.as_slice() else {
            continue;
        };
        for (content, sources) in [
            (turn.content.clone(), vec![turn.id.clone()]),
            (
                earlier.content.clone(),
                vec![turn.id.clone(), earlier.id.clone()],
            ),
        ] {
            service
                .save_fact(FactInput {
                    user_id: Some(owner.clone()),
                    content,
                    source_ids: sources,
                    confidence: 0.9,
                    ..FactInput::default()
                })
                .await?;
        }
        // The indexer embeds the new facts in the background: not during the clock.
        service.index_pending().await;
        let clock = Instant::now();
        let receipt = service
            .forget_with_lineage(Some(&owner), std::slice::from_ref(&turn.id), false)
            .await?;
        latencies.push(clock.elapsed());
        let (gone_entities, gone_memories): (Vec<_>, Vec<_>) = receipt
            .removed
            .iter()
            .partition(|entry| entry.kind == "entity");
        removed += gone_memories.len();
        entities += gone_entities.len();
        changed += receipt.changed.len();
    }
    let forgets = latencies.len();
    Ok(json!({
        "forgets": forgets,
        "forget_ms": summary(&mut latencies),
        "removed_per_forget": removed as f64 / forgets.max(1) as f64,
        "entities_removed_per_forget": entities as f64 / forgets.max(1) as f64,
        "changed_per_forget": changed as f64 / forgets.max(1) as f64,
    }))
}
