//! The entity candidate list: memories linked to the entities a query names, found by walking
//! each entity's newest links, co-mentions first.

use std::collections::{HashMap, HashSet};

use super::stats::CorpusStats;
use crate::error::Result;
use crate::store::MemoryBackend;
use crate::types::SearchRequest;

/// The newest links of an entity read when looking for memories that also name another of
/// the query's entities (see [`search_entities`]).
const CO_MENTION_SCAN: i64 = 4_096;

/// Memories linked to entities named (canonically or by alias) by any of `names`, with how
/// many of those entities each is linked to: memories linked to several first, then the
/// most recently linked mentions of each entity.
///
/// Only the newest links are read (a few times `limit` per entity, through the link
/// index), so the cost does not grow with how often an entity was mentioned.
///
/// # Errors
/// The database fails.
pub(crate) async fn search_entities(
    store: &dyn MemoryBackend,
    stats: &CorpusStats,
    request: &SearchRequest,
    names: &[String],
    limit: usize,
) -> Result<Vec<(String, i64)>> {
    let entity_ids = store
        .entities_named(request.user_id.as_deref(), names)
        .await?;
    let entity_ids = specific_entities(store, stats, entity_ids).await?;
    if entity_ids.is_empty() {
        return Ok(Vec::new());
    }
    let depth = (limit * 2).max(20) as i64;
    // (memory, entities matched, newest link)
    let mut candidates: HashMap<String, (i64, i64)> = HashMap::new();
    // Co-mentions: each entity but the last (rarest first) walks its newest links and counts
    // the later entities each linked memory names too. A memory's rarest entity finds it
    // with the full count; the walk stops after `limit` co-mentions (they fill the list) or
    // CO_MENTION_SCAN links, so its cost does not grow with the store.
    for (index, driver) in entity_ids.iter().enumerate() {
        let others = &entity_ids[index + 1..];
        if others.is_empty() {
            break;
        }
        for (memory_id, link, matched) in store
            .co_mentions(driver, others, CO_MENTION_SCAN, limit)
            .await?
        {
            let entry = candidates.entry(memory_id).or_insert((matched, link));
            entry.0 = entry.0.max(matched);
        }
    }
    for entity_id in &entity_ids {
        for (memory_id, link) in store.newest_links(entity_id, depth).await? {
            candidates.entry(memory_id).or_insert((1, link));
        }
    }
    let mut ranked: Vec<(String, (i64, i64))> = candidates.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let ids: Vec<String> = ranked.iter().map(|(id, _)| id.clone()).collect();
    let allowed = store.rank_keys(&ids, request, false).await?;
    Ok(ranked
        .into_iter()
        .filter(|(id, _)| allowed.contains_key(id))
        .map(|(id, (matched, _))| (id, matched))
        .take(limit)
        .collect())
}

/// Leaves out entities linked to so many memories that naming them says little (a speaker
/// named in every turn): more than a fifth of the memories that have any entity, and more
/// than 50. Like inverse document frequency, an entity matters when it is specific.
/// Returns each kept entity once, the rarest first; link counts are cached.
async fn specific_entities(
    store: &dyn MemoryBackend,
    stats: &CorpusStats,
    entity_ids: Vec<String>,
) -> Result<Vec<String>> {
    if entity_ids.is_empty() {
        return Ok(entity_ids);
    }
    let counts = stats.entity_link_counts(store, &entity_ids).await?;
    let limit = (stats.linked_memory_count(store).await? / 5).max(50);
    let mut seen = HashSet::new();
    let mut specific: Vec<String> = entity_ids
        .into_iter()
        .filter(|id| counts.get(id).copied().unwrap_or(0) <= limit)
        .filter(|id| seen.insert(id.clone()))
        .collect();
    specific.sort_by_key(|id| counts.get(id).copied().unwrap_or(0));
    Ok(specific)
}
