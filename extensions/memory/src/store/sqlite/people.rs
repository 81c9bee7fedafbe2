//! People: the person entities of an owner, by name or relation.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

use super::entities::link_earlier_mentions;
use super::MemoryStore;
use crate::error::{MemoryError, Result};
use crate::store::backend::PeopleRecords;
use crate::store::rows::{json_list, new_id};
use crate::store::Person;

pub(super) fn person_from_row(row: &SqliteRow) -> Result<Person> {
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

pub(super) const PERSON_COLUMNS: &str =
    "id, owner_id, canonical_name, relation, aliases, metadata, external_id, provider";

#[async_trait]
impl PeopleRecords for MemoryStore {
    async fn person_by_relation(&self, owner: &str, relation: &str) -> Result<Option<Person>> {
        let row = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = ? AND type = 'person' \
             AND relation = ? COLLATE NOCASE ORDER BY mention_count DESC LIMIT 1"
        ))
        .bind(owner)
        .bind(relation)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(person_from_row).transpose()
    }

    async fn person_by_name(&self, owner: &str, name: &str) -> Result<Option<Person>> {
        let row = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = ?1 AND type = 'person' AND \
             (canonical_name = ?2 COLLATE NOCASE OR EXISTS \
              (SELECT 1 FROM json_each(aliases) WHERE json_each.value = ?2 COLLATE NOCASE)) \
             ORDER BY mention_count DESC LIMIT 1"
        ))
        .bind(owner)
        .bind(name.trim())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(person_from_row).transpose()
    }

    async fn upsert_person(
        &self,
        owner: &str,
        name: &str,
        relation: Option<&str>,
    ) -> Result<Person> {
        if let Some(mut person) = self.person_by_name(owner, name).await? {
            if let (Some(relation), None) = (relation, &person.relation) {
                let _write = self.write_lock.lock().await;
                sqlx::query("UPDATE entities SET relation = ? WHERE id = ?")
                    .bind(relation)
                    .bind(&person.id)
                    .execute(&self.pool)
                    .await?;
                person.relation = Some(relation.to_owned());
            }
            return Ok(person);
        }
        let id = new_id("ent");
        {
            let _write = self.write_lock.lock().await;
            let mut tx = self.begin_write().await?;
            sqlx::query(
                "INSERT INTO entities (id, owner_id, canonical_name, type, relation) VALUES (?, ?, ?, 'person', ?)",
            )
            .bind(&id)
            .bind(owner)
            .bind(name.trim())
            .bind(relation)
            .execute(&mut *tx)
            .await?;
            link_earlier_mentions(&mut tx, &id, owner, name).await?;
            tx.commit().await?;
        }
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
        let _write = self.write_lock.lock().await;
        sqlx::query("UPDATE entities SET canonical_name = ?, aliases = ? WHERE id = ?")
            .bind(name.trim())
            .bind(Value::from(aliases).to_string())
            .bind(&person.id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn known_people(&self, owner: &str) -> Result<Vec<Person>> {
        let rows = sqlx::query(&format!(
            "SELECT {PERSON_COLUMNS} FROM entities WHERE owner_id = ? AND type = 'person' \
             ORDER BY (relation IS NULL), canonical_name COLLATE NOCASE"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(person_from_row).collect()
    }
}
