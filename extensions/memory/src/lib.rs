//! The `memory` extension: the store of episodes, facts, reflections and entities, hybrid
//! search (BM25 full text, nearest neighbours of the stored vectors, the user's own sentences
//! and entity match, fused by weighted score fusion by default or by Reciprocal Rank Fusion),
//! context injection before each turn, and the agent's memory tools.
//!
//! Layout: `store/` holds every SQL statement, behind the storage traits of `store/backend/`
//! (`MemoryBackend`, implemented by the SQLite store, `store/sqlite/`, and the PostgreSQL store,
//! `store/postgres/`, for several servers on one database); `search/` is search policy (candidate
//! lists, query building, fusion, ranking), one `Searcher` that asks the store through
//! `SearchSource`, only the store methods it calls; `service/` ties storage and its `Searcher`
//! to the embedding and ner services, and `api_impl.rs` publishes the service as the
//! [`MemoryApi`].
//!
//! Roles: [`mnemo_kernel::EventHandler`] (every `user_message` and `agent_response` becomes an
//! episode on the hot path: no model call, no embedding), [`mnemo_kernel::ContextProvider`],
//! [`mnemo_kernel::ToolProvider`]. It publishes [`MemoryApi`] for the maintenance and reflection
//! extensions and `memory.session_completed` ([`SessionCompleted`]) on the bus. It uses the
//! `embedding` and `ner` extensions' services when they are enabled, and degrades to full text +
//! entities when they are not. A background indexer embeds new memories in batches.

mod api_impl;
mod config;
mod context;
mod error;
mod host_impl;
mod migrate;
mod people;
pub mod screening;
mod search;
mod sentence_keys;
mod service;
mod store;
mod text;
mod tools;
mod vector_index;

use std::sync::Arc;

use async_trait::async_trait;
use mnemo_kernel::{
    BoxError, ConfigError, ContextProvider, ContextRequest, Event, EventHandler, Extension,
    ExtensionFactory, ExtensionSection, JobReport, JobSpec, KernelContext, Registrar,
    SchedulerProvider, ToolError, ToolProvider, ToolSet, TOPIC_AGENT_RESPONSE, TOPIC_USER_MESSAGE,
};

pub use config::{ForgetMode, MemoryConfig, ToolProfile, DATABASE_URL_ENV};
pub use error::{MemoryError, Result};
pub use migrate::{copy_store, CopyReport, StoreLocation};
pub use mnemo_memory_api::{
    content_event_id, CandidateList, DecayAction, DecayReport, EntityInfo, EntitySummary,
    EpisodePage, ForgetReceipt, FusionMethod, HostLimits, IngestedEvent, KeyRecord, ListMatch,
    ListRequest, McpSessionRecord, Memory, MemoryApi, MemoryApiError, MemoryForgotten, MemoryHost,
    MemoryKind, MemoryStats, MemoryType, NewFact, OwnerSummary, PendingSession, Person, Quarantine,
    ReceiptEntry, Restoration, SavedFacts, ScoreBreakdown, SearchHit, SearchMode, SearchRequest,
    SessionCompleted, SessionKey, SkippedFact, UserErased,
};
pub use sentence_keys::sentence_keys;
pub use service::{FactInput, MemoryService};
pub use store::{IndexItem, IntegrityReport, MirrorSize, StoredTurn, VectorStatus};

/// The API crate's data types, under the path this crate's modules name them by.
mod types {
    pub(crate) use mnemo_memory_api::*;
}

/// The config key, folder and extension name.
pub const NAME: &str = mnemo_memory_api::EXTENSION_NAME;
/// The job that soft-deletes expired memories.
pub const JOB_EXPIRE: &str = "expire_memories";

/// A cosine similarity below every real one: a search with it as its floor keeps every
/// neighbour.
const NO_SIMILARITY_FLOOR: f32 = -1.0;

/// The `memory` extension.
#[derive(Debug)]
pub struct MemoryExtension {
    service: Arc<MemoryService>,
    tools: ToolSet,
}

