//! One suite of checks that both stores pass, written once: each check takes a store through
//! the storage traits ([`MemoryBackend`]), and looks at what was written with SQL both databases
//! read alike ([`SqlStore`]); [`Conformant`] adds the few test hooks that differ. The runner at
//! the end runs every check on a fresh SQLite file and on a fresh PostgreSQL database.
//! What only one backend does (FTS5's syntax, migrations of old files, the on-disk mirror,
//! PostgreSQL's leases and locks) is tested in `sqlite/tests` and `postgres/tests`.

mod entities;
mod indexing;
mod ingest;
pub(crate) mod lifecycle;
mod lineage;
mod people_anchors;
mod quarantine;
mod records;
mod sessions_and_people;
mod shared_runs;
mod trust;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use mnemo_ner_api::{EntityType, ExtractedEntity};
use sqlx::{Database, QueryBuilder};

#[cfg(feature = "postgres")]
use crate::store::postgres::PostgresStore;
use crate::store::rows::ts;
use crate::store::sql::{Bind, Driver, Run, SqlStore, WriteScope};
use crate::store::{MemoryBackend, MemoryStore, NewMemory};
use crate::types::MemoryKind;

/// A store the checks run on: every storage trait, the shared SQL's pool, and the test hooks
/// each database writes its own way.
#[async_trait]
pub(crate) trait Conformant: MemoryBackend + SqlStore {
    /// Makes the database refuse to store a memory whose content is `content`, with an error
    /// that says "refused by the test" (as a full disk or a constraint would refuse a write).
    async fn refuse_content(&self, content: &str);
}

#[async_trait]
impl Conformant for MemoryStore {
    async fn refuse_content(&self, content: &str) {
        let content = content.replace('\'', "''");
        execute(
            self,
            &format!(
                "CREATE TRIGGER refuse BEFORE INSERT ON memories WHEN NEW.content = '{content}' \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            ),
            None,
        )
        .await;
    }
}

#[cfg(feature = "postgres")]
#[async_trait]
impl Conformant for PostgresStore {
    async fn refuse_content(&self, content: &str) {
        let content = content.replace('\'', "''");
        execute(
            self,
            &format!(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN \
                 IF NEW.content = '{content}' THEN RAISE EXCEPTION 'refused by the test'; \
                 END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            ),
            None,
        )
        .await;
        execute(
            self,
            "CREATE TRIGGER refuse BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION refuse()",
            None,
        )
        .await;
    }
}

/// Second `second` of 2026-01-`day`.
pub(crate) fn at(day: u32, second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, day, 0, 0, second).unwrap()
}

/// A fact of `user`'s in session `s1`, stored at the start of 2026.
pub(crate) fn fact(user: &str, content: &str) -> NewMemory {
    NewMemory {
        kind: MemoryKind::Fact,
        content: content.into(),
        session_id: Some("s1".into()),
        user_id: Some(user.into()),
        chat_id: None,
        event_time: at(1, 0),
        created_at: at(1, 0),
        source_role: None,
        source_ids: Vec::new(),
        tags: Vec::new(),
        attributes: serde_json::Map::new(),
        decay_rate: 0.1,
        confidence: 1.0,
        memory_type: None,
        expires_at: None,
        shared: false,
        subject_ids: Vec::new(),
        quarantine: None,
        origin: crate::types::Origin::Told,
        valid_from: None,
    }
}

/// A turn `user` spoke in `session`.
pub(crate) fn turn(user: &str, session: &str, content: &str) -> NewMemory {
    NewMemory {
        kind: MemoryKind::Episode,
        session_id: Some(session.into()),
        source_role: Some("user".into()),
        origin: crate::types::Origin::User,
        ..fact(user, content)
    }
}

/// An entity as NER finds it.
pub(crate) fn entity(surface: &str, canonical: &str, entity_type: EntityType) -> ExtractedEntity {
    ExtractedEntity {
        surface: surface.into(),
        canonical: canonical.into(),
        entity_type,
        start: 0,
        end: surface.len(),
        confidence: 0.9,
        relation: None,
        provider: "test".into(),
    }
}

/// A person named `name`.
pub(crate) fn person(name: &str) -> ExtractedEntity {
    entity(name, name, EntityType::Person)
}

/// Person `name` where `text` names it, found for certain.
pub(crate) fn person_in(name: &str, text: &str) -> ExtractedEntity {
    let start = text.find(name).unwrap();
    ExtractedEntity {
        start,
        end: start + name.len(),
        confidence: 1.0,
        ..person(name)
    }
}

