//! [`SearchSource`]: the store as search sees it, only the methods search calls. Every
//! [`MemoryBackend`] is one, by the implementation below, the one place that says so; the
//! search tests give a small in-memory store instead (`tests/fake.rs`).

use std::collections::HashMap;

use async_trait::async_trait;

use crate::error::Result;
use crate::store::{FirstPass, MemoryBackend, RankKey, TextScope, VectorStatus};
use crate::types::{EntityInfo, Memory, Person, SearchRequest};

/// Declares the trait with the methods listed (one plain, then the async ones), and implements
/// it for every backend by calling the backend's method of the same name: in
/// `impl … for T`, `self.name(…)` is the method of `T`'s bound, which comes before every
/// other trait's. So the list is written once.
macro_rules! search_source {
    (
        $(#[$trait_attr:meta])*
        $vis:vis trait $trait:ident;
        $(#[$plain_attr:meta])*
        fn $plain:ident(&self) -> $plain_ret:ty;
        $(
            $(#[$attr:meta])*
            async fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
        )*
    ) => {
        $(#[$trait_attr])*
        #[async_trait]
        $vis trait $trait: Send + Sync {
            $(#[$plain_attr])*
            fn $plain(&self) -> $plain_ret;
            $(
                $(#[$attr])*
                async fn $name(&self $(, $arg: $ty)*) -> $ret;
            )*
        }

        #[async_trait]
        impl<T: MemoryBackend + ?Sized> $trait for T {
            fn $plain(&self) -> $plain_ret {
                self.$plain()
            }
            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    self.$name($($arg),*).await
                }
            )*
        }
    };
}

search_source! {
    /// What a search reads of the store, and the vector index check before its first vector
    /// search. Each method is the storage trait's method of the same name, documented there
    /// (the parts of `MemoryBackend` named with each).
    pub(crate) trait SearchSource;

    /// The current vector status (`VectorIndex`).
    fn vector_status(&self) -> VectorStatus;

    /// Which of `ids` pass the request's filters, with what ranking needs (`SearchRecords`).
    async fn rank_keys(
        &self,
        ids: &[String],
        request: &SearchRequest,
        neighbours: bool,
    ) -> Result<HashMap<String, RankKey>>;

    /// Memories by id that pass the request's filters, keyed by id (`MemoryRecords`).
    async fn load_filtered(
        &self,
        ids: &[String],
        request: &SearchRequest,
    ) -> Result<HashMap<String, Memory>>;

    /// The full-text query's best matches, then the request's filters (`FullTextIndex`).
    async fn fts_best_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>>;

    /// A first pass's best matches, some matches with common words only left unranked
    /// (`FullTextIndex`).
    async fn fts_first_pass_matches(
        &self,
        pass: &FirstPass,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>>;

    /// Every match of the full-text query that passes the request's filters, ranked
    /// (`FullTextIndex`).
    async fn fts_all_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>>;

    /// Rows in the full-text index within `scope` (`FullTextIndex`).
    async fn fts_document_count(&self, scope: TextScope<'_>) -> Result<i64>;

    /// Memories within `scope` that match the full-text query (`FullTextIndex`).
    async fn fts_match_count(&self, query: &str, scope: TextScope<'_>) -> Result<i64>;

    /// Creates the vector index for the provider on first use, or checks it (`VectorIndex`).
    async fn ensure_vector_index(&self, dimensions: usize, model_id: &str) -> Result<VectorStatus>;

    /// Ids nearest to `vector`, best first, with their cosine similarity, after the request's
    /// filters; an error for a vector of another length than the index's (`VectorSearch`).
    async fn search_vector(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>>;

    /// Memories whose best sentence key is nearest to `vector` (`VectorSearch`).
    async fn search_sentences(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>>;

    /// The stored vectors of those of `ids` that have one (`VectorIndex`).
    async fn stored_vectors(&self, ids: &[String]) -> Result<HashMap<String, Vec<f32>>>;

    /// Entities of `owner` named one of `names` (`EntityReads`).
    async fn entities_named(&self, owner: Option<&str>, names: &[String]) -> Result<Vec<String>>;

    /// An entity by id, with at most `memory_limit` of its memories (`EntityReads`).
    async fn entity_info_by_id(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        id: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>>;

    /// How many memories each of `entity_ids` is linked to (`EntityReads`).
    async fn entity_link_counts(&self, entity_ids: &[String]) -> Result<HashMap<String, i64>>;

    /// Memories with a link to `owner`'s entities (`EntityReads`).
    async fn linked_memory_count(&self, owner: Option<&str>) -> Result<i64>;

    /// Co-mentions of entity `driver` with `others` among its newest links (`EntityLinks`).
    async fn co_mentions(
        &self,
        driver: &str,
        others: &[String],
        scan: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>>;

    /// The memories of an entity's `depth` newest links, newest first (`EntityLinks`).
    async fn newest_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>>;

    /// The owner's person with this relation (`PeopleRecords`).
    async fn person_by_relation(&self, owner: &str, relation: &str) -> Result<Option<Person>>;
}
