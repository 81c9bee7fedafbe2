//! The storage traits for what search walks: the full-text index, the vector index and its
//! queue, and entity links.

use async_trait::async_trait;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use mnemo_ner_api::ExtractedEntity;

use super::MemoryRecords;
use crate::error::Result;
use crate::store::{FirstPass, IndexItem, MirrorSize, TextScope, VectorStatus};
use crate::types::{EntityInfo, SearchRequest};

/// Full-text queries: ranked matches of a full-text query (built by
/// [`crate::search::fts_query`]) and match counts.
#[async_trait]
pub(crate) trait FullTextIndex: Send + Sync {
    /// The FTS5 query's best matches (a few times `limit`), then the request's filters: ids
    /// best first, each with its BM25 relevance (FTS5's `bm25()` negated, so higher is better
    /// and every match is above 0).
    ///
    /// # Errors
    /// The database fails.
    async fn fts_best_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>>;

    /// A first pass's best matches, as [`Self::fts_best_matches`] gives them for
    /// `pass.query`, except that a backend may leave unranked a memory that has none of the
    /// rare words and is not among the `pass.newest_kept` last stored matches of `pass.common`
    /// (counted within the request's [`TextScope`], before its other filters): ranking costs about a
    /// microsecond a match, and common words that go together (a name of two words, a phrase
    /// said every day) can match most of a large store. The default ranks every match.
    ///
    /// # Errors
    /// The database fails.
    async fn fts_first_pass_matches(
        &self,
        pass: &FirstPass,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>> {
        self.fts_best_matches(&pass.query, request, limit).await
    }

    /// Every match of the FTS5 query that passes the request's filters, ranked: as
    /// [`Self::fts_best_matches`], but the filters join before ranking, so it costs what all
    /// the matches cost.
    ///
    /// # Errors
    /// The database fails.
    async fn fts_all_matches(
        &self,
        query: &str,
        request: &SearchRequest,
        limit: usize,
    ) -> Result<Vec<(String, f64)>>;

    /// Rows in the full-text index within `scope` (every row of its owner, and in a chat the
    /// chat's shared ones, whatever their state).
    ///
    /// # Errors
    /// The database fails.
    async fn fts_document_count(&self, scope: TextScope<'_>) -> Result<i64>;

    /// Memories within `scope` that match the FTS5 query.
    ///
    /// # Errors
    /// The database fails.
    async fn fts_match_count(&self, query: &str, scope: TextScope<'_>) -> Result<i64>;
}

/// Whether a vector search can run for the query `vector`, the same on every vector path of
/// both backends: `false` when the store's vector search is off; an error naming both lengths
/// when `vector` is not as long as the stored vectors (an embedding provider other than the
/// index's, which no search should hide as "nothing found").
///
/// # Errors
/// [`MemoryError::Invalid`](crate::error::MemoryError::Invalid) for a query vector of the wrong
/// length.
pub(crate) fn vector_search_ready(status: &VectorStatus, vector: &[f32]) -> Result<bool> {
    match status {
        VectorStatus::Disabled { .. } => Ok(false),
        VectorStatus::Enabled { dimensions, .. } if *dimensions == vector.len() => Ok(true),
        VectorStatus::Enabled { dimensions, .. } => {
            Err(crate::error::MemoryError::Invalid(format!(
                "a {}-dimension query vector for a {dimensions}-dimension vector index",
                vector.len()
            )))
        }
    }
}

/// The owner and the single kind a vector search can filter on inside its scan: the owner
/// unless the search is in a chat (where other users' shared memories qualify too, checked
/// after), the kind when the request asks for one.
pub(crate) fn vector_scope(request: &SearchRequest) -> (Option<&str>, Option<&str>) {
    let owner = match (&request.user_id, &request.chat_id) {
        (Some(user_id), None) => Some(user_id.as_str()),
        _ => None,
    };
    let kind = match request.kinds.as_slice() {
        [kind] => Some(kind.as_str()),
        _ => None,
    };
    (owner, kind)
}

/// The first `limit` of `nearest` (best first) at least `min_similarity` similar that pass
/// every filter of `request` (read with [`MemoryRecords::rank_keys`]).
///
/// # Errors
/// The database fails.
pub(crate) async fn within_request<S: MemoryRecords + ?Sized>(
    store: &S,
    nearest: Vec<(String, f32)>,
    request: &SearchRequest,
    limit: usize,
    min_similarity: f32,
) -> Result<Vec<(String, f32)>> {
    let nearest: Vec<(String, f32)> = nearest
        .into_iter()
        .filter(|(_, similarity)| *similarity >= min_similarity)
        .collect();
    let ids: Vec<String> = nearest.iter().map(|(id, _)| id.clone()).collect();
    let allowed = store.rank_keys(&ids, request, false).await?;
    Ok(nearest
        .into_iter()
        .filter(|(id, _)| allowed.contains_key(id))
        .take(limit)
        .collect())
}

/// The vector index: whether it matches the embedding provider, rebuilding it, and
/// nearest-neighbour search.
#[async_trait]
pub(crate) trait VectorIndex: Send + Sync {
    /// The current vector status.
    fn vector_status(&self) -> VectorStatus;

    /// Creates `vec_memories` for `dimensions` on first use, or checks that the existing table
    /// matches the provider. A mismatch turns vector search off; nothing is deleted.
    ///
    /// # Errors
    /// The database fails.
    async fn ensure_vector_index(&self, dimensions: usize, model_id: &str) -> Result<VectorStatus>;

    /// Rebuilds `vec_memories` for a new provider: drops the old vectors, creates the table for
    /// `dimensions`, records the provider, forgets the vectors cached for `model_id` (a rebuild
    /// re-embeds every text with the provider's settings now, such as the passages a long text
    /// is read in), and queues every active memory for the indexer, in one transaction.
    /// Memories themselves are untouched.
    ///
    /// # Errors
    /// The database fails; nothing changes then.
    async fn reset_vector_index(&self, dimensions: usize, model_id: &str) -> Result<u64>;

    /// Whether [`VectorSearch::search_vector`] reads the fast approximate index
    /// ([`Self::nearest_approximate`]) rather than searching exactly ([`Self::nearest_exact`]):
    /// SQLite's quantised mirror unless `vector_oversample` is 0, PostgreSQL's HNSW index unless
    /// `ef_search` is 0.
    fn approximate_search(&self) -> bool;

    /// Memories whose best sentence key is nearest to `vector`, best first, each at that
    /// sentence's cosine similarity, for [`VectorSearch::search_sentences`] to filter: a few
    /// times `limit` of them (`limit` is above 0 and `vector` as long as the stored vectors),
    /// filtered only by what the scan itself can (the owner, a single kind, in a chat the
    /// memories the asker may see).
    ///
    /// # Errors
    /// The database fails.
    async fn nearest_sentences(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
    ) -> Result<Vec<(String, f32)>>;

    /// The stored vectors of those of `ids` that have one, for shaping a query from its best
    /// matches and scoring candidates against it. The SQLite store reads its quantised mirror
    /// (each value within half a code step; the mirror is loaded first if it is not, as
    /// `search_vector` loads it), PostgreSQL `memory_vectors`.
    ///
    /// # Errors
    /// The database fails.
    async fn stored_vectors(&self, ids: &[String]) -> Result<HashMap<String, Vec<f32>>>;

    /// Rows and approximate heap bytes of the in-memory vector index, of memories and of
    /// sentence keys (loading it if needed).
    ///
    /// # Errors
    /// The database fails.
    async fn mirror_size(&self) -> Result<MirrorSize>;

    /// The `k` stored vectors nearest to `vector` (only `owner`'s, and only of `kind`, when
    /// given) with their cosine similarity, found exactly: what the approximate search is
    /// measured against.
    ///
    /// # Errors
    /// The database fails.
    async fn nearest_exact(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>>;

    /// As [`Self::nearest_exact`], from the fast approximate index that
    /// [`VectorSearch::search_vector`] uses (the SQLite store's quantised in-memory mirror).
    ///
    /// # Errors
    /// The database fails.
    async fn nearest_approximate(
        &self,
        vector: &[f32],
        owner: Option<&str>,
        kind: Option<&str>,
        k: usize,
    ) -> Result<Vec<(String, f32)>>;
}

/// Nearest-neighbour search over the memories' vectors and sentence keys, written once for every
/// store over its [`VectorIndex`] and [`MemoryRecords`].
#[async_trait]
pub(crate) trait VectorSearch: Send + Sync {
    /// Ids nearest to `vector`, best first, each with its cosine similarity, after the request's
    /// filters, leaving out neighbours whose cosine similarity is below `min_similarity`. Uses
    /// the approximate index when [`VectorIndex::approximate_search`] says so, else searches
    /// exactly.
    ///
    /// # Errors
    /// The database fails, or `vector` is not as long as the stored vectors.
    async fn search_vector(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>>;

    /// Memories whose best sentence key is nearest to `vector`, best first, each with that
    /// sentence's cosine similarity, after the request's filters, leaving out those below
    /// `min_similarity` (see `crate::sentence_keys`).
    ///
    /// # Errors
    /// The database fails, or `vector` is not as long as the stored vectors.
    async fn search_sentences(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>>;
}

#[async_trait]
impl<S: VectorIndex + MemoryRecords + ?Sized> VectorSearch for S {
    async fn search_vector(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>> {
        if !vector_search_ready(&self.vector_status(), vector)? {
            return Ok(Vec::new());
        }
        // Filter by owner (and a single kind) inside the search, the rest afterwards; ask for
        // extra neighbours so that post-filtering still leaves `limit`. In a chat, other users'
        // shared memories qualify too: the owner is then checked after.
        let k = limit.saturating_mul(3).clamp(limit, 4096);
        let (owner, kind) = vector_scope(request);
        let nearest = if self.approximate_search() {
            self.nearest_approximate(vector, owner, kind, k).await?
        } else {
            self.nearest_exact(vector, owner, kind, k).await?
        };
        within_request(self, nearest, request, limit, min_similarity).await
    }

    async fn search_sentences(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        limit: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>> {
        if !vector_search_ready(&self.vector_status(), vector)? || limit == 0 {
            return Ok(Vec::new());
        }
        let nearest = self.nearest_sentences(request, vector, limit).await?;
        within_request(self, nearest, request, limit, min_similarity).await
    }
}

/// What the indexer reads of its queue and of the embedding cache without taking anything,
/// written once for both backends (`store/sql/index_queue.rs`).
#[async_trait]
pub(crate) trait IndexReads: Send + Sync {
    /// Cached vectors of `model_id` by content hash.
    ///
    /// # Errors
    /// The database fails.
    async fn cached_vectors(
        &self,
        hashes: &[String],
        model_id: &str,
    ) -> Result<HashMap<String, Vec<f32>>>;

    /// Memories waiting for a vector.
    ///
    /// # Errors
    /// The database fails.
    async fn pending_index(&self) -> Result<i64>;
}

/// The indexer's queue of memories waiting for a vector, and the embedding cache.
#[async_trait]
pub(crate) trait IndexQueue: IndexReads {
    /// The next memories waiting for a vector, oldest first.
    ///
    /// # Errors
    /// The database fails.
    async fn next_index_batch(&self, limit: usize) -> Result<Vec<IndexItem>>;

    /// Stores fresh vectors in the cache (by content hash).
    ///
    /// # Errors
    /// The database fails.
    async fn cache_vectors(
        &self,
        vectors: &[(String, Vec<f32>)],
        model_id: &str,
        at: DateTime<Utc>,
    ) -> Result<()>;

    /// Writes vectors to `vec_memories` and takes their memories off the queue, in one
    /// transaction. Items without a vector (deleted before indexing) only leave the queue.
    ///
    /// # Errors
    /// The database fails; the queue is unchanged then.
    async fn store_vectors(&self, items: &[(IndexItem, Option<Vec<f32>>)]) -> Result<()> {
        self.store_vectors_and_sentences(items, &HashMap::new())
            .await
    }

    /// [`Self::store_vectors`], and in the same transaction the sentence keys of the items
    /// that have a vector: `sentences` by memory id, in the turn's order. An item's earlier
    /// keys are replaced (by none when `sentences` has no entry for it).
    ///
    /// # Errors
    /// The database fails; nothing changes then.
    async fn store_vectors_and_sentences(
        &self,
        items: &[(IndexItem, Option<Vec<f32>>)],
        sentences: &HashMap<String, Vec<Vec<f32>>>,
    ) -> Result<()>;

    /// Frees every batch of the queue that a process took and has not finished (one that died,
    /// or one still at work, which then stores its vectors again), so that the caller takes them
    /// now: an operator's `mnemo reindex` after a crash. Returns how many memories that freed; a
    /// store whose queue is never leased (SQLite's one writer) frees none.
    ///
    /// # Errors
    /// The database fails.
    async fn release_index_leases(&self) -> Result<u64>;
}

/// Reading entities: the owner's entities named so, one entity with its memories, names by
/// id and counts of links; written once for both backends (`store/sql/entities.rs`).
#[async_trait]
pub(crate) trait EntityReads: Send + Sync {
    /// Entities of `owner` whose canonical name or an alias equals one of `names` (case-insensitive).
    ///
    /// # Errors
    /// The database fails.
    async fn entities_named(&self, owner: Option<&str>, names: &[String]) -> Result<Vec<String>>;

    /// An entity of `owner` by canonical name or alias, with its active memories (newest first).
    ///
    /// # Errors
    /// The database fails.
    async fn entity_info(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        name: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>>;

    /// An entity by id, with its active memories (newest first, none read when `memory_limit`
    /// is 0); `None` if there is none, or `owner` is given and it is not theirs.
    ///
    /// # Errors
    /// The database fails.
    async fn entity_info_by_id(
        &self,
        owner: Option<&str>,
        chat_id: Option<&str>,
        id: &str,
        memory_limit: usize,
    ) -> Result<Option<EntityInfo>>;

    /// Names of entities by id (for subject attribution).
    ///
    /// # Errors
    /// The database fails.
    async fn entity_names(&self, ids: &[String]) -> Result<HashMap<String, String>>;

    /// How many memories each of `entity_ids` is linked to; an entity without links is left
    /// out.
    ///
    /// # Errors
    /// The database fails.
    async fn entity_link_counts(&self, entity_ids: &[String]) -> Result<HashMap<String, i64>>;

    /// Memories with at least one link to `owner`'s entities (`None`: to any entity).
    ///
    /// # Errors
    /// The database fails.
    async fn linked_memory_count(&self, owner: Option<&str>) -> Result<i64>;
}

/// Entities: linking memories to them, and the link queries the entity candidate list walks;
/// finding them by name and describing one ([`EntityReads`]).
#[async_trait]
pub(crate) trait EntityLinks: EntityReads {
    /// Links more entities to an existing memory; returns how many links it now has.
    ///
    /// # Errors
    /// The memory does not exist, or the database fails.
    async fn add_entities(
        &self,
        memory_id: &str,
        entities: &[ExtractedEntity],
        enriched_at: Option<DateTime<Utc>>,
    ) -> Result<usize>;

    /// Counts a failed entity enrichment of a memory (`enrichment_attempts` in its attributes).
    ///
    /// # Errors
    /// The database fails.
    async fn record_enrichment_failure(&self, memory_id: &str) -> Result<()>;

    /// Memories among the newest `scan` links of entity `driver` that are also linked to one
    /// of `others`, newest link first, at most `limit`: each as (memory id, link position,
    /// 1 + how many of `others` it is linked to).
    ///
    /// # Errors
    /// The database fails.
    async fn co_mentions(
        &self,
        driver: &str,
        others: &[String],
        scan: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>>;

    /// The memories of the `depth` newest links of an entity, newest first, each with its
    /// link's position.
    ///
    /// # Errors
    /// The database fails.
    async fn newest_links(&self, entity_id: &str, depth: i64) -> Result<Vec<(String, i64)>>;
}
