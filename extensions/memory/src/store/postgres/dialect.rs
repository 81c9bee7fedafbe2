//! PostgreSQL's side of the SQL written once (`store/sql/`): its row orders (`seq`, `position`),
//! byte-order collation, its writers' advisory locks by scope (`open.rs`), and the hooks that
//! reach its own entity linking, vector tables, lifecycle writes (`lifecycle.rs`) and the
//! planner's statistics after an erasure.

use async_trait::async_trait;
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder};

use super::PostgresStore;
use crate::error::Result;
use crate::store::sql::{Decayed, Dialect, Driver, SqlStore, WriteScope, WriteTx};

impl Dialect for Postgres {
    const STORED_ORDER: &'static str = "seq";
    const VECTORS: &'static str = "memory_vectors";
    // `->>` is NULL both for a missing key and a JSON null, as SQLite's json_extract; the LIKE
    // spares parsing the attributes of every memory.
    const CLEAR_ENRICHMENT_ATTEMPTS: &'static str =
        "UPDATE memories SET attributes = (attributes::jsonb - 'enrichment_attempts')::text \
         WHERE attributes LIKE '%enrichment\\_attempts%' \
         AND (attributes::jsonb ->> 'enrichment_attempts') IS NOT NULL";
    const JOIN_IN_ORDER: &'static str = "JOIN";
    const OFF_INDEX: &'static str = "";
    // An attempt count that is not a number counts as none.
    const ENRICHMENT_ATTEMPTS: &'static str =
        "COALESCE(CASE WHEN jsonb_typeof(m.attributes::jsonb -> 'enrichment_attempts') \
         = 'number' THEN (m.attributes::jsonb ->> 'enrichment_attempts')::double precision \
         END, 0)";
    const LINK_ORDER: &'static str = "position";
    const FULL_TEXT: &'static str = "full text";
    const LOCK_ROWS: &'static str = " FOR UPDATE";
    const GREATEST: &'static str = "GREATEST";
    // Compact JSON sorted bytewise, as SQLite's `json_group_array` writes it.
    const LINKED_ENTITY_IDS: &'static str = "COALESCE((SELECT '[' || \
         string_agg(to_json(l.entity_id)::text, ',' ORDER BY l.entity_id COLLATE \"C\") \
         || ']' FROM memory_entities l WHERE l.memory_id = memories.id), '[]')";

    fn byte_order(column: &str) -> String {
        format!("{column} COLLATE \"C\"")
    }

    /// As SQLite's `COLLATE NOCASE`: lowercase, then byte order.
    fn name_order(column: &str) -> String {
        format!("lower({column}) COLLATE \"C\"")
    }

    fn push_same_name(builder: &mut QueryBuilder<Self>, column: &str, name: &str) {
        builder.push(format!("lower({column}) = lower("));
        Self::bind_text(builder, name.to_owned());
        builder.push(")");
    }

    fn set_attribute(key: &str) -> (String, &'static str) {
        (
            format!("jsonb_set(attributes::jsonb, '{{{key}}}', to_jsonb("),
            "))::text",
        )
    }

    fn json_number(column: &str, key: &str) -> String {
        format!("{}::numeric", Self::json_field(column, key))
    }

    /// A canonical match before an alias.
    fn push_canonical_first(builder: &mut QueryBuilder<Self>, name: &str) {
        builder.push(" ORDER BY (");
        Self::push_same_name(builder, "canonical_name", name);
        builder.push(") DESC");
    }

    fn json_texts(column: &str) -> String {
        format!("jsonb_array_elements_text({column}::jsonb) AS texts(value)")
    }

    /// `->>` gives SQL NULL for a missing key and for JSON null alike, as SQLite's
    /// `json_extract` does.
    fn json_field(column: &str, key: &str) -> String {
        format!("({column}::jsonb ->> '{key}')")
    }

    fn push_one_of(builder: &mut QueryBuilder<Self>, column: &str, values: &[String]) {
        builder
            .push(format!("{column} = ANY("))
            .push_bind(values.to_vec())
            .push(")");
    }