impl MemoryExtension {
    /// The extension with `config`, offering the tools of its `tools` profile; the database
    /// opens at start.
    ///
    /// # Errors
    /// A tool's config limits do not fit its arguments (a bug, reported at start-up).
    pub fn new(config: MemoryConfig) -> Result<Self, ToolError> {
        let profile = config.tools;
        let service = Arc::new(MemoryService::new(config));
        let tools = tools::tool_set(&service, profile)?;
        Ok(Self { service, tools })
    }

    /// The service behind the extension (store, search, API).
    pub fn service(&self) -> &Arc<MemoryService> {
        &self.service
    }
}

/// The factory the `mnemo` host registers.
pub fn factory() -> ExtensionFactory {
    ExtensionFactory {
        name: NAME,
        description: "long-term memory store, hybrid search, context and memory tools",
        build: |section: &ExtensionSection| {
            let config: MemoryConfig = section.parse_checked()?;
            let extension = MemoryExtension::new(config)
                .map_err(|error| ConfigError::new(section.file.clone(), error.to_string()))?;
            Ok(Arc::new(extension) as Arc<dyn Extension>)
        },
    }
}

#[async_trait]
impl Extension for MemoryExtension {
    fn name(&self) -> &str {
        NAME
    }

    fn register(&self, registrar: &mut Registrar<'_>) -> Result<(), BoxError> {
        registrar.provide::<dyn MemoryApi>(self.service.clone());
        registrar.provide::<dyn MemoryHost>(self.service.clone());
        // The concrete service too, for hosts that drive it directly (commands, bench, eval).
        registrar.provide::<MemoryService>(self.service.clone());
        // Scheduled runs are claimed in the store, so that instances sharing it run each once,
        // and their outcomes are kept there, for every instance to read after any restart.
        registrar.provide::<dyn mnemo_kernel::JobClaims>(self.service.clone());
        registrar.provide::<dyn mnemo_kernel::JobHistory>(self.service.clone());
        Ok(())
    }

    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        self.service.open(ctx).await?;
        let expired = self.service.expire_now().await?;
        if expired > 0 {
            tracing::info!(expired, "expired memories removed at start-up");
        }
        self.service.start_indexer(ctx);
        self.service.start_recall_writer();
        Ok(())
    }

    async fn idle(&self, _ctx: &KernelContext) {
        self.service.index_pending().await;
    }

    async fn stop(&self, _ctx: &KernelContext) -> Result<(), BoxError> {
        self.service.close().await;
        Ok(())
    }

    fn context_provider(&self) -> Option<&dyn ContextProvider> {
        Some(self)
    }

    fn tool_provider(&self) -> Option<&dyn ToolProvider> {
        Some(&self.tools)
    }

    fn event_handler(&self) -> Option<&dyn EventHandler> {
        Some(self)
    }

    fn scheduler_provider(&self) -> Option<&dyn SchedulerProvider> {
        Some(self)
    }
}

#[async_trait]
impl EventHandler for MemoryExtension {
    fn topics(&self) -> Vec<String> {
        vec![
            TOPIC_USER_MESSAGE.to_owned(),
            TOPIC_AGENT_RESPONSE.to_owned(),
        ]
    }

    async fn handle(&self, _ctx: &KernelContext, event: &Event) -> Result<(), BoxError> {
        self.service.ingest(event).await?;
        Ok(())
    }
}

