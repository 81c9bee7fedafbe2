//! `MemoryService`: the store plus the embedding and ner services, implementing search, ingest,
//! and the background indexer; `api_impl.rs` publishes it as the [`crate::MemoryApi`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use mnemo_embedding_api::{EmbeddingApi, EmbeddingHealth};
use mnemo_kernel::{Event, KernelContext, ToolScope, TypedEvent};
use mnemo_ner_api::{ExtractedEntity, NerApi};
use serde_json::Map;

use crate::config::MemoryConfig;
use crate::error::{MemoryError, Result};
use crate::fts::{is_stopword, terms};
use crate::fusion::{fuse, spread_to_neighbours, Fusion};
use crate::store::{
    content_hash, IndexItem, MemoryStore, NewMemory, Person, StoreOptions, VectorStatus,
};
use crate::types::{
    CandidateList, Memory, MemoryKind, SearchHit, SearchMode, SearchRequest, SessionCompleted,
};

/// Most names tried against the entity table for one query.
const MAX_QUERY_NAMES: usize = 96;
/// Longest part of a query given to the embedder and to NER, in characters; a longer query is
/// searched by its beginning (FTS5 bounds its own terms).
const MAX_QUERY_CHARS: usize = 2_000;

/// The first `MAX_QUERY_CHARS` characters of `query`.
fn query_head(query: &str) -> &str {
    match query.char_indices().nth(MAX_QUERY_CHARS) {
        Some((cut, _)) => &query[..cut],
        None => query,
    }
}

pub(crate) struct State {
    pub(crate) store: Arc<MemoryStore>,
    pub(crate) ctx: KernelContext,
    embedder: Option<Arc<dyn EmbeddingApi>>,
    pub(crate) ner: Option<Arc<dyn NerApi>>,
}

/// A fact to save through [`MemoryService::save_fact`].
#[derive(Debug, Clone, Default)]
pub struct FactInput {
    /// Owner.
    pub user_id: Option<String>,
    /// Session it came from.
    pub session_id: Option<String>,
    /// Chat it belongs to.
    pub chat_id: Option<String>,
    /// The text.
    pub content: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Provenance.
    pub source_ids: Vec<String>,
    /// 0.0 to 1.0.
    pub confidence: f64,
    /// Entities named by the caller, beside those NER finds.
    pub extra_entities: Vec<ExtractedEntity>,
    /// People (person entity ids) it is about.
    pub subject_ids: Vec<String>,
    /// When it expires.
    pub expires_at: Option<DateTime<Utc>>,
    /// Visible to the whole chat.
    pub shared: bool,
    /// Seed 001's type.
    pub memory_type: Option<String>,
    /// Metadata.
    pub attributes: Map<String, serde_json::Value>,
    /// Supersede older near-identical facts of the same scope and subjects (explicit
    /// remembering); consolidation leaves this off and lets the LLM judge contradictions.
    pub supersede: bool,
}

/// User messages that are commands to the host, not conversation.
const SESSION_COMMANDS: [&str; 1] = ["/new"];

/// A reflection's scope: its user, and its chat (`None` for the personal one).
type ReflectionScope = (Option<String>, Option<String>);

/// The memory extension's working parts, shared by its roles and its published API.
pub struct MemoryService {
    config: MemoryConfig,
    pub(crate) state: OnceLock<State>,
    /// Whether `vec_memories` was checked against the provider (once it is ready).
    vector_checked: tokio::sync::Mutex<bool>,
    pub(crate) reflections: Mutex<HashMap<ReflectionScope, Option<Memory>>>,
    fallback_warned: AtomicBool,
    pub(crate) index_wakeup: tokio::sync::Notify,
    indexing: tokio::sync::Mutex<()>,
    /// The background indexer's task, ended in [`MemoryService::close`] before the store.
    indexer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set once the store is closing: no indexing pass starts a batch after it.
    stopping: AtomicBool,
    /// Recent query vectors: a search never writes to the database.
    query_vectors: Mutex<QueryVectorCache>,
}

/// The vectors of the last [`QueryVectorCache::CAPACITY`] distinct queries, keyed by model and
/// text hash; the oldest goes first.
#[derive(Default)]
struct QueryVectorCache {
    vectors: HashMap<(String, String), Vec<f32>>,
    order: std::collections::VecDeque<(String, String)>,
}

impl QueryVectorCache {
    const CAPACITY: usize = 512;

    fn get(&self, key: &(String, String)) -> Option<Vec<f32>> {
        self.vectors.get(key).cloned()
    }

    fn insert(&mut self, key: (String, String), vector: Vec<f32>) {
        if self.vectors.insert(key.clone(), vector).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > Self::CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.vectors.remove(&oldest);
            }
        }
    }
}

impl std::fmt::Debug for MemoryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryService")
            .field("config", &self.config)
            .finish()
    }
}

/// The lowercase content words of a text (no stopwords, no single letters), for Jaccard
/// similarity: "colour is red" and "colour is blue" then differ in one word of three, not of
/// four, so a changed fact is not mistaken for a duplicate.
pub(crate) fn word_set(text: &str) -> std::collections::HashSet<String> {
    terms(text)
        .into_iter()
        .filter(|word| word.chars().count() > 1 && !is_stopword(word))
        .collect()
}

/// |A ∩ B| / |A ∪ B|; two empty sets are identical.
pub(crate) fn jaccard(
    a: &std::collections::HashSet<String>,
    b: &std::collections::HashSet<String>,
) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

/// Hybrid search re-ranks by neighbouring turns only the best `limit × NEIGHBOUR_POOL`
/// candidates.
const NEIGHBOUR_POOL: usize = 8;

