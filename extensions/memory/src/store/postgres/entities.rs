//! Linking a new entity to its earlier mentions through the text search index; the rest of
//! linking and reading entities is written once, in `store/sql/entities.rs`. Link order is
//! `memory_entities.position` (SQLite's rowid).

use sqlx::{Postgres, QueryBuilder};

use super::text_search::{tsquery, CONFIG};
use crate::error::Result;
use crate::store::sql::{count_earlier_mentions, MAX_EARLIER_MENTIONS};

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
    let nodes: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT numnode(to_tsquery('{CONFIG}', $1))"
    )))
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
    count_earlier_mentions::<Postgres>(connection, entity_id, linked).await
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