    fn push_tagged(builder: &mut QueryBuilder<Self>, tag: &str) {
        builder
            .push("m.tags::jsonb @> jsonb_build_array(")
            .push_bind(tag.to_owned())
            .push("::text)");
    }

    /// JSON containment, which compares the value with its JSON type.
    fn push_attribute_equals(builder: &mut QueryBuilder<Self>, _path: &str, entry: &str) {
        builder
            .push("m.attributes::jsonb @> CAST(")
            .push_bind(entry.to_owned())
            .push(" AS jsonb)");
    }
}

#[async_trait]
impl SqlStore for PostgresStore {
    type Db = Postgres;

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn write(&self, scope: WriteScope<'_>) -> Result<WriteTx<Postgres>> {
        Ok(WriteTx::new(self.begin_write(scope).await?, None))
    }

    /// A negative depth is no limit, as in SQLite (LIMIT NULL is LIMIT ALL).
    async fn newest_entity_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT memory_id, position FROM memory_entities WHERE entity_id = $1 \
             ORDER BY position DESC LIMIT $2",
        )
        .bind(entity_id)
        .bind((depth >= 0).then_some(depth))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn count_vectors(&self, connection: &mut PgConnection, ids: &[String]) -> Result<u64> {
        let (found,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM memory_vectors WHERE memory_id = ANY($1)")
                .bind(ids)
                .fetch_one(&mut *connection)
                .await?;
        Ok(u64::try_from(found).unwrap_or(0))
    }

    async fn drop_vectors(&self, connection: &mut PgConnection, ids: &[String]) -> Result<()> {
        super::vectors::drop_vectors(connection, ids).await
    }

    /// The vector rows carry their memory's owner; the memory ids catch any without.
    async fn erase_user_vectors(
        &self,
        connection: &mut PgConnection,
        user: &str,
        _theirs: usize,
    ) -> Result<()> {
        // The sentence keys under the user's name go with the rest of the erasure.
        for statement in [
            "DELETE FROM memory_vectors WHERE user_id = $1",
            "DELETE FROM memory_vectors WHERE memory_id IN (SELECT id FROM memories WHERE user_id = $1)",
            "DELETE FROM memory_sentence_vectors WHERE memory_id IN \
             (SELECT id FROM memories WHERE user_id = $1)",
        ] {
            sqlx::query(statement)
                .bind(user)
                .execute(&mut *connection)
                .await?;
        }
        Ok(())
    }

    /// The planner's statistics are samples of rows: they would keep an erased user's id and
    /// words (most common values, histograms) until autovacuum analyses the tables again. Taken
    /// again now, from what is left; the erasure stands whether or not this succeeds
    /// (autovacuum analyses the tables later), so a failure is only logged.
    async fn removal_committed(&self, _ids: &[String], _generation: Option<i64>, erased: bool) {
        if !erased {
            return;
        }
        let analysed = sqlx::query(
            "ANALYZE memories, entities, memory_entities, ingested_events, \
             sessions_consolidations, memory_vectors, memory_sentence_vectors, embedding_cache, \
             api_keys, chat_members",
        )
        .execute(&self.pool)
        .await;
        if let Err(error) = analysed {
            tracing::warn!(%error, "erased; the planner's statistics are refreshed by autovacuum");
        }
    }

    async fn set_supersedes(connection: &mut PgConnection, id: &str, old_id: &str) -> Result<()> {
        super::lifecycle::set_supersedes(connection, id, old_id).await
    }

    async fn write_decay(
        connection: &mut PgConnection,
        decayed: &[Decayed],
        now: i64,
    ) -> Result<()> {
        super::lifecycle::write_decay(connection, decayed, now).await
    }

    async fn link_earlier_mentions(
        connection: &mut PgConnection,
        entity_id: &str,
        owner: &str,
        name: &str,
    ) -> Result<()> {
        super::entities::link_earlier_mentions(connection, entity_id, owner, name).await
    }
}