/// A search candidate being ranked: id, score, event time, and its rank in each list.
type Ranked = (String, f64, i64, Vec<(String, usize)>);

impl MemoryService {
    /// A service with `config`; it opens its store in [`MemoryService::open`].
    pub fn new(config: MemoryConfig) -> Self {
        Self {
            config,
            state: OnceLock::new(),
            vector_checked: tokio::sync::Mutex::new(false),
            reflections: Mutex::new(HashMap::new()),
            fallback_warned: AtomicBool::new(false),
            index_wakeup: tokio::sync::Notify::new(),
            indexing: tokio::sync::Mutex::new(()),
            indexer: Mutex::new(None),
            stopping: AtomicBool::new(false),
            query_vectors: Mutex::new(QueryVectorCache::default()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    pub(crate) fn state(&self) -> Result<&State> {
        self.state.get().ok_or(MemoryError::NotOpen)
    }

    /// The store, once open.
    ///
    /// # Errors
    /// [`MemoryError::NotOpen`] before start.
    pub fn store(&self) -> Result<&Arc<MemoryStore>> {
        Ok(&self.state()?.store)
    }

    /// Opens the database and finds the embedding and ner services.
    ///
    /// # Errors
    /// The database cannot be opened or migrated.
    pub(crate) async fn open(&self, ctx: &KernelContext) -> Result<()> {
        let path = {
            let configured = std::path::Path::new(&self.config.database);
            if configured.is_absolute() {
                configured.to_path_buf()
            } else {
                ctx.data_dir().join(configured)
            }
        };
        let store = MemoryStore::open(
            &path,
            &StoreOptions {
                busy_timeout: Duration::from_millis(self.config.busy_timeout_ms),
                synchronous: self.config.synchronous.clone(),
                max_connections: 4,
                vector_oversample: self.config.vector_oversample,
                wal_truncate_frames: crate::store::DEFAULT_WAL_TRUNCATE_FRAMES,
            },
        )
        .await
        .map_err(|source| MemoryError::Open {
            path: path.display().to_string(),
            source: Box::new(source),
        })?;
        let embedder = ctx.services().get::<dyn EmbeddingApi>();
        let ner = ctx.services().get::<dyn NerApi>();
        if embedder.is_none() {
            tracing::warn!("no embedding extension: search uses FTS5 and entities only");
        }
        if ner.is_none() {
            tracing::info!(
                "no ner extension: memories are linked to entities only when a tool names them"
            );
        }
        tracing::info!(path = %path.display(), "memory store open");
        let _ = self.state.set(State {
            store: Arc::new(store),
            ctx: ctx.clone(),
            embedder,
            ner,
        });
        Ok(())
    }

    /// Starts the background indexer ([`MemoryService::run_indexer`]); [`MemoryService::close`]
    /// ends it.
    pub(crate) fn start_indexer(self: &Arc<Self>, ctx: &KernelContext) {
        let task = tokio::spawn(self.clone().run_indexer(ctx.clone()));
        let previous = self
            .indexer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(task);
        if let Some(previous) = previous {
            previous.abort();
        }
    }

    /// Closes the store, after everything that uses it has stopped: the background indexer
    /// is ended (a batch it had begun stays queued) and an indexing pass in progress elsewhere
    /// finishes its batch first, so that none of them meets a closed pool.
    pub(crate) async fn close(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let indexer = self
            .indexer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(indexer) = indexer {
            indexer.abort();
            // Cancelled, or ended: either way it no longer runs.
            let _ = indexer.await;
        }
        let _no_pass = self.indexing.lock().await;
        if let Ok(store) = self.store() {
            store.close().await;
        }
    }

    pub(crate) fn now(&self) -> Result<DateTime<Utc>> {
        Ok(self.state()?.ctx.now())
    }

    /// The embedder, if it is ready and `vec_memories` matches it. Checks the vector table the
    /// first time the embedder is ready.
    async fn vector_embedder(&self) -> Option<Arc<dyn EmbeddingApi>> {
        let state = self.state.get()?;
        let embedder = state.embedder.clone()?;
        if embedder.health() != EmbeddingHealth::Ready {
            return None;
        }
        let mut checked = self.vector_checked.lock().await;
        if !*checked {
            match state
                .store
                .ensure_vector_index(embedder.dimensions(), embedder.model_id())
                .await
            {
                Ok(VectorStatus::Enabled {
                    dimensions,
                    model_id,
                }) => {
                    tracing::info!(dimensions, %model_id, "vector search enabled");
                }
                Ok(VectorStatus::Disabled { reason }) => {
                    tracing::warn!(%reason, "vector search disabled")
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot prepare the vector index; will retry");
                    return None;
                }
            }
            *checked = true;
        }
        match state.store.vector_status() {
            VectorStatus::Enabled { .. } => Some(embedder),
            VectorStatus::Disabled { .. } => None,
        }
    }

    fn warn_fallback(&self, why: &str) {
        if !self.fallback_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(reason = %why, "vector search unavailable; searching with FTS5 and entities");
        } else {
            tracing::debug!(reason = %why, "vector search unavailable");
        }
    }

    /// Why vector search is off right now, if it is.
    async fn vector_unavailable_reason(&self) -> String {
        let Some(state) = self.state.get() else {
            return "the store is not open".to_owned();
        };
        match &state.embedder {
            None => "the embedding extension is not enabled".to_owned(),
            Some(embedder) => match embedder.health() {
                EmbeddingHealth::Unavailable { reason } => reason,
                EmbeddingHealth::Ready => match state.store.vector_status() {
                    VectorStatus::Disabled { reason } => reason,
                    VectorStatus::Enabled { .. } => "vector search is available".to_owned(),
                },
            },
        }
    }

    /// The query's vector, from the cache or the embedder.
    async fn query_vector(
        &self,
        embedder: &Arc<dyn EmbeddingApi>,
        query: &str,
    ) -> Result<Option<Vec<f32>>> {
        let key = (embedder.model_id().to_owned(), content_hash(query));
        let recent = self
            .query_vectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key);
        if let Some(vector) = recent {
            return Ok(Some(vector));
        }
        let vector = match embedder.embed(query).await {
            Ok(vector) => vector,
            Err(error) => {
                self.warn_fallback(&error.to_string());
                return Ok(None);
            }
        };
        self.query_vectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, vector.clone());
        Ok(Some(vector))
    }

