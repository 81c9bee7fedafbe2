//! The memory service as the published [`MemoryApi`]: each call delegates to the service and
//! its store, and the crate's own errors become the API's opaque [`MemoryApiError`].

use async_trait::async_trait;
use mnemo_memory_api::{
    DecayAction, DecayReport, EpisodePage, ListRequest, Memory, MemoryApi, MemoryApiError,
    MemoryKind, NewFact, Origin, PendingSession, Result, SavedFacts, SearchHit, SearchRequest,
    SessionKey, SkippedFact,
};
use mnemo_ner_api::Strategy;
use serde_json::Map;

use crate::error::MemoryError;

/// The most memories one `list_memories` call returns; more come page by page.
const MAX_LISTED: usize = 1_000;
use crate::service::{jaccard, word_set, FactInput, MemoryService};
use crate::store::NewMemory;

#[async_trait]
impl MemoryApi for MemoryService {
    async fn search(&self, request: SearchRequest) -> Result<Vec<SearchHit>> {
        Ok(MemoryService::search(self, &request).await?)
    }

    async fn list_memories(&self, request: ListRequest) -> Result<Vec<Memory>> {
        if !(1..=MAX_LISTED).contains(&request.limit) {
            return Err(MemoryApiError::Invalid(format!(
                "`limit` must be between 1 and {MAX_LISTED}, not {}",
                request.limit
            )));
        }
        Ok(self.store()?.list_memories(&request, self.now()?).await?)
    }

    async fn get_memory(&self, id: &str) -> Result<Option<Memory>> {
        Ok(self.store()?.get(id).await?)
    }

    async fn is_session_consolidated(&self, session: &SessionKey) -> Result<bool> {
        Ok(self.store()?.is_session_consolidated(session).await?)
    }

    async fn get_episodes_for_consolidation(
        &self,
        session: &SessionKey,
        offset: usize,
    ) -> Result<EpisodePage> {
        Ok(self
            .store()?
            .episodes_for_session(session, offset, self.config().consolidation_page_size)
            .await?)
    }

    async fn save_facts_batch(
        &self,
        session: &SessionKey,
        facts: Vec<NewFact>,
    ) -> Result<SavedFacts> {
        for (index, fact) in facts.iter().enumerate() {
            self.check_content(&format!("facts[{index}].content"), &fact.content)?;
        }
        let mut result = SavedFacts::default();
        let mut seen: Vec<String> = Vec::new();
        for fact in facts {
            let normalised = fact
                .content
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase();
            if seen.contains(&normalised) {
                result.skipped.push(SkippedFact {
                    content: fact.content,
                    reason: "duplicate_in_batch".to_owned(),
                });
                continue;
            }
            seen.push(normalised);
            // A fact the model drew from a conversation that carries instructions aimed at
            // the agent, hidden text or an imitated tool call is refused, not held back: it is
            // the model's words, not the user's, so nothing the user said is lost.
            if let Some(quarantine) = self.quarantine_for(&fact.content) {
                result.skipped.push(SkippedFact {
                    content: fact.content,
                    reason: format!("poisoned:{}", quarantine.reason),
                });
                continue;
            }
            let words = word_set(&fact.content);
            let similar = self.similar_facts(session, &fact.content, 10).await?;
            if let Some(existing) = similar.iter().find(|existing| {
                jaccard(&words, &word_set(&existing.content)) >= self.config().dedup_jaccard
            }) {
                result.skipped.push(SkippedFact {
                    content: fact.content,
                    reason: format!("similar_to:{}", existing.id),
                });
                continue;
            }
            // True since the latest turn it was drawn from was said, not since this run.
            let mut valid_from = None;
            let store = self.store()?;
            for source in &fact.source_ids {
                if let Some(turn) = store.get(source).await? {
                    if turn.user_id.as_deref() == Some(session.user_id.as_str()) {
                        valid_from = valid_from.max(Some(turn.event_time));
                    }
                }
            }
            let id = self
                .save_fact(FactInput {
                    user_id: Some(session.user_id.clone()),
                    chat_id: session.chat_id.clone(),
                    session_id: Some(session.session_id.clone()),
                    content: fact.content,
                    tags: fact.tags,
                    source_ids: fact.source_ids,
                    confidence: fact.confidence.unwrap_or(1.0),
                    origin: Origin::Inferred,
                    valid_from,
                    ..FactInput::default()
                })
                .await?;
            result.saved.push(id);
        }
        Ok(result)
    }

    async fn mark_session_consolidated(
        &self,
        session: &SessionKey,
        episode_ids: &[String],
    ) -> Result<()> {
        Ok(self
            .store()?
            .mark_session_consolidated(session, episode_ids, self.now()?)
            .await?)
    }

    async fn lease_consolidation(&self, session: &SessionKey, seconds: i64) -> Result<bool> {
        let now = chrono::Utc::now();
        Ok(self
            .store()?
            .lease_session(
                session,
                self.instance_id(),
                now + chrono::Duration::seconds(seconds),
                now,
            )
            .await?)
    }

