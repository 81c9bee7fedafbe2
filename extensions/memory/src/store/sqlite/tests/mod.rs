//! Tests of the store on real SQLite files, moved in from the crate's integration tests when
//! the store became private to the crate; the helpers they share.

mod fts_properties;
mod fts_syntax;
mod index_merge;
mod migrations;
mod on_disk;
mod removal;
mod sentence_keys;

use std::time::Duration;

use crate::error::Result;
use crate::search::CorpusStats;
use crate::store::backend::*;
use crate::store::MemoryStore;
use crate::types::SearchRequest;

/// The vector index's own test vectors.
pub(super) use crate::vector_index::tests::pseudo as pseudo_vector;

/// The full-text candidate list as a search builds it, with statistics read afresh.
pub(super) trait FullTextSearch {
    async fn search_fts(&self, request: &SearchRequest, limit: usize)
        -> Result<Vec<(String, f64)>>;
}

impl FullTextSearch for MemoryStore {
    async fn search_fts(
        &self,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        crate::search::search_fts(self, &CorpusStats::default(), request, limit).await
    }
}

/// A store on the file at `path`, as the tests open it (every commit synced).
pub(crate) async fn open(path: &std::path::Path) -> MemoryStore {
    open_syncing(path, "full").await
}

/// As [`open`], with SQLite's `synchronous` at `synchronous`.
async fn open_syncing(path: &std::path::Path, synchronous: &str) -> MemoryStore {
    MemoryStore::open(
        path,
        &crate::store::StoreOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous: synchronous.into(),
            max_connections: 2,
            vector_oversample: 8,
            wal_truncate_frames: crate::store::DEFAULT_WAL_TRUNCATE_FRAMES,
        },
    )
    .await
    .unwrap()
}

/// A fact of Ana's.
pub(super) fn fact(content: &str) -> crate::store::NewMemory {
    crate::store::conformance::fact("ana", content)
}

/// As [`open`], syncing nothing: for tests that write many rows.
pub(super) async fn open_fast(path: &std::path::Path) -> MemoryStore {
    open_syncing(path, "off").await
}

pub(super) async fn index_all(store: &MemoryStore, dims: usize) {
    loop {
        let batch = store.next_index_batch(500).await.unwrap();
        if batch.is_empty() {
            break;
        }
        let items: Vec<_> = batch
            .into_iter()
            .map(|item| {
                let seed: u64 = item.content.rsplit(' ').next().unwrap().parse().unwrap();
                (item, Some(pseudo_vector(seed, dims)))
            })
            .collect();
        store.store_vectors(&items).await.unwrap();
    }
}
