//! Entities, for both backends: reading them ([`EntityReads`]: the owner's entities named so,
//! one entity with its memories, names by id and counts of links), linking a memory to the
//! entities it names ([`link_entities`], [`EntityLinks`]), and the co-mentions a search
//! follows. Of linking, each backend keeps matching a new entity's earlier mentions through its
//! own full-text index ([`SqlStore::link_earlier_mentions`]; [`count_earlier_mentions`] ends
//! it), and the newest links of an entity ([`SqlStore::newest_entity_links`]), which SQLite
//! reads packed.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;
use serde_json::Value;
use sqlx::{Database, QueryBuilder};

use super::records::push_newest;
use super::{push_scope, Bind, Dialect, Driver, Run, SqlStore, WriteScope};
use crate::error::{MemoryError, Result};
use crate::store::backend::{EntityLinks, EntityReads};
use crate::store::counts::linked_memory_count;
use crate::store::rows::{json_list, new_id, ts, MEMORY_COLUMNS};
use crate::types::EntityInfo;

#[async_trait]
impl<S: SqlStore> EntityReads for S {
    async fn entities_named(&self, owner: Option<&str>, names: &[String]) -> Result<Vec<String>> {
        let names: Vec<String> = names
            .iter()
            .map(|name| name.trim().to_lowercase())
            .filter(|name| !name.is_empty())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut builder = QueryBuilder::<S::Db>::new("SELECT e.id FROM entities e WHERE (");
        S::Db::push_one_of(&mut builder, "lower(e.canonical_name)", &names);
        builder.push(format!(
            " OR EXISTS (SELECT 1 FROM {} WHERE ",
            S::Db::json_texts("e.aliases")
        ));
        S::Db::push_one_of(&mut builder, "lower(value)", &names);
        builder.push("))");
        if let Some(owner) = owner {
            builder.push(" AND e.owner_id = ").text(owner);
        }
        self.read(builder)
            .await?
            .iter()
            .map(|row| S::Db::text(row, "id"))
            .collect()
    }

