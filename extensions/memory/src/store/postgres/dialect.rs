//! PostgreSQL's side of the SQL written once (`store/sql/`): its row order (`seq`),
//! byte-order collation, its writers' advisory locks by scope (`open.rs`), and the hooks that
//! reach its own entity linking, vector tables and lifecycle writes (`lifecycle.rs`).

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

    fn byte_order(column: &str) -> String {
        format!("{column} COLLATE \"C\"")
    }

    /// As SQLite's `COLLATE NOCASE`: lowercase, then byte order.
    fn name_order(column: &str) -> String {
        format!("lower({column}) COLLATE \"C\"")
    }

    fn push_same_name(builder: &mut QueryBuilder<'_, Self>, column: &str, name: &str) {
        builder.push(format!("lower({column}) = lower("));
        Self::bind_text(builder, name.to_owned());
        builder.push(")");
    }

    fn json_texts(column: &str) -> String {
        format!("jsonb_array_elements_text({column}::jsonb) AS texts(value)")
    }

    /// `->>` gives SQL NULL for a missing key and for JSON null alike, as SQLite's
    /// `json_extract` does.
    fn json_field(column: &str, key: &str) -> String {
        format!("({column}::jsonb ->> '{key}')")
    }

    fn push_one_of(builder: &mut QueryBuilder<'_, Self>, column: &str, values: &[String]) {
        builder
            .push(format!("{column} = ANY("))
            .push_bind(values.to_vec())
            .push(")");
    }

    fn push_tagged(builder: &mut QueryBuilder<'_, Self>, tag: &str) {
        builder
            .push("m.tags::jsonb @> jsonb_build_array(")
            .push_bind(tag.to_owned())
            .push("::text)");
    }

    /// JSON containment, which compares the value with its JSON type.
    fn push_attribute_equals(builder: &mut QueryBuilder<'_, Self>, _path: &str, entry: &str) {
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

    async fn find_entity(
        connection: &mut PgConnection,
        owner: &str,
        entity_type: &str,
        name: &str,
    ) -> Result<Option<(String, String)>> {
        super::entities::find_entity(connection, owner, entity_type, name).await
    }

    async fn drop_vectors(&self, connection: &mut PgConnection, ids: &[String]) -> Result<()> {
        super::vectors::drop_vectors(connection, ids).await
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
