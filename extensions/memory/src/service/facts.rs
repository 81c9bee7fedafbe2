//! Writing facts: saving, remembering for a user, typed memories, corrections, supersession
//! of near-duplicates, and the people facts are about.

use chrono::{DateTime, Utc};
use mnemo_kernel::ToolScope;
use mnemo_ner_api::ExtractedEntity;
use serde_json::Map;

use super::{MemoryService, Written};
use crate::error::{MemoryError, Result};
use crate::store::{NewMemory, Person};
use crate::text::{is_stopword, terms};
use crate::types::{
    ExternalId, Memory, MemoryKind, MemoryType, Origin, SearchRequest, SessionKey, Subject,
};

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
    /// remembering); consolidation leaves this off and lets the LLM judge contradictions. A
    /// model's words never supersede what someone stated ([`Origin::may_supersede`]).
    pub supersede: bool,
    /// Whose words it is.
    pub origin: Origin,
    /// Since when it is true in the world, where known (the turns it was drawn from); `None` =
    /// since it is saved.
    pub valid_from: Option<DateTime<Utc>>,
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

impl MemoryService {
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
                    quarantine: self.quarantine_for(&fact.content),
                    origin: fact.origin,
                    valid_from: fact.valid_from,
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
                fact.origin,
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
    /// superseded by `new_id`, whose words are `origin`'s; a model's words leave what someone
    /// stated alone. Returns how many.
    pub(super) async fn supersede_similar(
        &self,
        new_id: &str,
        origin: Origin,
        content: &str,
        user_id: Option<&str>,
        chat_id: Option<&str>,
        subject_ids: &[String],
    ) -> Result<usize> {
        let Some(embedder) = self.vector_embedder().await else {
            return Ok(0);
        };
        let searcher = &self.state()?.searcher;
        let Some(vector) = searcher.query_vector(&embedder, content).await? else {
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
                        && origin.may_supersede(memory.origin)
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
        crate::people::find_person(self.store()?.as_ref(), owner, reference).await
    }

    /// The owner's person that `external` anchors; another owner's never.
    ///
    /// # Errors
    /// The store fails.
    pub async fn person_by_external_id(
        &self,
        owner: &str,
        external: &ExternalId,
    ) -> Result<Option<Person>> {
        self.store()?.person_by_external_id(owner, external).await
    }

    /// Checks a fact's subjects for `owner` before anything is written (see
    /// [`crate::people::check_subjects`]): each names someone, and no external id conflicts
    /// with the owner's people.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] naming the subject and the problem; or the store fails.
    pub async fn check_subjects(
        &self,
        owner: &str,
        content: &str,
        subjects: &[Subject],
    ) -> Result<()> {
        let name_hint = self.person_hint(content);
        crate::people::check_subjects(
            self.store()?.as_ref(),
            owner,
            subjects,
            name_hint.as_deref(),
        )
        .await
    }

    /// The first person the fast entity extraction finds in `content`: the name of a person
    /// a subject knows only by relation ("my wife's name is Sarah").
    fn person_hint(&self, content: &str) -> Option<String> {
        self.fast_entities(content)
            .into_iter()
            .find(|entity| entity.entity_type == mnemo_ner_api::EntityType::Person)
            .map(|entity| entity.canonical)
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
        crate::people::resolve_or_create_person(self.store()?.as_ref(), owner, reference, name_hint)
            .await
    }

    /// Every person the owner told us about.
    ///
    /// # Errors
    /// The store fails.
    pub async fn get_known_people(&self, owner: &str) -> Result<Vec<Person>> {
        self.store()?.known_people(owner).await
    }

    /// Stores a fact about `subjects` for the caller; returns its id and the subjects' names.
    /// A subject's known external id names its person whatever they are called; an unknown one
    /// anchors the person named. A shared fact in a chat is visible to the whole chat;
    /// otherwise it is personal.
    ///
    /// # Errors
    /// The content is invalid, a subject names nobody or its external id conflicts with the
    /// caller's people (nothing is written then), or the store fails.
    pub async fn remember(
        &self,
        scope: &ToolScope,
        content: &str,
        subjects: &[Subject],
        expires_at: Option<DateTime<Utc>>,
        shared: bool,
    ) -> Result<(String, Vec<String>)> {
        self.check_content("content", content)?;
        // Checked before anything is written: a refused fact leaves no new person behind.
        if let Some(expires_at) = expires_at {
            if expires_at <= self.now()? {
                return Err(MemoryError::Invalid(format!(
                    "`expires_at` {} is not in the future",
                    expires_at.to_rfc3339()
                )));
            }
        }
        let origin = self.origin_for(scope, content, Written::Statement).await?;
        let name_hint = self.person_hint(content);
        let store = self.store()?;
        crate::people::check_subjects(
            store.as_ref(),
            &scope.user_id,
            subjects,
            name_hint.as_deref(),
        )
        .await?;
        let mut subject_ids = Vec::new();
        let mut names = Vec::new();
        for subject in subjects {
            if let Some((person, _)) = crate::people::resolve_subject(
                store.as_ref(),
                &scope.user_id,
                subject,
                name_hint.as_deref(),
            )
            .await?
            {
                // "my wife" and "Sarah" may be one person: linked and named once.
                if !subject_ids.contains(&person.id) {
                    subject_ids.push(person.id);
                    names.push(person.name);
                }
            }
        }
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
                expires_at,
                shared,
                memory_type: Some("fact".to_owned()),
                supersede: true,
                origin,
                ..FactInput::default()
            })
            .await?;
        Ok((id, names))
    }

    /// Seed 001's typed store: `fact` (permanent), `context` (until the end of the day; a
    /// `key` in the metadata replaces that key's earlier value) or `conversation` (30 days).
    ///
    /// # Errors
    /// Invalid content, or the store fails.
    pub async fn store_typed(
        &self,
        scope: &ToolScope,
        memory_type: MemoryType,
        content: &str,
        metadata: Map<String, serde_json::Value>,
    ) -> Result<String> {
        self.check_content("content", content)?;
        let written = if memory_type == MemoryType::Context {
            Written::KeyedValue
        } else {
            Written::Statement
        };
        let origin = self.origin_for(scope, content, written).await?;
        let now = self.now()?;
        let end_of_day = now
            .date_naive()
            .and_hms_opt(23, 59, 59)
            .map(|time| time.and_utc())
            .unwrap_or(now);
        let (kind, expires_at) = match memory_type {
            MemoryType::Fact => (MemoryKind::Fact, None),
            MemoryType::Context => (MemoryKind::Fact, Some(end_of_day)),
            MemoryType::Conversation => {
                (MemoryKind::Episode, Some(now + chrono::Duration::days(30)))
            }
        };
        let previous = match (
            memory_type,
            metadata.get("key").and_then(|key| key.as_str()),
        ) {
            // The value this one replaces: the one set in the same chat (or outside any).
            (MemoryType::Context, Some(key)) => self
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
                memory_type: Some(memory_type.as_str().to_owned()),
                attributes: metadata,
                supersede: memory_type == MemoryType::Fact,
                origin,
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
                        memory_type: Some(memory_type.as_str().to_owned()),
                        expires_at,
                        shared: false,
                        subject_ids: Vec::new(),
                        quarantine: self.quarantine_for(content),
                        origin,
                        valid_from: None,
                    },
                    &entities,
                )
                .await?;
            self.index_wakeup.notify_one();
            id
        };
        if let Some(previous) = previous.filter(|previous| origin.may_supersede(previous.origin)) {
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
            // Still about the same people, and the same kind of fact.
            memory_type: old.as_ref().and_then(|memory| memory.memory_type.clone()),
            expires_at: None,
            shared: false,
            subject_ids: old
                .as_ref()
                .map(|memory| memory.subject_ids.clone())
                .unwrap_or_default(),
            quarantine: self.quarantine_for(content),
            // A correction is the user's own word, whoever passed it on.
            origin: Origin::Told,
            // It was true all along: from the corrected fact's start.
            valid_from: old
                .as_ref()
                .and_then(|memory| memory.valid_from.or(Some(memory.event_time))),
        };
        let id = state
            .store
            .correct(old_id, user_id, &replacement, &entities)
            .await?;
        self.index_wakeup.notify_one();
        Ok(id)
    }

    /// Active, unfaded facts in `session`'s scope sharing words with `content`, best BM25 first (see
    /// [`crate::search::similar_facts`]): what a new fact of that session may repeat.
    ///
    /// # Errors
    /// The store fails.
    pub(crate) async fn similar_facts(
        &self,
        session: &SessionKey,
        content: &str,
        limit: usize,
    ) -> Result<Vec<Memory>> {
        let state = self.state()?;
        let stats = state.searcher.stats();
        crate::search::similar_facts(state.store.as_ref(), stats, session, content, limit).await
    }
}
