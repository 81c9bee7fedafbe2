//! What forgetting a memory takes with it, for both backends: the memories derived from it,
//! followed through their provenance (`source_ids`), and the counts a receipt gives. Read inside
//! the forget's own transaction, so that what is traced is what is removed.
//!
//! A fact drawn from turns is derived from them; a reflection from the memories it read. A
//! correction names the fact it corrects in its provenance (`corrects`) but says something of
//! its own, and an episode names its event (`event:…`): neither is derived from those. A derived
//! memory whose sources are all gone goes too; a fact that keeps other sources stays, without
//! the gone ones, if it still stands on what is left
//! ([`mnemo_memory_api::grounding::stands_without`]); a reflection built on anything gone goes.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;
use sqlx::QueryBuilder;

use super::{Bind, Dialect};
use crate::error::Result;
use crate::store::rows::{cached_hashes, json_list};
use crate::types::{MemoryKind, ReceiptEntry};
use mnemo_memory_api::grounding::stands_without;

/// Ids per statement: well under SQLite's 32,766 parameters.
const PER_STATEMENT: usize = 200;

/// What forgetting some memories takes with it.
#[derive(Debug, Default)]
pub(crate) struct Lineage {
    /// Every memory to remove, the ones asked for first, each with why.
    pub(crate) removed: Vec<ReceiptEntry>,
    /// Facts that stay with fewer sources: id, kind and their provenance without the removed.
    pub(crate) changed: Vec<(ReceiptEntry, Vec<String>)>,
    /// The owners of the removed memories (`""` for none).
    pub(crate) owners: Vec<String>,
}

impl Lineage {
    /// The ids of the memories to remove.
    pub(crate) fn removed_ids(&self) -> Vec<String> {
        self.removed.iter().map(|entry| entry.id.clone()).collect()
    }
}

/// A memory that may be derived from a removed one.
struct Candidate {
    id: String,
    kind: MemoryKind,
    content: String,
    /// The fact it corrects, for a correction (its `corrects` attribute).
    corrects: Option<String>,
    sources: Vec<String>,
}

impl Candidate {
    /// The sources it is derived from: its provenance without its event and the fact it
    /// corrects.
    fn lineage(&self) -> Vec<String> {
        self.sources
            .iter()
            .filter(|source| {
                !source.starts_with("event:") && Some(source.as_str()) != self.corrects.as_deref()
            })
            .cloned()
            .collect()
    }
}

/// Traces what forgetting `ids` removes and changes, on `connection` inside the forget's
/// transaction; with `active_only` (a soft forget) only active memories, since only those are
/// soft-deleted. Unknown ids are skipped.
pub(crate) async fn trace<D: Dialect>(
    connection: &mut D::Connection,
    ids: &[String],
    active_only: bool,
) -> Result<Lineage> {
    let mut lineage = Lineage::default();
    // The text of every removed memory, for the check of what stays.
    let mut gone: HashMap<String, String> = HashMap::new();
    let mut owners: HashSet<String> = HashSet::new();
    for chunk in ids.chunks(PER_STATEMENT) {
        let mut query = QueryBuilder::<D>::new(
            "SELECT id, kind, content, COALESCE(user_id, '') AS owner FROM memories WHERE ",
        );
        D::push_one_of(&mut query, "id", chunk);
        if active_only {
            query.push(" AND valid_until IS NULL");
        }
        for row in D::rows(connection, query).await? {
            let id = D::text(&row, "id")?;
            if gone.contains_key(&id) {
                continue;
            }
            lineage.removed.push(ReceiptEntry::new(
                id.clone(),
                D::text(&row, "kind")?,
                "forgotten",
            ));
            owners.insert(D::text(&row, "owner")?);
            gone.insert(id, D::text(&row, "content")?);
        }
    }
    // In the order asked.
    let asked: HashMap<&String, usize> = ids
        .iter()
        .enumerate()
        .map(|(at, id)| (id, at))
        .rev()
        .collect();
    lineage
        .removed
        .sort_by_key(|entry| asked.get(&entry.id).copied().unwrap_or(usize::MAX));
    let mut changed: BTreeMap<String, (ReceiptEntry, Vec<String>)> = BTreeMap::new();
    let mut frontier: Vec<String> = lineage.removed_ids();
    let owner_list: Vec<String> = owners.iter().cloned().collect();
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for chunk in frontier.chunks(PER_STATEMENT) {
            for candidate in derived_from::<D>(connection, chunk, &owner_list, active_only).await? {
                if gone.contains_key(&candidate.id) {
                    continue;
                }
                let sources = match changed.get(&candidate.id) {
                    Some((_, sources)) => sources.clone(),
                    None => candidate.sources.clone(),
                };
                let candidate = Candidate {
                    sources,
                    ..candidate
                };
                let derived = candidate.lineage();
                let lost: Vec<&String> =
                    derived.iter().filter(|id| gone.contains_key(*id)).collect();
                if lost.is_empty() {
                    continue;
                }
                let left: Vec<String> = derived
                    .iter()
                    .filter(|id| !gone.contains_key(*id))
                    .cloned()
                    .collect();
                let why = if candidate.kind == MemoryKind::Reflection {
                    Some("built_on_removed")
                } else if left.is_empty() {
                    Some("all_sources_forgotten")
                } else {
                    let left_texts = texts_of::<D>(connection, &left).await?;
                    let left_texts: Vec<&str> = left_texts.iter().map(String::as_str).collect();
                    let lost_texts = lost
                        .iter()
                        .filter_map(|id| gone.get(*id).map(String::as_str));
                    (left_texts.is_empty()
                        || !stands_without(&candidate.content, lost_texts, &left_texts))
                    .then_some("not_grounded_without_source")
                };
                let entry = |why: &str| {
                    ReceiptEntry::new(candidate.id.clone(), candidate.kind.as_str(), why)
                };
                match why {
                    Some(why) => {
                        changed.remove(&candidate.id);
                        lineage.removed.push(entry(why));
                        next.push(candidate.id.clone());
                        gone.insert(candidate.id.clone(), candidate.content.clone());
                    }
                    None => {
                        let (kept, lost_now): (Vec<String>, Vec<String>) = candidate
                            .sources
                            .iter()
                            .cloned()
                            .partition(|id| !gone.contains_key(id));
                        // What an earlier step of this trace took from it too.
                        let mut lost_sources = changed
                            .remove(&candidate.id)
                            .map(|(entry, _)| entry.lost_sources)
                            .unwrap_or_default();
                        lost_sources.extend(lost_now);
                        let entry = ReceiptEntry {
                            lost_sources,
                            ..entry("lost_sources")
                        };
                        changed.insert(candidate.id.clone(), (entry, kept));
                    }
                }
            }
        }
        frontier = next;
    }
    lineage.changed = changed.into_values().collect();
    let mut owners: Vec<String> = owners.into_iter().collect();
    owners.sort();
    lineage.owners = owners;
    Ok(lineage)
}

