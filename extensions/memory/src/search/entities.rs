//! The entity candidate list: memories linked to the entities a query names, found by walking
//! each entity's newest links, co-mentions first.

use std::collections::{HashMap, HashSet};

use super::source::SearchSource;
use super::stats::CorpusStats;
use crate::error::Result;
use crate::types::SearchRequest;

/// The newest links of an entity read when looking for memories that also name another of
/// the query's entities (see [`search_entities`]).
const CO_MENTION_SCAN: i64 = 4_096;

/// The entities a query names, split by how specific they are.
#[derive(Debug, Default)]
pub(crate) struct QueryEntities {
    /// Entities specific enough to search by, each once, the rarest first.
    pub(crate) specific: Vec<String>,
    /// People named so often that naming them says little about what is wanted, as (id,
    /// canonical name): a conversation's speakers, when they speak in it (see `speakers.rs`).
    pub(crate) common_people: Vec<(String, String)>,
}

/// Resolves `names` (words and phrases of a query) to `owner`'s entities, and splits them into
/// the specific ones and the people too common to be (see [`QueryEntities`]).
///
/// An entity is too common when it is linked to more than a fifth of the owner's memories that
/// have any entity, and to more than 50: like inverse document frequency, an entity matters
/// when it is specific (other users' memories count for nothing here). Link counts are cached.
///
/// # Errors
/// The database fails.
pub(crate) async fn query_entities<S: SearchSource + ?Sized>(
    store: &S,
    stats: &CorpusStats,
    owner: Option<&str>,
    names: &[String],
) -> Result<QueryEntities> {
    let entity_ids = store.entities_named(owner, names).await?;
    if entity_ids.is_empty() {
        return Ok(QueryEntities::default());
    }
    let counts = stats.entity_link_counts(store, &entity_ids).await?;
    let limit = (stats.linked_memory_count(store, owner).await? / 5).max(50);
    let mut seen = HashSet::new();
    let mut entities = QueryEntities::default();
    for id in entity_ids {
        if !seen.insert(id.clone()) {
            continue;
        }
        if counts.get(&id).copied().unwrap_or(0) <= limit {
            entities.specific.push(id);
        } else if let Some(entity) = store.entity_info_by_id(owner, None, &id, 0).await? {
            if entity.entity_type == "person" {
                entities.common_people.push((id, entity.name));
            }
        }
    }
    entities
        .specific
        .sort_by_key(|id| counts.get(id).copied().unwrap_or(0));
    Ok(entities)
}

/// Memories linked to `entity_ids` (specific entities, the rarest first; see
/// [`query_entities`]), with how many of them each is linked to: memories linked to several
/// first, then the most recently linked mentions of each entity.
///
/// Only the newest links are read (a few times `limit` per entity, through the link
/// index), so the cost does not grow with how often an entity was mentioned.
///
/// # Errors
/// The database fails.
pub(crate) async fn search_entities<S: SearchSource + ?Sized>(
    store: &S,
    request: &SearchRequest,
    entity_ids: &[String],
    limit: usize,
) -> Result<Vec<(String, i64)>> {
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
    for entity_id in entity_ids {
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
