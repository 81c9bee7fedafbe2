//! Linking a new entity to its earlier mentions through FTS5; the rest of linking and reading
//! entities is written once, in `store/sql/entities.rs`.

use sqlx::Sqlite;

use super::scope::owner_rows;
use crate::error::Result;
use crate::store::sql::{count_earlier_mentions, MAX_EARLIER_MENTIONS};

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
    count_earlier_mentions::<Sqlite>(connection, entity_id, linked).await
}