/// The facts and reflections of `owners` (`""`: no owner) whose provenance names one of `ids`
/// (the active ones only, with `active_only`). Only those two kinds are drawn from memories (an
/// episode's provenance is its event), and the owner and kind are the leading columns of
/// `idx_memories_user_kind`: the query reads the owners' facts and reflections, not the store.
async fn derived_from<D: Dialect>(
    connection: &mut D::Connection,
    ids: &[String],
    owners: &[String],
    active_only: bool,
) -> Result<Vec<Candidate>> {
    const DERIVED: &str = "m.kind IN ('fact', 'reflection')";
    if owners.is_empty() {
        return Ok(Vec::new());
    }
    let mut query = QueryBuilder::<D>::new(
        "SELECT m.id, m.kind, m.content, m.source_ids, m.attributes FROM memories m WHERE (",
    );
    // Each branch names the owner and the kinds, so that each is one range of the index (an
    // OR of "no owner" with a list of owners would read every owner's facts).
    let named: Vec<String> = owners
        .iter()
        .filter(|owner| !owner.is_empty())
        .cloned()
        .collect();
    if named.len() < owners.len() {
        query.push(format!("(m.user_id IS NULL AND {DERIVED})"));
        if !named.is_empty() {
            query.push(" OR ");
        }
    }
    if !named.is_empty() {
        query
            .push("(m.user_id IN ")
            .text_list(&named)
            .push(format!(" AND {DERIVED})"));
    }
    query.push(format!(
        ") AND EXISTS (SELECT 1 FROM {} WHERE value IN ",
        D::json_texts("m.source_ids")
    ));
    query.text_list(ids).push(")");
    if active_only {
        query.push(" AND m.valid_until IS NULL");
    }
    let mut found = Vec::new();
    for row in D::rows(connection, query).await? {
        let kind = D::text(&row, "kind")?;
        let attributes: Value =
            serde_json::from_str(&D::text(&row, "attributes")?).unwrap_or_default();
        found.push(Candidate {
            corrects: attributes
                .get("corrects")
                .and_then(Value::as_str)
                .map(str::to_owned),
            id: D::text(&row, "id")?,
            kind: MemoryKind::parse(&kind).unwrap_or(MemoryKind::Fact),
            content: D::text(&row, "content")?,
            sources: json_list(&D::text(&row, "source_ids")?, "source_ids")?,
        });
    }
    Ok(found)
}

/// The texts of the memories `ids` that exist.
async fn texts_of<D: Dialect>(
    connection: &mut D::Connection,
    ids: &[String],
) -> Result<Vec<String>> {
    let mut texts = Vec::new();
    for chunk in ids.chunks(PER_STATEMENT) {
        let mut query = QueryBuilder::<D>::new("SELECT content FROM memories WHERE ");
        D::push_one_of(&mut query, "id", chunk);
        for row in D::rows(connection, query).await? {
            texts.push(D::text(&row, "content")?);
        }
    }
    Ok(texts)
}

