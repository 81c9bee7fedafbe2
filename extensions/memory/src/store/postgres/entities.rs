//! Entities: linking memories to the entities they name, finding entities by name, and
//! describing one with its memories. Link order is `memory_entities.position` (SQLite's rowid).
//! Linking itself is written once (`store/sql/entities.rs`); here are finding an entity by name
//! and linking a new entity's earlier mentions through the text search index.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;
use sqlx::{PgConnection, Postgres, QueryBuilder};

use super::text_search::{tsquery, CONFIG};
use super::PostgresStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::EntityLinks;
use crate::store::rows::ts;
use crate::store::sql::{link_entities, WriteScope, MAX_EARLIER_MENTIONS};

#[async_trait]
impl EntityLinks for PostgresStore {
    async fn add_entities(
        &self,
        memory_id: &str,
        entities: &[ExtractedEntity],
        enriched_at: Option<DateTime<Utc>>,
    ) -> Result<usize> {
        let not_found = || MemoryError::NotFound(format!("no memory `{memory_id}`"));
        // A memory's owner never changes: read it to take the owner's lock, then again under
        // the lock in case the memory was removed meanwhile.
        let owner = memory_owner(&self.pool, memory_id)
            .await?
            .ok_or_else(not_found)?;
        let mut tx = self.begin_write(WriteScope::Owner(&owner)).await?;
        memory_owner(&mut *tx, memory_id)
            .await?
            .ok_or_else(not_found)?;
        let count = link_entities::<Self>(&mut tx, memory_id, &owner, entities, None).await?;
        if let Some(at) = enriched_at {
            sqlx::query(
                "UPDATE memories SET attributes = \
                 jsonb_set(attributes::jsonb, '{enriched_at}', to_jsonb($1::bigint))::text \
                 WHERE id = $2",
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
        let Some(owner) = memory_owner(&self.pool, memory_id).await? else {
            return Ok(());
        };
        let mut tx = self.begin_write(WriteScope::Owner(&owner)).await?;
        sqlx::query(
            "UPDATE memories SET attributes = jsonb_set(attributes::jsonb, \
             '{enrichment_attempts}', to_jsonb(COALESCE(\
             (attributes::jsonb ->> 'enrichment_attempts')::numeric, 0) + 1))::text \
             WHERE id = $1",
        )
        .bind(memory_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn co_mentions(
        &self,
        driver: &str,
        others: &[String],
        scan: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        // SQLite reads a negative OFFSET as 0; PostgreSQL refuses it.
        Ok(sqlx::query_as(
            "SELECT a.memory_id, a.position, 1 + (SELECT COUNT(*) FROM memory_entities b \
             WHERE b.memory_id = a.memory_id AND b.entity_id = ANY($2)) \
             FROM memory_entities a WHERE a.entity_id = $1 \
             AND a.position >= COALESCE((SELECT position FROM memory_entities \
             WHERE entity_id = $1 ORDER BY position DESC LIMIT 1 OFFSET $3), 0) \
             AND EXISTS (SELECT 1 FROM memory_entities c \
             WHERE c.memory_id = a.memory_id AND c.entity_id = ANY($2)) \
             ORDER BY a.position DESC LIMIT $4",
        )
        .bind(driver)
        .bind(others)
        .bind((scan - 1).max(0))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn newest_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>> {
        // A negative depth is no limit, as in SQLite (LIMIT NULL is LIMIT ALL).
        Ok(sqlx::query_as(
            "SELECT memory_id, position FROM memory_entities WHERE entity_id = $1 \
             ORDER BY position DESC LIMIT $2",
        )
        .bind(entity_id)
        .bind((depth >= 0).then_some(depth))
        .fetch_all(&self.pool)
        .await?)
    }
}

/// The owner of a memory ('' for nobody's); `None` if there is no such memory.
async fn memory_owner(
    executor: impl sqlx::PgExecutor<'_>,
    memory_id: &str,
) -> Result<Option<String>> {
    let owner: Option<Option<String>> =
        sqlx::query_scalar("SELECT user_id FROM memories WHERE id = $1")
            .bind(memory_id)
            .fetch_optional(executor)
            .await?;
    Ok(owner.map(Option::unwrap_or_default))
}

/// The owner's entity of `entity_type` named `name` (canonical name or alias, case-insensitive)
/// with its aliases; a canonical match first.
pub(super) async fn find_entity(
    tx: &mut PgConnection,
    owner: &str,
    entity_type: &str,
    name: &str,
) -> Result<Option<(String, String)>> {
    Ok(sqlx::query_as(
        "SELECT id, aliases FROM entities WHERE owner_id = $1 AND type = $2 AND \
         (lower(canonical_name) = lower($3) OR EXISTS \
          (SELECT 1 FROM jsonb_array_elements_text(aliases::jsonb) alias \
           WHERE lower(alias) = lower($3))) \
         ORDER BY (lower(canonical_name) = lower($3)) DESC LIMIT 1",
    )
    .bind(owner)
    .bind(entity_type)
    .bind(name)
    .fetch_optional(&mut *tx)
    .await?)
}

/// Links a new entity to the owner's earlier active memories that mention its name as a phrase,
/// so that "Sarah is vegetarian", said before Sarah became an entity, is found through her.
pub(super) async fn link_earlier_mentions(
    connection: &mut sqlx::PgConnection,
    entity_id: &str,
    owner: &str,
    name: &str,
) -> Result<()> {
    let Some(words) = crate::text::name_words(name) else {
        return Ok(());
    };
    // The phrase as the search layer writes it for FTS5, then as a tsquery phrase.
    let phrase = format!("\"{}\"", words.join(" ").replace('"', "\"\""));
    let Some(query) = tsquery(&phrase) else {
        return Ok(());
    };
    // Where the text search parser leaves a word out of the phrase (mnemo_english drops no stop
    // word, but a word it cannot parse is dropped), the words are also matched in the text.
    let nodes: i32 = sqlx::query_scalar(&format!("SELECT numnode(to_tsquery('{CONFIG}', $1))"))
        .bind(&query)
        .fetch_one(&mut *connection)
        .await?;
    let every_word = 2 * words.len() as i32 - 1;
    let mut insert = QueryBuilder::<Postgres>::new(
        "INSERT INTO memory_entities (memory_id, entity_id) SELECT m.id, ",
    );
    insert
        .push_bind(entity_id.to_owned())
        .push(" FROM memories m WHERE m.valid_until IS NULL");
    // `=` and `IS NULL`, not `IS NOT DISTINCT FROM`, which no index serves: in a store of many
    // owners the owner's few rows are read through their index instead of every match of the
    // name in the text index.
    if owner.is_empty() {
        insert.push(" AND m.user_id IS NULL");
    } else {
        insert.push(" AND m.user_id = ").push_bind(owner.to_owned());
    }
    if nodes > 0 {
        insert
            .push(format!(" AND m.search_text @@ to_tsquery('{CONFIG}', "))
            .push_bind(query)
            .push(")");
    }
    if nodes < every_word {
        insert
            .push(" AND m.content ~* ")
            .push_bind(phrase_pattern(&words));
    }
    let linked = insert
        .push(" LIMIT ")
        .push_bind(MAX_EARLIER_MENTIONS)
        .push(" ON CONFLICT DO NOTHING")
        .build()
        .execute(&mut *connection)
        .await?
        .rows_affected();
    if linked > 0 {
        sqlx::query("UPDATE entities SET mention_count = mention_count + $1 WHERE id = $2")
            .bind(i64::try_from(linked).unwrap_or(i64::MAX))
            .bind(entity_id)
            .execute(&mut *connection)
            .await?;
        // Each memory's links as compact JSON sorted bytewise, as SQLite writes them.
        sqlx::query(
            "UPDATE memories SET entity_ids = COALESCE((SELECT '[' || \
             string_agg(to_json(l.entity_id)::text, ',' ORDER BY l.entity_id COLLATE \"C\") \
             || ']' FROM memory_entities l WHERE l.memory_id = memories.id), '[]') \
             WHERE id IN (SELECT memory_id FROM memory_entities WHERE entity_id = $1)",
        )
        .bind(entity_id)
        .execute(&mut *connection)
        .await?;
    }
    Ok(())
}

/// A regular expression (case-insensitive) finding `words` in a text as FTS5 finds their phrase,
/// stemming aside: in order, whole, with nothing but non-alphanumerics between them. The words
/// are letters and digits only, so nothing in them is regular-expression syntax.
fn phrase_pattern(words: &[String]) -> String {
    format!(
        "(^|[^[:alnum:]]){}([^[:alnum:]]|$)",
        words.join("[^[:alnum:]]+")
    )
}