    async fn release_consolidation(&self, session: &SessionKey) -> Result<()> {
        Ok(self
            .store()?
            .release_session(session, self.instance_id())
            .await?)
    }

    async fn record_consolidation_failure(&self, session: &SessionKey, error: &str) -> Result<i64> {
        Ok(self
            .store()?
            .record_consolidation_failure(session, error)
            .await?)
    }

    async fn get_pending_consolidations(&self) -> Result<Vec<PendingSession>> {
        Ok(self.store()?.pending_consolidations(None).await?)
    }

    async fn detect_conflicts(&self, fact_id: &str, limit: usize) -> Result<Vec<SearchHit>> {
        let fact = self
            .store()?
            .get(fact_id)
            .await?
            .ok_or_else(|| MemoryError::NotFound(format!("no memory `{fact_id}`")))?;
        let hits = MemoryService::search(
            self,
            &SearchRequest {
                query: fact.content.clone(),
                user_id: fact.user_id.clone(),
                kinds: vec![MemoryKind::Fact],
                limit: limit + 1,
                // A faded fact is out of the context: a new fact does not retire it.
                exclude_faded: true,
                ..SearchRequest::default()
            },
        )
        .await?;
        Ok(hits
            .into_iter()
            .filter(|hit| hit.memory.id != fact.id)
            .take(limit)
            .collect())
    }

    async fn resolve_conflict(&self, old_fact_id: &str, new_fact_id: &str) -> Result<()> {
        Ok(self.resolve_contradiction(old_fact_id, new_fact_id).await?)
    }

    async fn run_decay(&self, threshold: f64, action: DecayAction) -> Result<DecayReport> {
        // Decay counts from the last recall: the recalls noted so far first.
        self.flush_recalls().await?;
        Ok(self.store()?.decay(threshold, action, self.now()?).await?)
    }

    fn accurate_ner_available(&self) -> bool {
        self.state
            .get()
            .and_then(|state| state.ner.as_ref())
            .is_some_and(|ner| ner.accurate_available())
    }

    async fn get_memories_for_entity_enrichment(
        &self,
        kinds: &[MemoryKind],
        max_entity_count: usize,
        max_attempts: i64,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        Ok(self
            .store()?
            .memories_for_enrichment(kinds, max_entity_count, max_attempts, limit)
            .await?)
    }

    async fn count_enrichments_given_up(
        &self,
        kinds: &[MemoryKind],
        max_attempts: i64,
    ) -> Result<u64> {
        Ok(self
            .store()?
            .enrichments_given_up(kinds, max_attempts)
            .await?)
    }

    async fn enrich_memory_entities(&self, memory_id: &str) -> Result<usize> {
        let state = self.state()?;
        let memory = state
            .store
            .get(memory_id)
            .await?
            .ok_or_else(|| MemoryError::NotFound(format!("no memory `{memory_id}`")))?;
        let ner = state
            .ner
            .as_ref()
            .ok_or_else(|| MemoryError::Invalid("the ner extension is not enabled".to_owned()))?;
        let entities = match ner.extract(&memory.content, Strategy::Accurate).await {
            Ok(entities) => entities,
            Err(error) => {
                state.store.record_enrichment_failure(memory_id).await?;
                return Err(MemoryApiError::Invalid(error.to_string()));
            }
        };
        Ok(state
            .store
            .add_entities(memory_id, &entities, Some(state.ctx.now()))
            .await?)
    }

    async fn save_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
        content: &str,
        source_ids: Vec<String>,
        tags: Vec<String>,
    ) -> Result<String> {
        self.check_content("content", content)?;
        let state = self.state()?;
        let now = state.ctx.now();
        let id = state
            .store
            .insert_memory(
                &NewMemory {
                    kind: MemoryKind::Reflection,
                    content: content.trim().to_owned(),
                    session_id: None,
                    user_id: user_id.map(str::to_owned),
                    chat_id: chat_id.map(str::to_owned),
                    event_time: now,
                    created_at: now,
                    source_role: None,
                    source_ids,
                    tags,
                    attributes: Map::new(),
                    decay_rate: 0.0,
                    confidence: 1.0,
                    memory_type: None,
                    expires_at: None,
                    shared: false,
                    subject_ids: Vec::new(),
                    quarantine: self.quarantine_for(content),
                    origin: Origin::Reflected,
                    valid_from: None,
                },
                &[],
            )
            .await?;
        self.reflections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
        self.index_wakeup.notify_one();
        Ok(id)
    }

    async fn get_latest_reflection(
        &self,
        user_id: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Option<Memory>> {
        Ok(self.cached_reflection(user_id, chat_id).await?)
    }

    async fn get_recent_memories_for_reflection(
        &self,
        user_id: Option<&str>,
        days: i64,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let since = self.now()? - chrono::Duration::days(days.max(0));
        Ok(self.store()?.recent_memories(user_id, since, limit).await?)
    }
}