    /// Names in a query to look up in the entity table: what NER finds, and word n-grams.
    fn query_names(&self, query: &str) -> Vec<String> {
        let mut names = Vec::new();
        if let Some(ner) = self.state.get().and_then(|state| state.ner.as_ref()) {
            for entity in ner.extract_fast(query) {
                names.push(entity.canonical);
                names.push(entity.surface);
            }
        }
        let words = terms(query);
        for size in 1..=3 {
            for window in words.windows(size) {
                if size == 1 && (is_stopword(&window[0]) || window[0].chars().count() < 2) {
                    continue;
                }
                names.push(window.join(" "));
            }
        }
        names.truncate(MAX_QUERY_NAMES);
        names
    }

    /// The vector list: the query's embedding, then its nearest memories with their cosine
    /// similarity; `None` when vector search is unavailable (the reason is logged once).
    async fn vector_list(
        &self,
        request: &SearchRequest,
        depth: usize,
    ) -> Result<Option<Vec<(String, f64)>>> {
        let Some(embedder) = self.vector_embedder().await else {
            let reason = self.vector_unavailable_reason().await;
            self.warn_fallback(&reason);
            return Ok(None);
        };
        let Some(vector) = self
            .query_vector(&embedder, query_head(&request.query))
            .await?
        else {
            return Ok(None);
        };
        let min_similarity = request.min_similarity.unwrap_or(self.config.min_similarity);
        let nearest = self
            .store()?
            .search_vector(request, &vector, depth, min_similarity)
            .await?;
        Ok(Some(
            nearest
                .into_iter()
                .map(|(id, similarity)| (id, f64::from(similarity)))
                .collect(),
        ))
    }

    /// The entity list: memories linked to entities the query names (directly, or as a
    /// relation of the asking user such as "my sister"), with how many each matches.
    async fn entity_list(
        &self,
        request: &SearchRequest,
        depth: usize,
    ) -> Result<Vec<(String, i64)>> {
        let store = self.store()?;
        let mut names = self.query_names(query_head(&request.query));
        if let Some(owner) = &request.user_id {
            for relation in crate::people::relations_in(query_head(&request.query)) {
                if let Some(person) = store.person_by_relation(owner, &relation).await? {
                    names.push(person.name);
                    names.extend(person.aliases);
                }
            }
        }
        store.search_entities(request, &names, depth).await
    }

    /// The ranked lists the request's mode searches (fts, vector, entity; hybrid all three),
    /// each at most `depth` long, with each list's own scores. [`Self::search`] fuses them; the
    /// evaluation reads them to study fusion.
    ///
    /// # Errors
    /// The store fails. Query text never causes an error.
    pub async fn candidate_lists(
        &self,
        request: &SearchRequest,
        depth: usize,
    ) -> Result<Vec<CandidateList>> {
        let store = self.store()?.clone();
        let mode = request.mode;
        // The three lists run at once: the query embedding (on a blocking thread) overlaps
        // the FTS5 and entity queries (on the pool's connections).
        let fts = async {
            if matches!(mode, SearchMode::Hybrid | SearchMode::Fts) {
                store.search_fts(request, depth).await.map(Some)
            } else {
                Ok(None)
            }
        };
        let vector = async {
            if matches!(mode, SearchMode::Hybrid | SearchMode::Vector)
                && !request.query.trim().is_empty()
            {
                self.vector_list(request, depth).await
            } else {
                Ok(None)
            }
        };
        let entity = async {
            if matches!(mode, SearchMode::Hybrid | SearchMode::Entity) {
                self.entity_list(request, depth).await.map(Some)
            } else {
                Ok(None)
            }
        };
        let (fts, vector, entity) = tokio::join!(fts, vector, entity);
        let mut lists: Vec<CandidateList> = Vec::new();
        if let Some(hits) = fts? {
            lists.push(CandidateList { name: "fts", hits });
        }
        if let Some(hits) = vector? {
            lists.push(CandidateList {
                name: "vector",
                hits,
            });
        }
        if let Some(mut linked) = entity? {
            // An entity list says "mentions who you asked about", not how well; among memories
            // linked to as many of the query's entities, the text and meaning lists decide.
            let best_rank = |id: &String| {
                lists
                    .iter()
                    .filter_map(|list| list.hits.iter().position(|(other, _)| other == id))
                    .min()
                    .unwrap_or(usize::MAX)
            };
            linked.sort_by_cached_key(|(id, matched)| (std::cmp::Reverse(*matched), best_rank(id)));
            lists.push(CandidateList {
                name: "entity",
                hits: linked
                    .into_iter()
                    .map(|(id, matched)| (id, matched as f64))
                    .collect(),
            });
        }
        Ok(lists)
    }