    async fn entity_info(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        name: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>> {
        let ids = self.entities_named(owner, &[name.to_owned()]).await?;
        let Some(id) = ids.first() else {
            return Ok(None);
        };
        self.entity_info_by_id(owner, chat_id, id, memory_limit)
            .await
    }

    async fn entity_info_by_id(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        id: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>> {
        let mut query = QueryBuilder::<S::Db>::new(
            "SELECT id, canonical_name, type, aliases, mention_count, summary FROM entities \
             WHERE id = ",
        );
        query.text(id);
        if let Some(owner) = owner {
            query.push(" AND owner_id = ").text(owner);
        }
        let rows = self.read(query).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        // Asked for none: the entity alone, without reading its links.
        let memories = if memory_limit == 0 {
            Vec::new()
        } else {
            let mut builder = QueryBuilder::<S::Db>::new(format!(
                "SELECT {MEMORY_COLUMNS} FROM memory_entities me {} memories m \
                 ON m.id = me.memory_id WHERE me.entity_id = ",
                S::Db::JOIN_IN_ORDER
            ));
            builder
                .text(id)
                .push(" AND m.valid_until IS NULL AND m.superseded_at IS NULL");
            push_scope(&mut builder, owner, chat_id);
            push_newest(&mut builder, memory_limit);
            self.fetch_memories(builder).await?
        };
        Ok(Some(EntityInfo {
            id: S::Db::text(row, "id")?,
            name: S::Db::text(row, "canonical_name")?,
            entity_type: S::Db::text(row, "type")?,
            aliases: json_list(&S::Db::text(row, "aliases")?, "aliases")?,
            mention_count: S::Db::int(row, "mention_count")?,
            summary: S::Db::opt_text(row, "summary")?,
            memories,
        }))
    }

    async fn entity_names(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut query =
            QueryBuilder::<S::Db>::new("SELECT id, canonical_name FROM entities WHERE ");
        S::Db::push_one_of(&mut query, "id", ids);
        self.read(query)
            .await?
            .iter()
            .map(|row| Ok((S::Db::text(row, "id")?, S::Db::text(row, "canonical_name")?)))
            .collect()
    }

    async fn entity_link_counts(&self, entity_ids: &[String]) -> Result<HashMap<String, i64>> {
        let mut query = QueryBuilder::<S::Db>::new(
            "SELECT entity_id, COUNT(*) AS n FROM memory_entities WHERE ",
        );
        S::Db::push_one_of(&mut query, "entity_id", entity_ids);
        query.push(" GROUP BY entity_id");
        self.read(query)
            .await?
            .iter()
            .map(|row| Ok((S::Db::text(row, "entity_id")?, S::Db::int(row, "n")?)))
            .collect()
    }

    async fn linked_memory_count(&self, owner: Option<&str>) -> Result<i64> {
        match self.read(linked_memory_count(owner)).await?.first() {
            Some(row) => S::Db::int(row, "n"),
            None => Ok(0),
        }
    }
}

#[async_trait]
impl<S: SqlStore> EntityLinks for S {
    /// Under the owner's write lock: a memory's owner never changes, so it is read to take the
    /// lock, then again under it in case the memory was removed meanwhile.
    async fn add_entities(
        &self,
        memory_id: &str,
        entities: &[ExtractedEntity],
        enriched_at: Option<DateTime<Utc>>,
    ) -> Result<usize> {
        let not_found = || MemoryError::NotFound(format!("no memory `{memory_id}`"));
        let owner = pooled_owner(self, memory_id).await?.ok_or_else(not_found)?;
        let mut tx = self.write(WriteScope::Owner(&owner)).await?;
        memory_owner::<S::Db>(&mut tx, memory_id)
            .await?
            .ok_or_else(not_found)?;
        let count = link_entities::<S>(&mut tx, memory_id, &owner, entities, None).await?;
        if let Some(at) = enriched_at {
            let (set, end) = S::Db::set_attribute("enriched_at");
            let mut update =
                QueryBuilder::<S::Db>::new(format!("UPDATE memories SET attributes = {set}"));
            update
                .int(ts(at))
                .push(format!("{end} WHERE id = "))
                .text(memory_id);
            S::Db::execute(&mut tx, update).await?;
        }
        tx.commit().await?;
        Ok(count)
    }

    /// Under the owner's write lock; a memory that does not exist is left alone.
    async fn record_enrichment_failure(&self, memory_id: &str) -> Result<()> {
        let Some(owner) = pooled_owner(self, memory_id).await? else {
            return Ok(());
        };
        let mut tx = self.write(WriteScope::Owner(&owner)).await?;
        let (set, end) = S::Db::set_attribute("enrichment_attempts");
        let mut update = QueryBuilder::<S::Db>::new(format!(
            "UPDATE memories SET attributes = {set}COALESCE({}, 0) + 1{end} WHERE id = ",
            S::Db::json_number("attributes", "enrichment_attempts")
        ));
        update.text(memory_id);
        S::Db::execute(&mut tx, update).await?;
        tx.commit().await
    }

    async fn co_mentions(
        &self,
        driver: &str,
        others: &[String],
        scan: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        let order = S::Db::LINK_ORDER;
        let mut query = QueryBuilder::<S::Db>::new(format!(
            "SELECT a.memory_id, a.{order} AS link, 1 + (SELECT COUNT(*) FROM memory_entities b \
             WHERE b.memory_id = a.memory_id AND "
        ));
        S::Db::push_one_of(&mut query, "b.entity_id", others);
        query
            .push(") AS mentions FROM memory_entities a WHERE a.entity_id = ")
            .text(driver)
            .push(format!(
                " AND a.{order} >= COALESCE((SELECT {order} FROM memory_entities \
                 WHERE entity_id = "
            ))
            .text(driver)
            // SQLite reads a negative OFFSET as 0; PostgreSQL refuses it.
            .push(format!(" ORDER BY {order} DESC LIMIT 1 OFFSET "))
            .int(scan.saturating_sub(1).max(0))
            .push(
                "), 0) AND EXISTS (SELECT 1 FROM memory_entities c \
                 WHERE c.memory_id = a.memory_id AND ",
            );
        S::Db::push_one_of(&mut query, "c.entity_id", others);
        query
            .push(format!(") ORDER BY a.{order} DESC LIMIT "))
            .count(limit);
        self.read(query)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    S::Db::text(row, "memory_id")?,
                    S::Db::int(row, "link")?,
                    S::Db::int(row, "mentions")?,
                ))
            })
            .collect()
    }

    async fn newest_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>> {
        self.newest_entity_links(entity_id, depth).await
    }
}

