//! Reading entities, for both backends ([`EntityReads`]): the owner's entities named so, one
//! entity with its memories, names by id and counts of links; and of linking, the memory's
//! sorted `entity_ids` and which types are linked by name. Linking entities itself, the
//! co-mentions and the newest links a search follows stay with each backend
//! (`store/*/entities.rs`): they take each database's own locks, row order and packed reads.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use serde_json::Value;
use sqlx::QueryBuilder;

use super::{push_scope, Bind, Dialect, Driver, SqlStore};
use crate::error::Result;
use crate::store::backend::EntityReads;
use crate::store::counts::linked_memory_count;
use crate::store::rows::{json_list, MEMORY_COLUMNS};
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
            builder
                .push(" ORDER BY m.event_time DESC LIMIT ")
                .count(memory_limit);
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

/// Entity types linked by name wherever they appear (not dates, e-mails or URLs).
pub(crate) const LINKABLE_TYPES: [&str; 4] = ["person", "organization", "location", "project"];

/// Most earlier memories linked to a newly created entity.
pub(crate) const MAX_EARLIER_MENTIONS: i64 = 500;

/// Writes the ids of the entities linked to memory `memory_id` into its `entity_ids`, sorted
/// byte by byte, on `connection` inside the caller's transaction; the memory's link count.
pub(crate) async fn write_entity_ids<D: Dialect>(
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