#[async_trait]
impl ContextProvider for MemoryExtension {
    async fn context(
        &self,
        _ctx: &KernelContext,
        request: &ContextRequest,
    ) -> Result<Option<String>, BoxError> {
        let config = self.service.config();
        let base = SearchRequest {
            query: request.prompt.clone(),
            user_id: Some(request.user_id.clone()),
            chat_id: request.chat_id.clone(),
            exclude_session: Some(request.session_id.clone()),
            // What decay faded stays out of the context until it is recalled; what the screen
            // quarantined, until it is released.
            exclude_faded: true,
            exclude_quarantined: true,
            // A context asked as of a past time recalls nothing now: it counts no access.
            touch: request.as_of.is_none(),
            as_of: request.as_of.map(|at| mnemo_memory_api::AsOf {
                at,
                axis: mnemo_memory_api::TimeAxis::Believed,
            }),
            ..SearchRequest::default()
        };
        let facts = if config.context_limit == 0 {
            Vec::new()
        } else {
            let wanted = SearchRequest {
                kinds: vec![MemoryKind::Fact],
                limit: config.context_limit,
                ..base.clone()
            };
            let similar = self.service.search(&wanted).await?;
            if similar.len() < config.context_limit
                && self
                    .service
                    .holds_at_most(&wanted, config.context_fill_below)
                    .await?
            {
                // A small store: its best facts whether or not any is similar (seed 000).
                self.service
                    .search(&SearchRequest {
                        min_similarity: Some(NO_SIMILARITY_FLOOR),
                        ..wanted
                    })
                    .await?
            } else {
                similar
            }
        };
        let mut messages = if config.context_messages == 0 {
            Vec::new()
        } else {
            self.service
                .search(&SearchRequest {
                    kinds: vec![MemoryKind::Episode],
                    mode: SearchMode::Vector,
                    limit: config.context_messages,
                    ..base.clone()
                })
                .await?
        };
        // An earlier question is the most similar message to the same question asked again,
        // but the statement that answers it is what the agent needs: statements come first,
        // each group in its ranking's order.
        messages.sort_by_key(|hit| context::is_question(&hit.memory.content));
        let store = self.service.store()?;
        // Seed 001's window: the last `context_window` turns, each a user message and the
        // agent's reply, so twice as many messages.
        let window = config.context_window.saturating_mul(2);
        let turns = if window == 0 {
            Vec::new()
        } else {
            store
                .recent_turns(
                    &SessionKey::new(
                        request.user_id.clone(),
                        request.chat_id.clone(),
                        request.session_id.clone(),
                    ),
                    window + request.history_messages + 1,
                )
                .await?
        };
        let turns = conversation_so_far(turns, request, window);
        let people = store
            .people_told_in(&request.user_id, request.chat_id.as_deref())
            .await?;
        let subject_ids: Vec<String> = facts
            .iter()
            .flat_map(|hit| hit.memory.subject_ids.clone())
            .collect();
        let subject_names = store.entity_names(&subject_ids).await?;
        // The weekly insight the caller may see: their personal one, or in a chat the newer of
        // that and the chat's own (built from the chat's memories only).
        let personal = self
            .service
            .cached_reflection(Some(&request.user_id), None)
            .await?;
        let reflection = match &request.chat_id {
            None => personal,
            Some(chat) => {
                let in_chat = self
                    .service
                    .cached_reflection(Some(&request.user_id), Some(chat))
                    .await?;
                [personal, in_chat]
                    .into_iter()
                    .flatten()
                    .max_by_key(|reflection| reflection.event_time)
            }
        };
        Ok(context::render(&context::ContextParts {
            people: &people,
            facts: &facts,
            subject_names: &subject_names,
            messages: &messages,
            turns: &turns,
            reflection: reflection.as_ref(),
            token_budget: config.context_token_budget,
        }))
    }
}

/// The turns of "This conversation so far": the session's latest turns, without quarantined
/// ones, without the message being answered (sent to the model as the user message; whether it is stored yet depends on
/// how far the bus got) and without the host's chat history (sent as messages), at most
/// `window`.
fn conversation_so_far(
    mut turns: Vec<Memory>,
    request: &ContextRequest,
    window: usize,
) -> Vec<Memory> {
    if turns.last().is_some_and(|last| {
        last.source_role.as_deref() == Some("user") && last.content.trim() == request.prompt.trim()
    }) {
        turns.pop();
    }
    turns.truncate(turns.len().saturating_sub(request.history_messages));
    turns.retain(|turn| turn.quarantine.is_none());
    let excess = turns.len().saturating_sub(window);
    turns.drain(..excess);
    turns
}

#[async_trait]
impl SchedulerProvider for MemoryExtension {
    fn jobs(&self) -> Vec<JobSpec> {
        vec![JobSpec {
            name: JOB_EXPIRE.to_owned(),
            cron: self.service.config().expiry_cron.clone(),
            description: "soft-delete memories whose expiry has passed".to_owned(),
        }]
    }

    async fn run_job(&self, _ctx: &KernelContext, name: &str) -> Result<JobReport, BoxError> {
        if name != JOB_EXPIRE {
            return Err(format!("unknown job `{name}`").into());
        }
        let expired = self.service.expire_now().await?;
        Ok(JobReport::new(format!(
            "{expired} expired memories removed"
        )))
    }
}