/// The owner of memory `memory_id` ('' for nobody's), `None` if there is no such memory, read
/// on `connection`.
async fn memory_owner<D: Dialect>(
    connection: &mut D::Connection,
    memory_id: &str,
) -> Result<Option<String>> {
    let mut query = QueryBuilder::<D>::new("SELECT user_id FROM memories WHERE id = ");
    query.text(memory_id);
    match D::rows(connection, query).await?.first() {
        Some(row) => Ok(Some(D::opt_text(row, "user_id")?.unwrap_or_default())),
        None => Ok(None),
    }
}

/// [`memory_owner`], read on a pooled connection, given back before the caller writes.
async fn pooled_owner<S: SqlStore>(store: &S, memory_id: &str) -> Result<Option<String>> {
    let mut connection = store.pool().acquire().await?;
    memory_owner::<S::Db>(&mut connection, memory_id).await
}

/// The owner's entity of `entity_type` named `name` (canonical name or alias, ASCII letters
/// without case), as its id and its aliases (JSON), on `connection` inside the caller's
/// transaction.
async fn find_entity<D: Dialect>(
    connection: &mut D::Connection,
    owner: &str,
    entity_type: &str,
    name: &str,
) -> Result<Option<(String, String)>> {
    let mut query = QueryBuilder::<D>::new("SELECT id, aliases FROM entities WHERE owner_id = ");
    query
        .text(owner)
        .push(" AND type = ")
        .text(entity_type)
        .push(" AND (");
    D::push_same_name(&mut query, "canonical_name", name);
    query.push(format!(
        " OR EXISTS (SELECT 1 FROM {} WHERE ",
        D::json_texts("aliases")
    ));
    D::push_same_name(&mut query, "value", name);
    query.push("))");
    D::push_canonical_first(&mut query, name);
    query.push(" LIMIT 1");
    match D::rows(connection, query).await?.first() {
        Some(row) => Ok(Some((D::text(row, "id")?, D::text(row, "aliases")?))),
        None => Ok(None),
    }
}

/// Ends linking entity `entity_id` to `linked` earlier mentions (see
/// [`SqlStore::link_earlier_mentions`]), on `connection` inside the caller's transaction:
/// counts them as its mentions, and writes the `entity_ids` of the memories linked to it.
pub(crate) async fn count_earlier_mentions<D: Dialect>(
    connection: &mut D::Connection,
    entity_id: &str,
    linked: u64,
) -> Result<()> {
    if linked == 0 {
        return Ok(());
    }
    let mut count = QueryBuilder::<D>::new("UPDATE entities SET mention_count = mention_count + ");
    count
        .int(i64::try_from(linked).unwrap_or(i64::MAX))
        .push(" WHERE id = ")
        .text(entity_id);
    D::execute(connection, count).await?;
    let mut ids = QueryBuilder::<D>::new(format!(
        "UPDATE memories SET entity_ids = {} WHERE id IN \
         (SELECT memory_id FROM memory_entities WHERE entity_id = ",
        D::LINKED_ENTITY_IDS
    ));
    ids.text(entity_id).push(")");
    D::execute(connection, ids).await?;
    Ok(())
}

