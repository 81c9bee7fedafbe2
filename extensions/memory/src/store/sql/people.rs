//! People, for both backends: the person entities of an owner, by name, relation or external id.
//! Creating or changing a person takes the owner's turn, and a person is looked for and created
//! (or anchored to an external id) in the same transaction, so that two writers adding the same
//! person make one, and one external id never anchors two of an owner's people.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::QueryBuilder;

use super::{push_scope, Bind, Dialect, Driver, Run, SqlStore, WriteScope};
use crate::error::{MemoryError, Result};
use crate::store::backend::PeopleRecords;
use crate::store::rows::{json_list, new_id};
use crate::store::Person;
use crate::types::{ExternalId, Origin};

/// The columns of `entities` that [`person`] reads.
const PERSON_COLUMNS: &str =
    "id, owner_id, canonical_name, relation, aliases, metadata, external_id, provider";

/// A person from a row holding [`PERSON_COLUMNS`].
fn person<D: Driver>(row: &D::Row) -> Result<Person> {
    let metadata = D::text(row, "metadata")?;
    Ok(Person {
        id: D::text(row, "id")?,
        owner: D::text(row, "owner_id")?,
        name: D::text(row, "canonical_name")?,
        relation: D::opt_text(row, "relation")?,
        aliases: json_list(&D::text(row, "aliases")?, "aliases")?,
        metadata: serde_json::from_str(&metadata)
            .map_err(|err| MemoryError::Corrupt(format!("entity metadata: {err}")))?,
        external_id: D::opt_text(row, "external_id")?,
        provider: D::opt_text(row, "provider")?,
    })
}

/// Selects the owner's persons; the caller appends its conditions and order.
fn people<D: Dialect>(owner: &str) -> QueryBuilder<D> {
    let mut query = QueryBuilder::<D>::new(format!(
        "SELECT {PERSON_COLUMNS} FROM entities WHERE type = 'person' AND owner_id = "
    ));
    query.text(owner);
    query
}

/// The owner's person named `name` (canonical name or alias, case-insensitive), the most
/// mentioned first.
fn person_named<D: Dialect>(owner: &str, name: &str) -> QueryBuilder<D> {
    let mut query = people::<D>(owner);
    query.push(" AND (");
    D::push_same_name(&mut query, "canonical_name", name.trim());
    query.push(format!(
        " OR EXISTS (SELECT 1 FROM {} WHERE ",
        D::json_texts("aliases")
    ));
    D::push_same_name(&mut query, "value", name.trim());
    query.push(")) ORDER BY mention_count DESC LIMIT 1");
    query
}

/// The owner's person that `external` anchors (the unique index `idx_entities_external`).
fn person_anchored<D: Dialect>(owner: &str, external: &ExternalId) -> QueryBuilder<D> {
    let mut query = people::<D>(owner);
    query
        .push(" AND provider = ")
        .text(&external.provider)
        .push(" AND external_id = ")
        .text(&external.external_id)
        .push(" LIMIT 1");
    query
}

/// The first row's person, if any.
fn first_person<D: Driver>(rows: &[D::Row]) -> Result<Option<Person>> {
    rows.first().map(person::<D>).transpose()
}

#[async_trait]
impl<S: SqlStore> PeopleRecords for S {
    async fn person_by_relation(&self, owner: &str, relation: &str) -> Result<Option<Person>> {
        let mut query = people::<S::Db>(owner);
        query.push(" AND ");
        S::Db::push_same_name(&mut query, "relation", relation);
        query.push(" ORDER BY mention_count DESC LIMIT 1");
        first_person::<S::Db>(&self.read(query).await?)
    }

    async fn person_by_name(&self, owner: &str, name: &str) -> Result<Option<Person>> {
        first_person::<S::Db>(&self.read(person_named(owner, name)).await?)
    }

