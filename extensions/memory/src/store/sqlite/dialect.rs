//! SQLite's side of the SQL written once (`store/sql/`): its row orders, its writers' turn (one
//! at a time in the process, `BEGIN IMMEDIATE` across processes), and the hooks that reach its
//! own entity linking, packed link reads, vector tables and in-memory mirror.

use async_trait::async_trait;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection, SqlitePool};

use super::packed::{fetch_packed, packed_rows};
use super::MemoryStore;
use crate::error::Result;
use crate::store::sql::{Bind, Dialect, Driver, SqlStore, WriteScope, WriteTx};

impl Dialect for Sqlite {
    const STORED_ORDER: &'static str = "rowid";
    const VECTORS: &'static str = "vec_memories";
    const CLEAR_ENRICHMENT_ATTEMPTS: &'static str =
        "UPDATE memories SET attributes = json_remove(attributes, '$.enrichment_attempts') \
         WHERE json_extract(attributes, '$.enrichment_attempts') IS NOT NULL";
    const JOIN_IN_ORDER: &'static str = "CROSS JOIN";
    const OFF_INDEX: &'static str = "+";
    const ENRICHMENT_ATTEMPTS: &'static str =
        "COALESCE(json_extract(m.attributes, '$.enrichment_attempts'), 0)";
    const LINK_ORDER: &'static str = "rowid";
    const FULL_TEXT: &'static str = "FTS5";
    const LOCK_ROWS: &'static str = "";
    const GREATEST: &'static str = "MAX";
    const LINKED_ENTITY_IDS: &'static str = "(SELECT json_group_array(entity_id) FROM \
         (SELECT entity_id FROM memory_entities WHERE memory_id = memories.id ORDER BY entity_id))";

    fn byte_order(column: &str) -> String {
        column.to_owned()
    }

    fn name_order(column: &str) -> String {
        format!("{column} COLLATE NOCASE")
    }

    fn push_same_name(builder: &mut QueryBuilder<Self>, column: &str, name: &str) {
        builder.push(format!("{column} = "));
        Self::bind_text(builder, name.to_owned());
        builder.push(" COLLATE NOCASE");
    }

    fn set_attribute(key: &str) -> (String, &'static str) {
        (format!("json_set(attributes, '$.{key}', "), ")")
    }

    fn json_texts(column: &str) -> String {
        format!("json_each({column})")
    }

    fn json_field(column: &str, key: &str) -> String {
        format!("json_extract({column}, '$.{key}')")
    }

    fn push_one_of(builder: &mut QueryBuilder<Self>, column: &str, values: &[String]) {
        builder.push(format!("{column} IN ")).text_list(values);
    }

    fn push_tagged(builder: &mut QueryBuilder<Self>, tag: &str) {
        builder
            .push("EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value = ")
            .text(tag)
            .push(")");
    }

    /// The stored value and the wanted one read by the same `json_extract`, so that both come
    /// back as the same SQL value (text, number, or an object's or list's JSON text).
    fn push_attribute_equals(builder: &mut QueryBuilder<Self>, path: &str, entry: &str) {
        builder
            .push("json_extract(m.attributes, ")
            .text(path)
            .push(") = json_extract(")
            .text(entry)
            .push(", ")
            .text(path)
            .push(")");
    }
}

#[async_trait]
impl SqlStore for MemoryStore {
    type Db = Sqlite;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// One writer at a time whatever the scope: the process's lock, then `BEGIN IMMEDIATE`.
    async fn write(&self, _scope: WriteScope<'_>) -> Result<WriteTx<Sqlite>> {
        let turn = self.write_lock.clone().lock_owned().await;
        Ok(WriteTx::new(self.begin_write().await?, Some(turn)))
    }

    async fn access_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        Some(self.write_lock.clone().lock_owned().await)
    }

    /// Packed (see `packed.rs`): the entity list reads up to a search's depth of links.
    async fn newest_entity_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>> {
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

    async fn count_vectors(
        &self,
        connection: &mut SqliteConnection,
        ids: &[String],
    ) -> Result<u64> {
        if !self.vector_table_exists(connection).await? {
            return Ok(0);
        }
        let mut count = 0;
        for id in ids {
            let (found,): (i64,) =
                sqlx::query_as("SELECT COUNT(*) FROM vec_memories WHERE memory_id = ?")
                    .bind(id)
                    .fetch_one(&mut *connection)
                    .await?;
            count += u64::try_from(found).unwrap_or(0);
        }
        Ok(count)
    }

    async fn drop_vectors(&self, connection: &mut SqliteConnection, ids: &[String]) -> Result<()> {
        self.remove_vectors(connection, ids).await
    }

    fn vectors_dropped(&self, ids: &[String]) {
        self.forget_vectors(ids);
    }

    async fn erase_user_vectors(
        &self,
        connection: &mut SqliteConnection,
        user: &str,
        theirs: usize,
    ) -> Result<()> {
        if self.vector_table_exists(connection).await? {
            self.erase_vectors(connection, user, theirs).await?;
        }
        Ok(())
    }

    async fn begin_removal(&self, connection: &mut SqliteConnection, rows: usize) -> Result<()> {
        Ok(super::index_merge::begin_removal(connection, rows).await?)
    }

    async fn end_removal(
        &self,
        connection: &mut SqliteConnection,
        erased: Option<&str>,
        removed: bool,
    ) -> Result<Option<i64>> {
        super::removal::end_removal(self, connection, erased, removed).await
    }

    async fn removal_committed(&self, ids: &[String], generation: Option<i64>, _erased: bool) {
        self.forget_in_mirror(ids, generation);
    }

    async fn set_supersedes(
        connection: &mut SqliteConnection,
        id: &str,
        old_id: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE memories SET attributes = json_set(attributes, '$.supersedes', ?) WHERE id = ?",
        )
        .bind(old_id)
        .bind(id)
        .execute(connection)
        .await?;
        Ok(())
    }

    async fn link_earlier_mentions(
        connection: &mut SqliteConnection,
        entity_id: &str,
        owner: &str,
        name: &str,
    ) -> Result<()> {
        super::entities::link_earlier_mentions(connection, entity_id, owner, name).await
    }
}