/// Entity types linked by name wherever they appear (not dates, e-mails or URLs).
const LINKABLE_TYPES: [&str; 4] = ["person", "organization", "location", "project"];

/// Most earlier memories linked to a newly created entity.
pub(crate) const MAX_EARLIER_MENTIONS: i64 = 500;

/// Writes the ids of the entities linked to memory `memory_id` into its `entity_ids`, sorted
/// byte by byte, on `connection` inside the caller's transaction; the memory's link count.
async fn write_entity_ids<D: Dialect>(
    connection: &mut D::Connection,
    memory_id: &str,
) -> Result<usize> {
    let mut query =
        QueryBuilder::<D>::new("SELECT entity_id FROM memory_entities WHERE memory_id = ");
    query
        .text(memory_id)
        .push(format!(" ORDER BY {}", D::byte_order("entity_id")));
    let linked = D::rows(connection, query)
        .await?
        .iter()
        .map(|row| D::text(row, "entity_id"))
        .collect::<Result<Vec<_>>>()?;
    let mut update = QueryBuilder::<D>::new("UPDATE memories SET entity_ids = ");
    update
        .text(Value::from(linked.clone()).to_string())
        .push(" WHERE id = ")
        .text(memory_id);
    D::execute(connection, update).await?;
    Ok(linked.len())
}

/// Finds or creates each of `entities` for `owner` and links it to memory `memory_id`, then
/// links the owner's known entities named in `text`, on `connection` inside the caller's
/// transaction (which holds the owner's write lock); the memory's link count.
pub(crate) async fn link_entities<S: SqlStore>(
    connection: &mut <S::Db as Database>::Connection,
    memory_id: &str,
    owner: &str,
    entities: &[ExtractedEntity],
    text: Option<&str>,
) -> Result<usize> {
    for entity in entities {
        let canonical = entity.canonical.trim();
        if canonical.is_empty() {
            continue;
        }
        let entity_type = entity.entity_type.as_str();
        let entity_id =
            match find_entity::<S::Db>(connection, owner, entity_type, canonical).await? {
                Some(found) => mention_found::<S::Db>(connection, found, entity).await?,
                None => create_entity::<S>(connection, owner, entity).await?,
            };
        link::<S::Db>(connection, memory_id, &entity_id).await?;
    }
    if let Some(text) = text {
        link_known_entities::<S::Db>(connection, memory_id, owner, text).await?;
    }
    write_entity_ids::<S::Db>(connection, memory_id).await
}

/// Creates `entity` for `owner` and links its earlier mentions; its id. Created with
/// `ON CONFLICT DO NOTHING` on the `(owner, lower(name), type)` index: a writer that does not
/// hold this owner's lock (PostgreSQL's other instances) may have created it meanwhile, and it
/// then counts one more mention of that one.
async fn create_entity<S: SqlStore>(
    connection: &mut <S::Db as Database>::Connection,
    owner: &str,
    entity: &ExtractedEntity,
) -> Result<String> {
    let canonical = entity.canonical.trim();
    let entity_type = entity.entity_type.as_str();
    let id = new_id("ent");
    let surface = entity.surface.trim();
    let aliases: Vec<&str> = if surface.eq_ignore_ascii_case(canonical) {
        Vec::new()
    } else {
        vec![surface]
    };
    let mut insert = QueryBuilder::<S::Db>::new(
        "INSERT INTO entities (id, owner_id, canonical_name, type, aliases, relation) VALUES (",
    );
    insert
        .text(&id)
        .push(", ")
        .text(owner)
        .push(", ")
        .text(canonical)
        .push(", ")
        .text(entity_type)
        .push(", ")
        .text(Value::from(aliases).to_string())
        .push(", ")
        .opt_text(entity.relation.clone())
        .push(") ON CONFLICT DO NOTHING");
    if S::Db::execute(connection, insert).await? == 1 {
        if LINKABLE_TYPES.contains(&entity_type) {
            S::link_earlier_mentions(connection, &id, owner, canonical).await?;
        }
        return Ok(id);
    }
    let found = find_entity::<S::Db>(connection, owner, entity_type, canonical)
        .await?
        .ok_or_else(|| {
            MemoryError::NotFound(format!(
                "entity `{canonical}` ({entity_type}) vanished while linking"
            ))
        })?;
    mention_found::<S::Db>(connection, found, entity).await
}