/// Soft-deletes an active memory and drops its vector, as corrections, decay and expiry retire
/// memories (the service retires none alone); false if it was not active.
pub(crate) async fn soft_delete<S: SqlStore>(store: &S, id: &str, at: DateTime<Utc>) -> bool {
    let mut tx = store.write(WriteScope::Store).await.unwrap();
    let mut update = QueryBuilder::<S::Db>::new("UPDATE memories SET valid_until = ");
    update
        .int(ts(at))
        .push(" WHERE id = ")
        .text(id)
        .push(" AND valid_until IS NULL");
    let changed = S::Db::execute(&mut tx, update).await.unwrap() == 1;
    let ids = [id.to_owned()];
    if changed {
        store.drop_vectors(&mut tx, &ids).await.unwrap();
    }
    tx.commit().await.unwrap();
    store.vectors_dropped(&ids);
    changed
}

/// A memory row, written with plain SQL; what a test does not set keeps its default.
#[derive(Clone)]
pub(crate) struct Row {
    pub(crate) id: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) content: &'static str,
    pub(crate) user: Option<&'static str>,
    pub(crate) chat: Option<&'static str>,
    pub(crate) session: Option<&'static str>,
    pub(crate) event_time: i64,
}

/// A fact of Ana's at second 1000.
pub(crate) fn row(id: &'static str, content: &'static str) -> Row {
    Row {
        id,
        kind: "fact",
        content,
        user: Some("ana"),
        chat: None,
        session: None,
        event_time: 1_000,
    }
}

/// Writes `row` into `memories`, with nothing else (no links, no place in the queue).
pub(crate) async fn insert_row<S: SqlStore>(store: &S, row: &Row) {
    let mut insert = QueryBuilder::<S::Db>::new(
        "INSERT INTO memories (id, kind, content, user_id, chat_id, session_id, event_time, \
         created_at) VALUES (",
    );
    insert
        .text(row.id)
        .push(", ")
        .text(row.kind)
        .push(", ")
        .text(row.content)
        .push(", ")
        .opt_text(row.user)
        .push(", ")
        .opt_text(row.chat)
        .push(", ")
        .opt_text(row.session)
        .push(", ")
        .int(row.event_time)
        .push(", ")
        .int(row.event_time)
        .push(")");
    let mut connection = store.pool().acquire().await.unwrap();
    S::Db::execute(&mut connection, insert).await.unwrap();
}

/// `sql`, then `bind` bound if given, as a query.
fn query<S: SqlStore>(sql: &str, bind: Option<&str>) -> QueryBuilder<S::Db> {
    let mut query = QueryBuilder::<S::Db>::new(sql);
    if let Some(bind) = bind {
        query.text(bind);
    }
    query
}

/// Runs the statement `sql` (then `bind`, if given).
pub(crate) async fn execute<S: SqlStore>(store: &S, sql: &str, bind: Option<&str>) {
    let mut connection = store.pool().acquire().await.unwrap();
    S::Db::execute(&mut connection, query::<S>(sql, bind))
        .await
        .unwrap();
}

/// The first row of the query `sql` (then `bind`, if given).
pub(crate) async fn first_row<S: SqlStore>(
    store: &S,
    sql: &str,
    bind: Option<&str>,
) -> <S::Db as Database>::Row {
    let mut rows = store.read(query::<S>(sql, bind)).await.unwrap();
    assert!(!rows.is_empty(), "no row for {sql}");
    rows.swap_remove(0)
}

/// The number in column `n` of the query `sql`'s first row.
pub(crate) async fn count<S: SqlStore>(store: &S, sql: &str) -> i64 {
    S::Db::int(&first_row(store, sql, None).await, "n").unwrap()
}

/// A memory's `entity_ids` as stored (a JSON list, sorted).
pub(crate) async fn entity_ids<S: SqlStore>(store: &S, memory_id: &str) -> String {
    let row = first_row(
        store,
        "SELECT entity_ids FROM memories WHERE id = ",
        Some(memory_id),
    )
    .await;
    S::Db::text(&row, "entity_ids").unwrap()
}

/// An entity's count of mentions.
pub(crate) async fn mention_count<S: SqlStore>(store: &S, entity_id: &str) -> i64 {
    let row = first_row(
        store,
        "SELECT mention_count FROM entities WHERE id = ",
        Some(entity_id),
    )
    .await;
    S::Db::int(&row, "mention_count").unwrap()
}

/// A fresh, empty database of one backend, on which a check opens stores: several, where it
/// checks what stores sharing a database (servers, or processes on one file) must not both do.
#[async_trait]
pub(crate) trait FreshDatabase: Send + Sync {
    /// The backend's store.
    type Store: Conformant + 'static;

    /// Opens another store on the database.
    async fn open(&self) -> Self::Store;
}