    /// Searches with the request's mode and filters. Hybrid fuses the lists as `fusion` says
    /// (weighted normalised scores, or Reciprocal Rank Fusion; see `fusion.rs`), then lets each
    /// listed episode inherit a share of its neighbouring turns' relevance.
    ///
    /// # Errors
    /// The store fails. Query text never causes an error.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>> {
        let store = self.store()?.clone();
        let mut owned = request.clone();
        owned.at.get_or_insert(self.now()?);
        let request = &owned;
        let limit = request.limit.clamp(1, self.config.max_search_limit.max(1));
        let candidates = self.config.candidates_per_list.max(limit);
        let lists = self.candidate_lists(request, candidates).await?;
        // A single list keeps its own order (1 / (k + rank) is monotonic); hybrid fuses.
        let fusion = if request.mode == SearchMode::Hybrid && self.config.fusion == "scores" {
            Fusion::Scores {
                vector_weight: self.config.vector_weight,
                entity_weight: self.config.entity_weight,
                similarity_floor: f64::from(
                    request.min_similarity.unwrap_or(self.config.min_similarity),
                ),
            }
        } else {
            Fusion::Rrf {
                k: self.config.rrf_k,
            }
        };
        let fused = fuse(&lists, fusion);
        let (before, after) = (
            self.config.previous_turn_weight,
            self.config.next_turn_weight,
        );
        let spread = request.mode == SearchMode::Hybrid && (before > 0.0 || after > 0.0);
        let ids: Vec<String> = fused.keys().cloned().collect();
        let keys = store.rank_keys(&ids, request, false).await?;
        // A memory we doubt (confidence below 0.5: contradicted by a newer fact, or nearly
        // forgotten) ranks after trusted ones of similar relevance: its score is scaled by
        // 0.5 + confidence. Ordinary decay above 0.5 leaves relevance alone.
        let weight = |id: &String| {
            keys.get(id)
                .map(|key| (0.5 + key.confidence.clamp(0.0, 1.0)).min(1.0))
        };
        let order = |ranked: &mut Vec<Ranked>| {
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
        };
        let mut ranked: Vec<Ranked> = fused
            .iter()
            .filter_map(|(id, (score, ranks))| {
                let key = keys.get(id)?;
                Some((
                    id.clone(),
                    score * weight(id)?,
                    key.event_time,
                    ranks.clone(),
                ))
            })
            .collect();
        order(&mut ranked);
        if spread {
            // Neighbouring turns re-rank the head of the list: only a candidate already near
            // the top can be lifted into the results by its neighbours' relevance.
            ranked.truncate(limit * NEIGHBOUR_POOL);
            let head: Vec<String> = ranked.iter().map(|(id, ..)| id.clone()).collect();
            let with_neighbours = store.rank_keys(&head, request, true).await?;
            let neighbours: Vec<(String, Option<String>, Option<String>)> = with_neighbours
                .into_iter()
                .map(|(id, key)| (id, key.previous, key.next))
                .collect();
            let relevance: HashMap<String, f64> = fused
                .iter()
                .map(|(id, (score, _))| (id.clone(), *score))
                .collect();
            let spread = spread_to_neighbours(&relevance, &neighbours, before, after);
            for entry in &mut ranked {
                if let (Some(score), Some(weight)) = (spread.get(&entry.0), weight(&entry.0)) {
                    entry.1 = score * weight;
                }
            }
            order(&mut ranked);
        }
        ranked.truncate(limit);
        let top: Vec<String> = ranked.iter().map(|(id, ..)| id.clone()).collect();
        let mut memories = store.load_filtered(&top, request).await?;
        let hits: Vec<SearchHit> = ranked
            .into_iter()
            .filter_map(|(id, score, _, ranks)| {
                memories.remove(&id).map(|memory| SearchHit {
                    score,
                    memory,
                    ranks,
                })
            })
            .collect();
        if request.touch && !hits.is_empty() {
            let ids: Vec<String> = hits.iter().map(|hit| hit.memory.id.clone()).collect();
            store.touch(&ids, self.now()?).await?;
        }
        Ok(hits)
    }

    /// Refuses empty or over-long memory text, naming the limit.
    pub(crate) fn check_content(&self, field: &str, content: &str) -> Result<()> {
        if content.trim().is_empty() {
            return Err(MemoryError::Invalid(format!("`{field}` must not be empty")));
        }
        if content.contains('\0') {
            return Err(MemoryError::Invalid(format!(
                "`{field}` contains a NUL character"
            )));
        }
        let length = content.chars().count();
        if length > self.config.max_content_chars {
            return Err(MemoryError::Invalid(format!(
                "`{field}` is {length} characters; the limit is {} (max_content_chars)",
                self.config.max_content_chars
            )));
        }
        Ok(())
    }

    fn fast_entities(&self, text: &str) -> Vec<ExtractedEntity> {
        self.state
            .get()
            .and_then(|state| state.ner.as_ref())
            .map(|ner| ner.extract_fast(text))
            .unwrap_or_default()
    }

    /// The hot path: saves a conversation event as an episode, links fast-NER entities, and on a
    /// user's new session announces the user's other open sessions as completed. No model call
    /// and no embedding happen here; the indexer embeds later.
    ///
    /// # Errors
    /// The event lacks ids or text, the text is too long, or the store fails.
    pub async fn ingest(&self, event: &Event) -> Result<Option<String>> {
        self.store_turn(event, true).await
    }

    /// Stores a conversation event as [`Self::ingest`] does, but announces none of the sessions
    /// it closes: an import leaves their consolidation to the scheduled job (or `mnemo jobs run
    /// execute_consolidation`) instead of waiting for the model session by session while it
    /// reads the file (40 events took 404 s with a local model).
    ///
    /// # Errors
    /// As [`Self::ingest`].
    pub async fn import(&self, event: &Event) -> Result<Option<String>> {
        self.store_turn(event, false).await
    }

    async fn store_turn(&self, event: &Event, announce: bool) -> Result<Option<String>> {
        let started = Instant::now();
        let state = self.state()?;
        let Some(text) = event.payload.text() else {
            return Ok(None);
        };
        let (Some(session_id), Some(user_id)) =
            (event.session_id.as_deref(), event.user_id.as_deref())
        else {
            return Err(MemoryError::Invalid(format!(
                "event {} has no session_id or user_id; it was not stored",
                event.id
            )));
        };
        self.check_content("text", text)?;
        let is_user = event.topic() == mnemo_kernel::TOPIC_USER_MESSAGE;
        // "/new" tells the host (and the markdown mirror) to start a new session; it is not
        // something the user said, so it is neither a turn nor reflected on.
        if is_user && SESSION_COMMANDS.contains(&text.trim()) {
            tracing::debug!(event_id = %event.id, "a session command; not stored as a turn");
            return Ok(None);
        }
        let entities = self.fast_entities(text);
        let episode = NewMemory {
            kind: MemoryKind::Episode,
            content: text.to_owned(),
            session_id: Some(session_id.to_owned()),
            user_id: Some(user_id.to_owned()),
            chat_id: event.chat_id.clone(),
            event_time: event.at,
            created_at: state.ctx.now(),
            source_role: Some(if is_user { "user" } else { "assistant" }.to_owned()),
            source_ids: if event.id.is_empty() {
                Vec::new()
            } else {
                vec![format!("event:{}", event.id)]
            },
            tags: Vec::new(),
            attributes: Map::new(),
            decay_rate: self.config.fact_decay_rate,
            confidence: 1.0,
            memory_type: None,
            expires_at: None,
            shared: false,
            subject_ids: Vec::new(),
        };
        let event_id = (!event.id.is_empty()).then_some(event.id.as_str());
        let stored = state
            .store
            .insert_turn(&episode, &entities, event_id, is_user)
            .await?;
        let Some(id) = stored.memory_id else {
            tracing::debug!(event_id = %event.id, "event already stored; skipped");
            return Ok(None);
        };
        // The user moved to a new session: the ones it closed are ready for consolidation.
        for session in stored.closed_sessions.into_iter().filter(|_| announce) {
            let completed = SessionCompleted { session };
            let announcement = Event::new(state.ctx.now(), completed.into_payload())
                .with_scope(None, Some(user_id.to_owned()), event.chat_id.clone())
                .with_parent(event.id.clone());
            if let Err(error) = state.ctx.publish(announcement).await {
                tracing::warn!(%error, "could not announce a completed session");
            }
        }
        self.index_wakeup.notify_one();
        tracing::debug!(memory_id = %id, entities = entities.len(), micros = started.elapsed().as_micros() as u64, "episode stored");
        Ok(Some(id))
    }

    /// Saves a fact with fast-NER entities plus the input's, links its subjects, and supersedes
    /// earlier facts of the same scope and subjects that say nearly the same (cosine at least
    /// `supersede_similarity`; needs the embedder, skipped without it).
    ///
    /// # Errors
    /// The content is empty or too long, or the store fails.
    pub async fn save_fact(&self, fact: FactInput) -> Result<String> {
        self.check_content("content", &fact.content)?;
        let state = self.state()?;
        let mut entities = self.fast_entities(&fact.content);
        entities.extend(fact.extra_entities);
        let now = state.ctx.now();
        let mut subject_ids = fact.subject_ids;
        subject_ids.sort();
        subject_ids.dedup();
        let id = state
            .store
            .insert_memory(
                &NewMemory {
                    kind: MemoryKind::Fact,
                    content: fact.content.trim().to_owned(),
                    session_id: fact.session_id,
                    user_id: fact.user_id.clone(),
                    chat_id: fact.chat_id.clone(),
                    event_time: now,
                    created_at: now,
                    source_role: None,
                    source_ids: fact.source_ids,
                    tags: fact.tags,
                    attributes: fact.attributes,
                    decay_rate: if fact.expires_at.is_some() {
                        0.0
                    } else {
                        self.config.fact_decay_rate
                    },
                    confidence: fact.confidence.clamp(0.0, 1.0),
                    memory_type: fact.memory_type,
                    expires_at: fact.expires_at,
                    shared: fact.shared,
                    subject_ids: subject_ids.clone(),
                },
                &entities,
            )
            .await?;
        self.index_wakeup.notify_one();
        if !fact.supersede {
            return Ok(id);
        }
        if let Err(error) = self
            .supersede_similar(
                &id,
                &fact.content,
                fact.user_id.as_deref(),
                fact.chat_id.as_deref(),
                &subject_ids,
            )
            .await
        {
            tracing::warn!(memory_id = %id, %error, "supersession check failed; the fact is saved");
        }
        Ok(id)
    }

    /// Marks older facts of the same owner, chat and subjects that say nearly the same as
    /// superseded by `new_id`; returns how many.
    async fn supersede_similar(
        &self,
        new_id: &str,
        content: &str,
        user_id: Option<&str>,
        chat_id: Option<&str>,
        subject_ids: &[String],
    ) -> Result<usize> {
        let Some(embedder) = self.vector_embedder().await else {
            return Ok(0);
        };
        let Some(vector) = self.query_vector(&embedder, content).await? else {
            return Ok(0);
        };
        let store = self.store()?;
        let request = SearchRequest {
            user_id: user_id.map(str::to_owned),
            chat_id: chat_id.map(str::to_owned),
            kinds: vec![MemoryKind::Fact],
            at: Some(self.now()?),
            ..SearchRequest::default()
        };
        let similar: Vec<String> = store
            .search_vector(&request, &vector, 10, self.config.supersede_similarity)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let candidates = store.load_filtered(&similar, &request).await?;
        let old: Vec<String> = similar
            .into_iter()
            .filter(|id| id != new_id)
            .filter(|id| {
                candidates.get(id).is_some_and(|memory| {
                    let mut theirs = memory.subject_ids.clone();
                    theirs.sort();
                    memory.user_id.as_deref() == user_id
                        && memory.chat_id.as_deref() == chat_id
                        && theirs == subject_ids
                })
            })
            .collect();
        store.supersede(&old, new_id, self.now()?).await?;
        if !old.is_empty() {
            tracing::info!(new = %new_id, superseded = old.len(), "older facts superseded");
        }
        Ok(old.len())
    }

    /// Finds the owner's person for "my wife", "Sarah" or "my wife Sarah".
    ///
    /// # Errors
    /// The store fails.
    pub async fn find_person(&self, owner: &str, reference: &str) -> Result<Option<Person>> {
        crate::people::find_person(self.store()?, owner, reference).await
    }

    /// Finds or creates the owner's person for a reference (seed 000's resolution table).
    ///
    /// # Errors
    /// The store fails.
    pub async fn resolve_or_create_person(
        &self,
        owner: &str,
        reference: &str,
        name_hint: Option<&str>,
    ) -> Result<Option<(Person, bool)>> {
        crate::people::resolve_or_create_person(self.store()?, owner, reference, name_hint).await
    }

    /// Every person the owner told us about.
    ///
    /// # Errors
    /// The store fails.
    pub async fn get_known_people(&self, owner: &str) -> Result<Vec<Person>> {
        self.store()?.known_people(owner).await
    }

    /// Stores a fact about `subjects` for the caller; returns its id and the subjects' names.
    /// A shared fact in a chat is visible to the whole chat; otherwise it is personal.
    ///
    /// # Errors
    /// The content is invalid, or the store fails.
    pub async fn remember(
        &self,
        scope: &ToolScope,
        content: &str,
        subjects: &[String],
        expires_in_days: Option<i64>,
        shared: bool,
    ) -> Result<(String, Vec<String>)> {
        self.check_content("content", content)?;
        let name_hint = self
            .fast_entities(content)
            .into_iter()
            .find(|entity| entity.entity_type == mnemo_ner_api::EntityType::Person)
            .map(|entity| entity.canonical);
        let mut subject_ids = Vec::new();
        let mut names = Vec::new();
        for subject in subjects {
            if let Some((person, _)) = self
                .resolve_or_create_person(&scope.user_id, subject, name_hint.as_deref())
                .await?
            {
                // "my wife" and "Sarah" may be one person: linked and named once.
                if !subject_ids.contains(&person.id) {
                    subject_ids.push(person.id);
                    names.push(person.name);
                }
            }
        }
        let now = self.now()?;
        let shared = shared && scope.chat_id.is_some();
        let id = self
            .save_fact(FactInput {
                user_id: Some(scope.user_id.clone()),
                session_id: scope.session_id.clone(),
                // Said in a chat, it belongs to that chat; shared, every member sees it.
                chat_id: scope.chat_id.clone(),
                content: content.to_owned(),
                confidence: 1.0,
                subject_ids,
                expires_at: expires_in_days.map(|days| now + chrono::Duration::days(days)),
                shared,
                memory_type: Some("fact".to_owned()),
                supersede: true,
                ..FactInput::default()
            })
            .await?;
        Ok((id, names))
    }

    /// Seed 001's typed store: `fact` (permanent), `context` (until the end of the day; a
    /// `key` in the metadata replaces that key's earlier value) or `conversation` (30 days).
    ///
    /// # Errors
    /// An unknown type or invalid content, or the store fails.
    pub async fn store_typed(
        &self,
        scope: &ToolScope,
        memory_type: &str,
        content: &str,
        metadata: Map<String, serde_json::Value>,
    ) -> Result<String> {
        self.check_content("content", content)?;
        let now = self.now()?;
        let end_of_day = now
            .date_naive()
            .and_hms_opt(23, 59, 59)
            .map(|time| time.and_utc())
            .unwrap_or(now);
        let (kind, expires_at) = match memory_type {
            "fact" => (MemoryKind::Fact, None),
            "context" => (MemoryKind::Fact, Some(end_of_day)),
            "conversation" => (MemoryKind::Episode, Some(now + chrono::Duration::days(30))),
            other => {
                return Err(MemoryError::Invalid(format!(
                    "`memory_type` must be conversation, fact or context, not `{other}`"
                )))
            }
        };
        let previous = match (
            memory_type,
            metadata.get("key").and_then(|key| key.as_str()),
        ) {
            // The value this one replaces: the one set in the same chat (or outside any).
            ("context", Some(key)) => self
                .context_value(&scope.user_id, scope.chat_id.as_deref(), key)
                .await?
                .filter(|previous| previous.chat_id == scope.chat_id),
            _ => None,
        };
        let id = if kind == MemoryKind::Fact {
            self.save_fact(FactInput {
                user_id: Some(scope.user_id.clone()),
                session_id: scope.session_id.clone(),
                chat_id: scope.chat_id.clone(),
                content: content.to_owned(),
                confidence: 1.0,
                expires_at,
                memory_type: Some(memory_type.to_owned()),
                attributes: metadata,
                supersede: memory_type == "fact",
                ..FactInput::default()
            })
            .await?
        } else {
            let state = self.state()?;
            let entities = self.fast_entities(content);
            let id = state
                .store
                .insert_memory(
                    &NewMemory {
                        kind,
                        content: content.trim().to_owned(),
                        session_id: scope.session_id.clone(),
                        user_id: Some(scope.user_id.clone()),
                        chat_id: scope.chat_id.clone(),
                        event_time: now,
                        created_at: now,
                        source_role: Some("user".to_owned()),
                        source_ids: Vec::new(),
                        tags: Vec::new(),
                        attributes: metadata,
                        decay_rate: 0.0,
                        confidence: 1.0,
                        memory_type: Some(memory_type.to_owned()),
                        expires_at,
                        shared: false,
                        subject_ids: Vec::new(),
                    },
                    &entities,
                )
                .await?;
            self.index_wakeup.notify_one();
            id
        };
        if let Some(previous) = previous {
            self.store()?.supersede(&[previous.id], &id, now).await?;
        }
        Ok(id)
    }

    /// The value stored today under `key` with `set_context`: in a chat, the one set in that
    /// chat, else the one set outside any chat.
    ///
    /// # Errors
    /// The store fails.
    pub async fn context_value(
        &self,
        owner: &str,
        chat_id: Option<&str>,
        key: &str,
    ) -> Result<Option<Memory>> {
        self.store()?
            .context_value(owner, chat_id, key, self.now()?)
            .await
    }

    /// Forgets one of the owner's memories for good (see [`Self::purge`]). Decay and corrections
    /// soft-delete instead, so that what they hide stays recoverable.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] when it is not a memory of the owner.
    pub async fn forget(&self, owner: &str, memory_id: &str) -> Result<()> {
        match self.store()?.get(memory_id).await? {
            Some(memory) if memory.user_id.as_deref() == Some(owner) => {
                self.purge(&[memory_id.to_owned()]).await?;
                Ok(())
            }
            _ => Err(MemoryError::NotFound(format!(
                "no memory `{memory_id}` of yours to forget"
            ))),
        }
    }

    /// Removes memories for good, whoever owns them: row, full-text entry, vector, entity links
    /// and cached vector (see [`MemoryStore::purge`]), then announces each on
    /// `memory.forgotten` ([`crate::MemoryForgotten`]) so that extensions with their own copies (the
    /// markdown mirror) remove them too. Returns how many were removed; unknown ids are skipped.
    ///
    /// # Errors
    /// The store fails; nothing is removed then.
    pub async fn purge(&self, ids: &[String]) -> Result<u64> {
        let state = self.state()?;
        let removed = state.store.purge(ids).await?;
        let count = removed.len() as u64;
        for forgotten in removed {
            tracing::info!(memory_id = %forgotten.memory_id, "memory forgotten");
            let event = Event::new(state.ctx.now(), forgotten.clone().into_payload()).with_scope(
                forgotten.session_id,
                forgotten.user_id,
                forgotten.chat_id,
            );
            if let Err(error) = state.ctx.publish(event).await {
                tracing::warn!(%error, "could not announce a forgotten memory; copies kept by other extensions stay");
            }
        }
        Ok(count)
    }

    /// Removes everything stored about `user_id` (see [`MemoryStore::erase_user`]), forgets
    /// the recent query vectors, whoever asked them, and announces the erasure on
    /// `memory.user_erased` ([`crate::UserErased`]). Returns how many memories were removed.
    ///
    /// # Errors
    /// The store fails; nothing is removed then.
    pub async fn erase_user(&self, user_id: &str) -> Result<u64> {
        let state = self.state()?;
        let erased = state.store.erase_user(user_id).await?;
        *self
            .query_vectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = QueryVectorCache::default();
        let removed = erased.memories_removed;
        tracing::info!(user_id, removed, "user erased");
        let event = Event::new(state.ctx.now(), erased.into_payload()).with_scope(
            None,
            Some(user_id.to_owned()),
            None,
        );
        if let Err(error) = state.ctx.publish(event).await {
            tracing::warn!(%error, "could not announce an erased user; copies kept by other extensions stay");
        }
        Ok(removed)
    }

    /// Soft-deletes expired memories now; returns how many.
    ///
    /// # Errors
    /// The store fails.
    pub async fn expire_now(&self) -> Result<u64> {
        self.store()?.expire(self.now()?).await
    }

    /// Replaces a fact of `user_id`; the new one keeps the old id in its provenance.
    ///
    /// # Errors
    /// The old fact is not an active fact of the user, the text is invalid, or the store fails.
    pub async fn correct_fact(
        &self,
        user_id: Option<&str>,
        old_id: &str,
        content: &str,
    ) -> Result<String> {
        self.check_content("content", content)?;
        let state = self.state()?;
        let now = state.ctx.now();
        let entities = self.fast_entities(content);
        let old = state.store.get(old_id).await?;
        let replacement = NewMemory {
            kind: MemoryKind::Fact,
            content: content.trim().to_owned(),
            session_id: old.as_ref().and_then(|memory| memory.session_id.clone()),
            user_id: user_id.map(str::to_owned),
            chat_id: old.as_ref().and_then(|memory| memory.chat_id.clone()),
            event_time: now,
            created_at: now,
            source_role: None,
            source_ids: Vec::new(),
            tags: old
                .as_ref()
                .map(|memory| memory.tags.clone())
                .unwrap_or_default(),
            attributes: Map::new(),
            decay_rate: self.config.fact_decay_rate,
            confidence: 1.0,
            memory_type: None,
            expires_at: None,
            shared: false,
            subject_ids: Vec::new(),
        };
        let id = state
            .store
            .correct(old_id, user_id, &replacement, &entities)
            .await?;
        self.index_wakeup.notify_one();
        Ok(id)
    }

    /// Embeds every queued memory now, in batches, until the queue is empty or the embedder
    /// cannot help; returns how many memories got a vector.
    pub async fn index_pending(&self) -> usize {
        let Some(embedder) = self.vector_embedder().await else {
            return 0;
        };
        let Ok(store) = self.store() else {
            return 0;
        };
        let _one_pass = self.indexing.lock().await;
        let mut indexed = 0;
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                return indexed;
            }
            let batch = match store.next_index_batch(self.config.index_batch_size).await {
                Ok(batch) if batch.is_empty() => return indexed,
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "indexer cannot read its queue");
                    return indexed;
                }
            };
            match self.index_batch(&embedder, store, batch).await {
                Ok(count) => indexed += count,
                Err(error) => {
                    tracing::warn!(%error, "indexing failed; the memories stay queued");
                    return indexed;
                }
            }
        }
    }

    async fn index_batch(
        &self,
        embedder: &Arc<dyn EmbeddingApi>,
        store: &MemoryStore,
        batch: Vec<IndexItem>,
    ) -> Result<usize> {
        let model = embedder.model_id().to_owned();
        let hashes: Vec<String> = batch
            .iter()
            .map(|item| content_hash(&item.content))
            .collect();
        let mut known = store.cached_vectors(&hashes, &model).await?;
        let mut missing_texts = Vec::new();
        let mut missing_hashes = Vec::new();
        for (item, hash) in batch.iter().zip(&hashes) {
            if item.active && !known.contains_key(hash) && !missing_hashes.contains(hash) {
                missing_texts.push(item.content.clone());
                missing_hashes.push(hash.clone());
            }
        }
        if !missing_texts.is_empty() {
            let vectors = embedder
                .embed_batch(&missing_texts)
                .await
                .map_err(|error| MemoryError::Invalid(error.to_string()))?;
            let fresh: Vec<(String, Vec<f32>)> = missing_hashes.into_iter().zip(vectors).collect();
            store.cache_vectors(&fresh, &model, self.now()?).await?;
            known.extend(fresh);
        }
        let mut count = 0;
        let items: Vec<(IndexItem, Option<Vec<f32>>)> = batch
            .into_iter()
            .zip(hashes)
            .map(|(item, hash)| {
                let vector = if item.active {
                    known.get(&hash).cloned()
                } else {
                    None
                };
                count += usize::from(vector.is_some());
                (item, vector)
            })
            .collect();
        store.store_vectors(&items).await?;
        Ok(count)
    }

    /// Prepares a re-index: with `all`, or when `vec_memories` does not match the embedding
    /// provider, rebuilds the vector table and queues every active memory; otherwise keeps what
    /// is indexed (a re-index that was stopped resumes where it was). Returns the queue length.
    ///
    /// # Errors
    /// No embedding provider is ready, or the store fails.
    pub async fn prepare_reindex(&self, all: bool) -> Result<i64> {
        let state = self.state()?;
        let embedder = state.embedder.clone().ok_or_else(|| {
            MemoryError::Invalid("the embedding extension is not enabled".to_owned())
        })?;
        if let EmbeddingHealth::Unavailable { reason } = embedder.health() {
            return Err(MemoryError::Invalid(format!(
                "embeddings are unavailable: {reason}"
            )));
        }
        let status = state
            .store
            .ensure_vector_index(embedder.dimensions(), embedder.model_id())
            .await?;
        if all || matches!(status, VectorStatus::Disabled { .. }) {
            let queued = state
                .store
                .reset_vector_index(embedder.dimensions(), embedder.model_id())
                .await?;
            tracing::info!(queued, model = %embedder.model_id(), "vector index rebuilt; memories queued");
        }
        *self.vector_checked.lock().await = true;
        state.store.pending_index().await
    }

    /// Embeds one batch of the queue; returns how many memories it took off (0 when done).
    ///
    /// # Errors
    /// The embedder or the store fails; the batch stays queued.
    pub async fn index_one_batch(&self) -> Result<usize> {
        let Some(embedder) = self.vector_embedder().await else {
            return Err(MemoryError::Invalid(
                "vector search is not available".to_owned(),
            ));
        };
        let store = self.store()?;
        let _one_pass = self.indexing.lock().await;
        if self.stopping.load(Ordering::SeqCst) {
            return Ok(0);
        }
        let batch = store.next_index_batch(self.config.index_batch_size).await?;
        let taken = batch.len();
        if taken > 0 {
            self.index_batch(&embedder, store, batch).await?;
        }
        Ok(taken)
    }

    /// The background indexer: wakes on new memories (or every few seconds) until shutdown.
    pub(crate) async fn run_indexer(self: Arc<Self>, ctx: KernelContext) {
        let shutdown = ctx.shutdown_token();
        let mut mirror_loaded = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.index_wakeup.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            self.index_pending().await;
            // Load the vector mirror here, once the model is ready, rather than in the first
            // search (about 0.5 s per 100k vectors).
            if !mirror_loaded && self.vector_embedder().await.is_some() {
                if let Ok(store) = self.store() {
                    match store.mirror_size().await {
                        Ok((rows, _)) => tracing::debug!(rows, "vector mirror ready"),
                        Err(error) => tracing::warn!(%error, "cannot load the vector mirror"),
                    }
                }
                mirror_loaded = true;
            }
        }
    }

    /// Gives the sessions and memories that the maintenance jobs gave up on after repeated
    /// failures a fresh start (`mnemo jobs retry`); returns how many sessions and memories.
    ///
    /// # Errors
    /// The store fails; nothing is changed then.
    pub async fn retry_given_up(&self) -> Result<(u64, u64)> {
        self.store()?.reset_failed_attempts().await
    }

    /// The latest reflection for `user_id` in exactly the scope of `chat_id`, cached until a
    /// new reflection is saved.
    ///
    /// # Errors
    /// The store fails.
    pub async fn cached_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>> {
        let key = (user_id.map(str::to_owned), chat_id.map(str::to_owned));
        if let Some(cached) = self
            .reflections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
        {
            return Ok(cached.clone());
        }
        let latest = self.store()?.latest_reflection(user_id, chat_id).await?;
        self.reflections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(key, latest.clone());
        Ok(latest)
    }
}