/// Counts one more mention of a found entity (its id and its aliases as JSON): its surface
/// form becomes an alias unless it is the name or an alias already, and it gets the relation
/// if it had none; its id.
async fn mention_found<D: Dialect>(
    connection: &mut D::Connection,
    (id, aliases): (String, String),
    entity: &ExtractedEntity,
) -> Result<String> {
    let canonical = entity.canonical.trim();
    let mut aliases = json_list(&aliases, "aliases")?;
    let surface = entity.surface.trim();
    if !surface.eq_ignore_ascii_case(canonical)
        && !aliases
            .iter()
            .any(|alias| alias.eq_ignore_ascii_case(surface))
    {
        aliases.push(surface.to_owned());
    }
    let mut update =
        QueryBuilder::<D>::new("UPDATE entities SET mention_count = mention_count + 1, aliases = ");
    update
        .text(Value::from(aliases).to_string())
        .push(", relation = COALESCE(relation, ")
        .opt_text(entity.relation.clone())
        .push(") WHERE id = ")
        .text(&id);
    D::execute(connection, update).await?;
    Ok(id)
}

/// Links memory `memory_id` to entity `entity_id` unless it is already; whether it was not.
async fn link<D: Dialect>(
    connection: &mut D::Connection,
    memory_id: &str,
    entity_id: &str,
) -> Result<bool> {
    let mut insert =
        QueryBuilder::<D>::new("INSERT INTO memory_entities (memory_id, entity_id) VALUES (");
    insert
        .text(memory_id)
        .push(", ")
        .text(entity_id)
        .push(") ON CONFLICT DO NOTHING");
    Ok(D::execute(connection, insert).await? == 1)
}

/// Links entities the owner already has (people, organisations, places, projects) whose name or
/// alias appears in `text` as a whole word sequence, even where NER missed it ("Sarah is
/// vegetarian", at the start of a sentence).
async fn link_known_entities<D: Dialect>(
    connection: &mut D::Connection,
    memory_id: &str,
    owner: &str,
    text: &str,
) -> Result<()> {
    let mentions = crate::text::mentions(text);
    if mentions.is_empty() {
        return Ok(());
    }
    let types = LINKABLE_TYPES.map(str::to_owned);
    let mut query = QueryBuilder::<D>::new("SELECT e.id FROM entities e WHERE ");
    D::push_one_of(&mut query, "e.type", &types);
    query.push(" AND e.owner_id = ").text(owner).push(" AND (");
    D::push_one_of(&mut query, "lower(e.canonical_name)", &mentions);
    query.push(format!(
        " OR EXISTS (SELECT 1 FROM {} WHERE ",
        D::json_texts("e.aliases")
    ));
    D::push_one_of(&mut query, "lower(value)", &mentions);
    query.push("))");
    let known = D::rows(connection, query)
        .await?
        .iter()
        .map(|row| D::text(row, "id"))
        .collect::<Result<Vec<_>>>()?;
    for entity_id in known {
        if link::<D>(connection, memory_id, &entity_id).await? {
            let mut count = QueryBuilder::<D>::new(
                "UPDATE entities SET mention_count = mention_count + 1 WHERE id = ",
            );
            count.text(entity_id);
            D::execute(connection, count).await?;
        }
    }
    Ok(())
}