/// A fresh SQLite file in a temporary folder.
pub(crate) struct SqliteFile(tempfile::TempDir);

impl SqliteFile {
    /// A new folder; the file is made when the first store opens.
    pub(crate) fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }
}

#[async_trait]
impl FreshDatabase for SqliteFile {
    type Store = MemoryStore;

    async fn open(&self) -> MemoryStore {
        crate::store::sqlite::tests::open(&self.0.path().join("memory.db")).await
    }
}

/// A fresh database of the shared PostgreSQL test server (`mnemo-pg-fixture`).
#[cfg(feature = "postgres")]
pub(crate) struct PostgresDatabase(String);

#[cfg(feature = "postgres")]
impl PostgresDatabase {
    /// A new database.
    pub(crate) fn new() -> Self {
        Self(mnemo_pg_fixture::fresh_database())
    }
}

#[cfg(feature = "postgres")]
#[async_trait]
impl FreshDatabase for PostgresDatabase {
    type Store = PostgresStore;

    async fn open(&self) -> PostgresStore {
        crate::store::postgres::tests::open_at(&self.0).await
    }
}

/// A `#[tokio::test]` for each check on each backend: `on_sqlite::<check>` on a fresh SQLite
/// file, `on_postgres::<check>` on a fresh PostgreSQL database. A check listed under `stores`
/// takes one store; one under `databases` takes the [`FreshDatabase`] and opens its own.
macro_rules! on_both_backends {
    (
        stores: $($module:ident::$check:ident),* ;
        databases: $($db_module:ident::$db_check:ident),* $(;)?
    ) => {
        on_both_backends!(@backend on_sqlite, SqliteFile,
            [$($module::$check),*], [$($db_module::$db_check),*]);
        #[cfg(feature = "postgres")]
        on_both_backends!(@backend on_postgres, PostgresDatabase,
            [$($module::$check),*], [$($db_module::$db_check),*]);
    };
    (@backend $backend:ident, $database:ident,
        [$($module:ident::$check:ident),*], [$($db_module:ident::$db_check:ident),*]) => {
        mod $backend {
            use super::FreshDatabase as _;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let database = super::$database::new();
                    super::$module::$check(&database.open().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $db_check() {
                    super::$db_module::$db_check(&super::$database::new()).await;
                }
            )*
        }
    };
}

on_both_backends!(
    stores:
        ingest::insert_turn_stores_each_users_event_once,
        ingest::a_batch_of_turns_is_stored_whole_or_not_at_all,
        entities::entities_are_found_by_name_and_alias_whatever_the_case,
        entities::enrichment_adds_links_and_counts_failures,
        entities::a_new_entity_links_earlier_and_later_mentions,
        entities::entity_info_and_link_order,
        sessions_and_people::sessions_are_opened_closed_and_pending_again,
        sessions_and_people::turns_come_in_event_order,
        sessions_and_people::people_by_name_relation_and_rename,
        sessions_and_people::people_told_in_a_scope_are_the_users_own_there,
        people_anchors::people_are_anchored_by_external_id_per_owner,
        sessions_and_people::a_failed_turn_writes_nothing,
        records::get_load_and_rank_keys_with_session_neighbours,
        records::requests_filter_by_scope_kind_tags_time_and_state,
        records::touch_counts_an_access_and_brings_a_faded_fact_back,
        records::stats_count_active_memories_entities_and_the_queue,
        records::listings_page_newest_first,
        records::context_values_reflections_and_enrichment_candidates,
        lifecycle::decay_fades_and_spares_protected_facts,
        lifecycle::decay_soft_deletes_below_the_floor_and_drops_vectors,
        lifecycle::supersede_confirm_and_resolve_conflict_write_what_they_say,
        indexing::the_embedding_cache_round_trips_by_model,
        indexing::sentence_keys_live_and_go_with_their_turn,
        indexing::the_indexer_takes_owners_in_turn_newest_first,
        records::rank_keys_name_an_episodes_session,
        records::stats_count_only_the_users_own_queue,
        lifecycle::soft_delete_hides_a_row_from_every_list_but_keeps_it,
        sessions_and_people::a_new_session_reports_each_closed_session_once,
        quarantine::quarantine_is_stored_excluded_listed_and_released,
        trust::origins_are_kept_and_a_contest_waits_for_the_users_confirmation,
        lineage::forgetting_follows_lineage_and_leaves_a_receipt,
        lineage::restoring_a_soft_forget_undoes_what_it_took;
    databases:
        shared_runs::each_scheduled_run_is_claimed_once,
        shared_runs::one_store_at_a_time_leases_a_sessions_consolidation;
);
