//! Entities: linking memories to the entities they name, finding entities by name, and
//! describing one with its memories.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use super::packed::{fetch_packed, packed_rows};
use super::scope::owner_rows;
use super::MemoryStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::EntityLinks;
use crate::store::rows::ts;
use crate::store::sql::{link_entities, MAX_EARLIER_MENTIONS};

#[async_trait]
impl EntityLinks for MemoryStore {
    async fn add_entities(
        &self,
        memory_id: &str,
        entities: &[ExtractedEntity],
        enriched_at: Option<DateTime<Utc>>,
    ) -> Result<usize> {
        let _write = self.write_lock.lock().await;
        let mut tx = self.begin_write().await?;
        let owner: Option<Option<String>> =
            sqlx::query_scalar("SELECT user_id FROM memories WHERE id = ?")
                .bind(memory_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(owner) = owner else {
            return Err(MemoryError::NotFound(format!("no memory `{memory_id}`")));
        };
        let owner = owner.unwrap_or_default();
        let count = link_entities::<Self>(&mut tx, memory_id, &owner, entities, None).await?;
        if let Some(at) = enriched_at {
            sqlx::query(
                "UPDATE memories SET attributes = json_set(attributes, '$.enriched_at', ?) WHERE id = ?",
            )
            .bind(ts(at))
            .bind(memory_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(count)
    }

    async fn record_enrichment_failure(&self, memory_id: &str) -> Result<()> {
        let _write = self.write_lock.lock().await;
        sqlx::query(
            "UPDATE memories SET attributes = json_set(attributes, '$.enrichment_attempts', \
             COALESCE(json_extract(attributes, '$.enrichment_attempts'), 0) + 1) WHERE id = ?",
        )
        .bind(memory_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn co_mentions(
        &self,
        driver: &str,
        others: &[String],
        scan: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        let push_others = |builder: &mut QueryBuilder<'_, Sqlite>| {
            let mut separated = builder.separated(", ");
            for other in others {
                separated.push_bind(other.clone());
            }
        };
        let mut builder = QueryBuilder::new(
            "SELECT a.memory_id, a.rowid, 1 + (SELECT COUNT(*) FROM memory_entities b \
             WHERE b.memory_id = a.memory_id AND b.entity_id IN (",
        );
        push_others(&mut builder);
        builder
            .push(")) FROM memory_entities a WHERE a.entity_id = ")
            .push_bind(driver.to_owned())
            .push(
                " AND a.rowid >= COALESCE((SELECT rowid FROM memory_entities \
                 WHERE entity_id = ",
            )
            .push_bind(driver.to_owned())
            .push(" ORDER BY rowid DESC LIMIT 1 OFFSET ")
            .push_bind(scan - 1)
            .push(
                "), 0) AND EXISTS (SELECT 1 FROM memory_entities c \
                 WHERE c.memory_id = a.memory_id AND c.entity_id IN (",
            );
        push_others(&mut builder);
        builder
            .push(")) ORDER BY a.rowid DESC LIMIT ")
            .push_bind(limit as i64);
        Ok(builder
            .build_query_as::<(String, i64, i64)>()
            .fetch_all(&self.pool)
            .await?)
    }

    async fn newest_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>> {
        // Packed (see `packed.rs`): the entity list reads up to a search's depth of links.
        let mut builder = QueryBuilder::new(format!(
            "SELECT {} FROM (SELECT memory_id, rowid AS link FROM memory_entities \
             WHERE entity_id = ",
            packed_rows("memory_id, link", "link DESC")
        ));
        builder
            .push_bind(entity_id.to_owned())
            .push(" ORDER BY rowid DESC LIMIT ")
            .push_bind(depth)
            .push(")");
        fetch_packed(builder, &self.pool).await
    }
}

/// The owner's entity of `entity_type` named `name` (canonical name or alias, ASCII letters
/// without case) with its aliases.
pub(super) async fn find_entity(
    connection: &mut SqliteConnection,
    owner: &str,
    entity_type: &str,
    name: &str,
) -> Result<Option<(String, String)>> {
    Ok(sqlx::query_as(
        "SELECT id, aliases FROM entities WHERE owner_id = ?1 AND type = ?2 AND \
         (canonical_name = ?3 COLLATE NOCASE OR EXISTS \
          (SELECT 1 FROM json_each(aliases) WHERE json_each.value = ?3 COLLATE NOCASE)) LIMIT 1",
    )
    .bind(owner)
    .bind(entity_type)
    .bind(name)
    .fetch_optional(connection)
    .await?)
}

/// Links a new entity to the owner's earlier active memories that mention its name as a phrase,
/// so that "Sarah is vegetarian", said before Sarah became an entity, is found through her.
pub(super) async fn link_earlier_mentions(
    connection: &mut sqlx::SqliteConnection,
    entity_id: &str,
    owner: &str,
    name: &str,
) -> Result<()> {
    let Some(words) = crate::text::name_words(name) else {
        return Ok(());
    };
    let phrase = format!("\"{}\"", words.join(" ").replace('"', "\"\""));
    // Matched within the owner's range of index rows ('' for memories without an owner, see
    // migration 0019) by the index itself.
    let linked = sqlx::query(concat!(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) \
         SELECT m.id, ?1 FROM memories_fts JOIN memories m ON m.fts_rowid = memories_fts.rowid \
         WHERE memories_fts MATCH ?2 AND memories_fts.rowid ",
        owner_rows!(3),
        " AND m.user_id IS ?4 AND m.valid_until IS NULL LIMIT ?5"
    ))
    .bind(entity_id)
    .bind(phrase)
    .bind(owner)
    .bind(if owner.is_empty() { None } else { Some(owner) })
    .bind(MAX_EARLIER_MENTIONS)
    .execute(&mut *connection)
    .await?
    .rows_affected();
    if linked > 0 {
        sqlx::query("UPDATE entities SET mention_count = mention_count + ? WHERE id = ?")
            .bind(linked as i64)
            .bind(entity_id)
            .execute(&mut *connection)
            .await?;
        sqlx::query(
            "UPDATE memories SET entity_ids = (SELECT json_group_array(entity_id) FROM \
             (SELECT entity_id FROM memory_entities WHERE memory_id = memories.id ORDER BY entity_id)) \
             WHERE id IN (SELECT memory_id FROM memory_entities WHERE entity_id = ?)",
        )
        .bind(entity_id)
        .execute(&mut *connection)
        .await?;
    }
    Ok(())
}
