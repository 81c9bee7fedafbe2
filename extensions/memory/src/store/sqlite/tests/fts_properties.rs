//! Property tests of the FTS5 query builder through the real store: whatever a user types, the
//! full-text search answers without an error, and hostile text around a word never stops that
//! word from being found.

use std::sync::OnceLock;

use chrono::{TimeZone, Utc};
use proptest::prelude::*;

use super::{fact, FullTextSearch};
use crate::store::backend::*;
use crate::store::{MemoryStore, NewMemory, StoreOptions};
use crate::types::SearchRequest;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    store: MemoryStore,
    _dir: tempfile::TempDir,
}

/// Words stored in one memory each, so that a query naming one must find it.
const WORDS: [&str; 4] = ["flamingo", "zeppelin", "quartz", "marmalade"];

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = runtime.block_on(async {
            let options = StoreOptions {
                busy_timeout: std::time::Duration::from_secs(5),
                synchronous: "normal".into(),
                max_connections: 2,
                vector_oversample: 8,
                wal_truncate_frames: crate::store::DEFAULT_WAL_TRUNCATE_FRAMES,
            };
            let store = MemoryStore::open(&dir.path().join("memory.db"), &options)
                .await
                .unwrap();
            for (index, word) in WORDS.iter().enumerate() {
                let at = Utc
                    .with_ymd_and_hms(2026, 1, 1, 0, index as u32, 0)
                    .unwrap();
                let memory = NewMemory {
                    content: format!("the note about {word} and the garden"),
                    event_time: at,
                    created_at: at,
                    decay_rate: 0.0,
                    ..fact("")
                };
                store.insert_memory(&memory, &[]).await.unwrap();
            }
            store
        });
        Fixture {
            runtime,
            store,
            _dir: dir,
        }
    })
}

fn search(query: &str) -> Result<Vec<String>, String> {
    let fixture = fixture();
    let request = SearchRequest {
        query: query.to_owned(),
        user_id: Some("ana".into()),
        limit: 10,
        ..SearchRequest::default()
    };
    fixture
        .runtime
        .block_on(fixture.store.search_fts(&request, 10))
        .map(|hits| hits.into_iter().map(|(id, _)| id).collect())
        .map_err(|error| error.to_string())
}

/// Text made of FTS5 syntax, quotes, control characters and any other character.
fn hostile_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        any::<char>().prop_map(String::from),
        prop::sample::select(vec![
            "\"", "\"\"", "'", "*", "(", ")", ":", "^", "-", "+", "{", "}", "\0", " ", "\n", "AND",
            "OR", "NOT", "NEAR", "NEAR(", "content:", "rowid", ";", "--", "é", "🦀",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_query_text_is_answered_without_an_error(query in hostile_text()) {
        let hits = search(&query);
        prop_assert!(hits.is_ok(), "{query:?}: {hits:?}");
        prop_assert!(hits.unwrap().len() <= 10);
    }

    #[test]
    fn hostile_text_around_a_word_still_finds_it(
        word in prop::sample::select(WORDS.to_vec()),
        after in hostile_text(),
    ) {
        let query = format!("{word} {after}");
        let hits = search(&query).map_err(TestCaseError::fail)?;
        prop_assert!(!hits.is_empty(), "{query:?} found nothing");
    }
}
