//! People: the person entities of an owner, by name or relation. Creating or changing a person
//! holds the owner's write lock, so that two instances adding the same person make one.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::Row;

use super::entities::link_earlier_mentions;
use super::open::WriteScope;
use super::PostgresStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::PeopleRecords;
use crate::store::rows::{json_list, new_id};
use crate::store::Person;

/// A person from a row holding [`PERSON_COLUMNS`].
pub(super) fn person_from_row(row: &PgRow) -> Result<Person> {
    let metadata: String = row.try_get("metadata")?;
    Ok(Person {
        id: row.try_get("id")?,
        owner: row.try_get("owner_id")?,
        name: row.try_get("canonical_name")?,
        relation: row.try_get("relation")?,
        aliases: json_list(&row.try_get::<String, _>("aliases")?, "aliases")?,
        metadata: serde_json::from_str(&metadata)
            .map_err(|err| MemoryError::Corrupt(format!("entity metadata: {err}")))?,
        external_id: row.try_get("external_id")?,
        provider: row.try_get("provider")?,
    })
}

/// The columns of `entities` that [`person_from_row`] reads.
pub(super) const PERSON_COLUMNS: &str =
    "id, owner_id, canonical_name, relation, aliases, metadata, external_id, provider";

/// The owner's person named `name` (canonical name or alias, case-insensitive), the most
/// mentioned first.
async fn find_person(
    executor: impl sqlx::PgExecutor<'_>,
    owner: &str,
    name: &str,
) -> Result<Option<Person>> {
    let row = sqlx::query(&format!(
        "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = $1 AND type = 'person' AND \
         (lower(canonical_name) = lower($2) OR EXISTS \
          (SELECT 1 FROM jsonb_array_elements_text(aliases::jsonb) alias \
           WHERE lower(alias) = lower($2))) \
         ORDER BY mention_count DESC LIMIT 1"
    ))
    .bind(owner)
    .bind(name.trim())
    .fetch_optional(executor)
    .await?;
    row.as_ref().map(person_from_row).transpose()
}

#[async_trait]
impl PeopleRecords for PostgresStore {
    async fn person_by_relation(&self, owner: &str, relation: &str) -> Result<Option<Person>> {
        let row = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = $1 AND type = 'person' \
             AND lower(relation) = lower($2) ORDER BY mention_count DESC LIMIT 1"
        ))
        .bind(owner)
        .bind(relation)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(person_from_row).transpose()
    }

    async fn person_by_name(&self, owner: &str, name: &str) -> Result<Option<Person>> {
        find_person(&self.pool, owner, name).await
    }

    async fn upsert_person(
        &self,
        owner: &str,
        name: &str,
        relation: Option<&str>,
    ) -> Result<Person> {
        // Found and created under the owner's lock: another instance adding the same person
        // waits, then finds it.
        let mut tx = self.begin_write(WriteScope::Owner(owner)).await?;
        if let Some(mut person) = find_person(&mut *tx, owner, name).await? {
            if let (Some(relation), None) = (relation, &person.relation) {
                sqlx::query("UPDATE entities SET relation = $1 WHERE id = $2")
                    .bind(relation)
                    .bind(&person.id)
                    .execute(&mut *tx)
                    .await?;
                person.relation = Some(relation.to_owned());
            }
            tx.commit().await?;
            return Ok(person);
        }
        let id = new_id("ent");
        let created = sqlx::query(
            "INSERT INTO entities (id, owner_id, canonical_name, type, relation) \
             VALUES ($1, $2, $3, 'person', $4) ON CONFLICT DO NOTHING",
        )
        .bind(&id)
        .bind(owner)
        .bind(name.trim())
        .bind(relation)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if created {
            link_earlier_mentions(&mut tx, &id, owner, name).await?;
        }
        tx.commit().await?;
        self.person_by_name(owner, name)
            .await?
            .ok_or_else(|| MemoryError::NotFound(format!("person `{name}` vanished")))
    }

    async fn rename_person(&self, person: &Person, name: &str) -> Result<()> {
        let mut aliases = person.aliases.clone();
        if !aliases
            .iter()
            .any(|alias| alias.eq_ignore_ascii_case(&person.name))
        {
            aliases.push(person.name.clone());
        }
        let mut tx = self.begin_write(WriteScope::Owner(&person.owner)).await?;
        sqlx::query("UPDATE entities SET canonical_name = $1, aliases = $2 WHERE id = $3")
            .bind(name.trim())
            .bind(Value::from(aliases).to_string())
            .bind(&person.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn known_people(&self, owner: &str) -> Result<Vec<Person>> {
        // SQLite orders by `canonical_name COLLATE NOCASE`: lowercase, then byte order.
        let rows = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = $1 AND type = 'person' \
             ORDER BY (relation IS NULL), lower(canonical_name) COLLATE \"C\""
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(person_from_row).collect()
    }
}