/// Writes each changed fact's provenance without the removed sources.
pub(crate) async fn write_changes<D: Dialect>(
    connection: &mut D::Connection,
    changed: &[(ReceiptEntry, Vec<String>)],
) -> Result<()> {
    for (entry, sources) in changed {
        let mut update = QueryBuilder::<D>::new("UPDATE memories SET source_ids = ");
        update
            .text(Value::from(sources.clone()).to_string())
            .push(" WHERE id = ")
            .text(entry.id.as_str());
        D::execute(connection, update).await?;
    }
    Ok(())
}

/// Counts what removing the memories `ids` takes from the indexes and caches shared by both
/// backends, read before the removal: entity links, sentence keys, queue entries and the
/// embedding cache's vectors of their texts.
pub(crate) async fn count_artefacts<D: Dialect>(
    connection: &mut D::Connection,
    ids: &[String],
) -> Result<BTreeMap<String, u64>> {
    let mut counts = BTreeMap::new();
    for (name, table) in [
        ("entity_links", "memory_entities"),
        ("sentence_keys", "memory_sentence_vectors"),
        ("index_queue_entries", "embedding_queue"),
    ] {
        let total = count_rows::<D>(connection, table, "memory_id", ids).await?;
        counts.insert(name.to_owned(), total);
    }
    let texts = texts_of::<D>(connection, ids).await?;
    let hashes: Vec<String> = texts.iter().flat_map(|text| cached_hashes(text)).collect();
    let cached = count_rows::<D>(connection, "embedding_cache", "content_hash", &hashes).await?;
    counts.insert("cached_vectors".to_owned(), cached);
    counts.insert("memory_rows".to_owned(), ids.len() as u64);
    counts.insert("full_text_entries".to_owned(), ids.len() as u64);
    Ok(counts)
}

/// How many rows of `table` have one of `values` in `column`.
async fn count_rows<D: Dialect>(
    connection: &mut D::Connection,
    table: &str,
    column: &str,
    values: &[String],
) -> Result<u64> {
    let mut total = 0;
    for chunk in values.chunks(PER_STATEMENT) {
        let mut query = QueryBuilder::<D>::new(format!("SELECT COUNT(*) AS n FROM {table} WHERE "));
        D::push_one_of(&mut query, column, chunk);
        if let Some(row) = D::rows(connection, query).await?.first() {
            total += u64::try_from(D::int(row, "n")?).unwrap_or(0);
        }
    }
    Ok(total)
}

/// The entities among `candidates` that no memory mentions any more, on `connection` after the
/// removal: they go too, as entries of the receipt; not a protected one, nor a person anchored
/// to an external id.
pub(crate) async fn remove_unmentioned_entities<D: Dialect>(
    connection: &mut D::Connection,
    candidates: &[String],
) -> Result<Vec<ReceiptEntry>> {
    let mut removed = Vec::new();
    for chunk in candidates.chunks(PER_STATEMENT) {
        let mut query = QueryBuilder::<D>::new("SELECT e.id FROM entities e WHERE ");
        D::push_one_of(&mut query, "e.id", chunk);
        // A protected entity, or a person anchored to an external id, was set up on purpose.
        query.push(
            " AND e.protected = 0 AND e.external_id IS NULL \
             AND NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)",
        );
        let ids = D::rows(connection, query)
            .await?
            .iter()
            .map(|row| D::text(row, "id"))
            .collect::<Result<Vec<_>>>()?;
        if ids.is_empty() {
            continue;
        }
        let mut delete = QueryBuilder::<D>::new("DELETE FROM entities WHERE ");
        D::push_one_of(&mut delete, "id", &ids);
        D::execute(connection, delete).await?;
        removed.extend(
            ids.into_iter()
                .map(|id| ReceiptEntry::new(id, "entity", "no_mentions_left")),
        );
    }
    Ok(removed)
}

/// The entities the memories `ids` mention, read before they are removed.
pub(crate) async fn entities_of<D: Dialect>(
    connection: &mut D::Connection,
    ids: &[String],
) -> Result<Vec<String>> {
    let mut entities = HashSet::new();
    for chunk in ids.chunks(PER_STATEMENT) {
        let mut query =
            QueryBuilder::<D>::new("SELECT DISTINCT entity_id FROM memory_entities WHERE ");
        D::push_one_of(&mut query, "memory_id", chunk);
        for row in D::rows(connection, query).await? {
            entities.insert(D::text(&row, "entity_id")?);
        }
    }
    let mut entities: Vec<String> = entities.into_iter().collect();
    entities.sort();
    Ok(entities)
}