    async fn upsert_person(
        &self,
        owner: &str,
        name: &str,
        relation: Option<&str>,
    ) -> Result<Person> {
        let mut tx = self.write(WriteScope::Owner(owner)).await?;
        let found = S::Db::rows(&mut tx, person_named(owner, name)).await?;
        if let Some(mut person) = first_person::<S::Db>(&found)? {
            if let (Some(relation), None) = (relation, &person.relation) {
                let mut update = QueryBuilder::<S::Db>::new("UPDATE entities SET relation = ");
                update.text(relation).push(" WHERE id = ").text(&person.id);
                S::Db::execute(&mut tx, update).await?;
                person.relation = Some(relation.to_owned());
            }
            tx.commit().await?;
            return Ok(person);
        }
        let id = new_id("ent");
        let mut insert = QueryBuilder::<S::Db>::new(
            "INSERT INTO entities (id, owner_id, canonical_name, type, relation) VALUES (",
        );
        insert
            .text(&id)
            .push(", ")
            .text(owner)
            .push(", ")
            .text(name.trim())
            .push(", 'person', ")
            .opt_text(relation)
            .push(") ON CONFLICT DO NOTHING");
        if S::Db::execute(&mut tx, insert).await? == 1 {
            S::link_earlier_mentions(&mut tx, &id, owner, name).await?;
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
        let mut tx = self.write(WriteScope::Owner(&person.owner)).await?;
        let mut update = QueryBuilder::<S::Db>::new("UPDATE entities SET canonical_name = ");
        update
            .text(name.trim())
            .push(", aliases = ")
            .text(Value::from(aliases).to_string())
            .push(" WHERE id = ")
            .text(&person.id);
        S::Db::execute(&mut tx, update).await?;
        tx.commit().await
    }

    async fn person_by_external_id(
        &self,
        owner: &str,
        external: &ExternalId,
    ) -> Result<Option<Person>> {
        first_person::<S::Db>(&self.read(person_anchored(owner, external)).await?)
    }

    async fn anchor_person(
        &self,
        owner: &str,
        person_id: &str,
        external: &ExternalId,
        called: Option<&str>,
    ) -> Result<Person> {
        // Dropped without a commit on a refusal: nothing is changed.
        let mut tx = self.write(WriteScope::Owner(owner)).await?;
        let mut query = people::<S::Db>(owner);
        query.push(" AND id = ").text(person_id);
        let Some(mut person) = first_person::<S::Db>(&S::Db::rows(&mut tx, query).await?)? else {
            return Err(MemoryError::NotFound(format!(
                "no person `{person_id}` among the people of `{owner}`"
            )));
        };
        let holder = S::Db::rows(&mut tx, person_anchored(owner, external)).await?;
        if let Some(holder) = first_person::<S::Db>(&holder)? {
            if holder.id != person.id {
                return Err(crate::people::already_anchors(external, &holder));
            }
        }
        match ExternalId::of(&person) {
            Some(carried) if carried != *external => {
                return Err(crate::people::carries_another(&person, &carried, external));
            }
            Some(_) => {}
            None => {
                let mut update = QueryBuilder::<S::Db>::new("UPDATE entities SET provider = ");
                update
                    .text(&external.provider)
                    .push(", external_id = ")
                    .text(&external.external_id)
                    .push(" WHERE id = ")
                    .text(&person.id);
                S::Db::execute(&mut tx, update).await?;
                person.provider = Some(external.provider.clone());
                person.external_id = Some(external.external_id.clone());
            }
        }
        let called = called.map(str::trim).filter(|called| {
            !called.is_empty()
                && !person.name.eq_ignore_ascii_case(called)
                && !person
                    .aliases
                    .iter()
                    .any(|alias| alias.eq_ignore_ascii_case(called))
        });
        if let Some(called) = called {
            person.aliases.push(called.to_owned());
            let mut update = QueryBuilder::<S::Db>::new("UPDATE entities SET aliases = ");
            update
                .text(Value::from(person.aliases.clone()).to_string())
                .push(" WHERE id = ")
                .text(&person.id);
            S::Db::execute(&mut tx, update).await?;
        }
        tx.commit().await?;
        Ok(person)
    }

    async fn known_people(&self, owner: &str) -> Result<Vec<Person>> {
        listed(self, people::<S::Db>(owner)).await
    }

    async fn people_told_in(&self, owner: &str, chat_id: Option<&str>) -> Result<Vec<Person>> {
        // `Memory::is_users_own_words` in SQL: not a model's words, not quarantined (the
        // assistant's turns are the agent's, a model's origin).
        let stated: Vec<String> = Origin::ALL
            .into_iter()
            .filter(|origin| !origin.is_model_made())
            .map(|origin| origin.as_str().to_owned())
            .collect();
        let mut query = people::<S::Db>(owner);
        query.push(
            " AND EXISTS (SELECT 1 FROM memory_entities l JOIN memories m ON m.id = l.memory_id \
             WHERE l.entity_id = entities.id AND m.valid_until IS NULL AND m.superseded_at IS NULL \
             AND m.quarantine IS NULL AND ",
        );
        S::Db::push_one_of(&mut query, "m.origin", &stated);
        push_scope(&mut query, Some(owner), chat_id);
        query.push(")");
        listed(self, query).await
    }
}

/// The people `query` selects, as a list shows them: those with a relation first, then by name.
async fn listed<S: SqlStore>(store: &S, mut query: QueryBuilder<S::Db>) -> Result<Vec<Person>> {
    query.push(format!(
        " ORDER BY (relation IS NULL), {}",
        S::Db::name_order("canonical_name")
    ));
    store
        .read(query)
        .await?
        .iter()
        .map(person::<S::Db>)
        .collect()
}
