//! `MemoryService`: the store plus the embedding and ner services, behind the extension's
//! roles and, through `api_impl.rs`, the published [`crate::MemoryApi`]. Its write paths,
//! indexer and administration live in the submodules; it searches with the
//! [`Searcher`](crate::search::Searcher) it holds (`search.rs`).

mod access;
mod admin;
mod facts;
mod group_commit;
mod indexer;
mod ingest;
mod quarantine;
mod recalls;
mod removal;
mod search;
mod trust;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use mnemo_embedding_api::EmbeddingApi;
use mnemo_kernel::{Event, KernelContext, TypedEvent};
use mnemo_ner_api::NerApi;

pub use facts::FactInput;
pub(crate) use facts::{jaccard, word_set};
pub(crate) use trust::Written;

use crate::config::MemoryConfig;
use crate::error::{MemoryError, Result};
use crate::search::{SearchConfig, Searcher};
use crate::store::{MemoryBackend, MemoryStore, StoreOptions};
use crate::types::Memory;

/// What the service works with once open.
pub(crate) struct State {
    pub(crate) store: Arc<dyn MemoryBackend>,
    /// Search over `store`, with the embedder and NER below.
    pub(crate) searcher: Searcher,
    pub(crate) ctx: KernelContext,
    pub(crate) embedder: Option<Arc<dyn EmbeddingApi>>,
    pub(crate) ner: Option<Arc<dyn NerApi>>,
}

/// A reflection's scope: its user, and its chat (`None` for the personal one).
type ReflectionScope = (Option<String>, Option<String>);

/// The memory extension's working parts, shared by its roles and its published API.
pub struct MemoryService {
    config: MemoryConfig,
    pub(crate) state: OnceLock<State>,
    pub(crate) reflections: Mutex<HashMap<ReflectionScope, Option<Memory>>>,
    pub(crate) index_wakeup: tokio::sync::Notify,
    indexing: tokio::sync::Mutex<()>,
    /// The background indexer's task, ended in [`MemoryService::close`] before the store.
    indexer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set once the store is closing: no indexing pass starts a batch after it.
    stopping: AtomicBool,
    /// This process's name in leases it holds in a store other processes share.
    instance_id: String,
    /// Chat memberships this process has recorded or seen, (chat, user): a trusted turn in a
    /// known chat writes nothing more.
    known_members: Mutex<std::collections::HashSet<(String, String)>>,
    /// Turns waiting to commit together (`group_commit.rs`).
    group_commit: group_commit::GroupCommit,
    /// Recalls noted by searches, written in the background (`recalls.rs`).
    pub(crate) recalls: recalls::Recalls,
    /// The task that writes them, ended in [`MemoryService::close`].
    recall_writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for MemoryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryService")
            .field("config", &self.config)
            .finish()
    }
}

impl MemoryService {
    /// A service with `config`; it opens its store in [`MemoryService::open`].
    pub fn new(config: MemoryConfig) -> Self {
        Self {
            config,
            state: OnceLock::new(),
            reflections: Mutex::new(HashMap::new()),
            index_wakeup: tokio::sync::Notify::new(),
            indexing: tokio::sync::Mutex::new(()),
            indexer: Mutex::new(None),
            stopping: AtomicBool::new(false),
            instance_id: crate::store::new_id("instance"),
            known_members: Mutex::new(std::collections::HashSet::new()),
            group_commit: group_commit::GroupCommit::default(),
            recalls: recalls::Recalls::default(),
            recall_writer: Mutex::new(None),
        }
    }

    /// This process's name in leases it holds in a shared store.
    pub(crate) fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// The configuration.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    pub(crate) fn state(&self) -> Result<&State> {
        self.state.get().ok_or(MemoryError::NotOpen)
    }

    /// The storage backend, once open.
    ///
    /// # Errors
    /// [`MemoryError::NotOpen`] before start.
    pub(crate) fn store(&self) -> Result<&Arc<dyn MemoryBackend>> {
        Ok(&self.state()?.store)
    }

    /// Opens the database and finds the embedding and ner services.
    ///
    /// # Errors
    /// The database cannot be opened or migrated.
    pub(crate) async fn open(&self, ctx: &KernelContext) -> Result<()> {
        let postgres_url = self
            .config
            .postgres_url(|key| std::env::var(key).ok())
            .map_err(MemoryError::Invalid)?;
        let (store, location): (Arc<dyn MemoryBackend>, String) = match postgres_url {
            Some(url) => {
                let location = crate::store::redacted(&url);
                let store = crate::store::open_postgres(&crate::store::PostgresOptions {
                    url,
                    max_connections: self.config.max_connections,
                    lock_timeout: Duration::from_millis(self.config.busy_timeout_ms),
                    ef_search: if self.config.vector_oversample == 0 {
                        0
                    } else {
                        (self.config.candidates_per_list * 4).max(100)
                    },
                    synchronous_commit: matches!(
                        self.config.synchronous.as_str(),
                        "full" | "extra"
                    ),
                })
                .await
                .map_err(|source| MemoryError::Open {
                    path: location.clone(),
                    source: Box::new(source),
                })?;
                (store, location)
            }
            None => {
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
                (Arc::new(store), path.display().to_string())
            }
        };
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
        tracing::info!(store = %location, "memory store open");
        let searcher = Searcher::new(
            Arc::clone(&store),
            SearchConfig::from(&self.config),
            embedder.clone(),
            ner.clone(),
            Arc::clone(ctx.clock()),
        );
        let _ = self.state.set(State {
            store,
            searcher,
            ctx: ctx.clone(),
            embedder,
            ner,
        });
        Ok(())
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
        self.stop_recall_writer().await;
        if let Ok(store) = self.store() {
            store.close().await;
        }
    }

    pub(crate) fn now(&self) -> Result<DateTime<Utc>> {
        Ok(self.state()?.ctx.now())
    }

    /// The embedder, if it is ready and `vec_memories` matches it (see
    /// [`Searcher::vector_embedder`]).
    pub(crate) async fn vector_embedder(&self) -> Option<Arc<dyn EmbeddingApi>> {
        self.state.get()?.searcher.vector_embedder().await
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

/// Publishes one of memory's events about a change already committed. A failure is logged,
/// saying what other extensions miss (`missed`), and does not undo the change.
pub(crate) async fn announce<T: TypedEvent>(
    ctx: &KernelContext,
    event: &T,
    scoped: impl FnOnce(Event) -> Event,
    missed: &str,
) {
    let published = match event.to_payload() {
        Ok(payload) => ctx
            .publish(scoped(Event::new(ctx.now(), payload)))
            .await
            .map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = published {
        tracing::warn!(%error, topic = T::TOPIC, missed, "could not announce a change");
    }
}
