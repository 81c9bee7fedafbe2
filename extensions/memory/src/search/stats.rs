//! Corpus statistics cached between searches: how many memories the full-text index holds,
//! how often a query term occurs, and how many memories each entity is linked to. They steer
//! which terms and entities are worth searching, where a few minutes' drift changes nothing.
//!
//! The full-text figures are counted within the search's scope (its owner's memories, and in
//! a chat the chat's shared ones): a word common in other users' memories is no reason to
//! narrow one user's query, and one user's search steers the same whatever else the store
//! holds.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::fts_query::match_any;
use super::source::SearchSource;
use crate::error::Result;
use crate::store::TextScope;

/// How long a cached figure is trusted.
const STATS_TTL: Duration = Duration::from_secs(120);
/// Most cached term frequencies (and entity link counts); the cache starts over beyond this.
const STATS_MAX_TERMS: usize = 20_000;

/// A [`TextScope`] as a cache key.
type ScopeKey = (Option<String>, Option<String>);

fn scope_key(scope: TextScope<'_>) -> ScopeKey {
    (
        scope.user_id.map(str::to_owned),
        scope.chat_id.map(str::to_owned),
    )
}

/// The cached figures, each with when it was read.
#[derive(Debug, Default)]
struct Figures {
    /// Memories in the full-text index, by scope.
    documents: HashMap<ScopeKey, (i64, Instant)>,
    /// Memories with an entity link, by the entities' owner (`None`: any).
    linked_memories: HashMap<Option<String>, (i64, Instant)>,
    /// Memories with a term, by scope and term.
    frequencies: HashMap<(ScopeKey, String), (i64, Instant)>,
    /// Memories linked to each entity, by entity id.
    entity_links: HashMap<String, (i64, Instant)>,
}

/// A figure, unless it is older than [`STATS_TTL`].
fn fresh(entry: Option<&(i64, Instant)>) -> Option<i64> {
    entry
        .filter(|(_, at)| at.elapsed() < STATS_TTL)
        .map(|(value, _)| *value)
}

/// Corpus statistics read from the store and cached for [`STATS_TTL`].
#[derive(Debug, Default)]
pub(crate) struct CorpusStats {
    figures: Mutex<Figures>,
}

impl CorpusStats {
    fn figures(&self) -> MutexGuard<'_, Figures> {
        self.figures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets every figure: after memories were removed for good, nothing read before may
    /// describe them.
    pub(crate) fn clear(&self) {
        *self.figures() = Figures::default();
    }

    /// Rows in the full-text index within `scope`.
    pub(crate) async fn document_count<S: SearchSource + ?Sized>(
        &self,
        store: &S,
        scope: TextScope<'_>,
    ) -> Result<i64> {
        let key = scope_key(scope);
        if let Some(count) = fresh(self.figures().documents.get(&key)) {
            return Ok(count);
        }
        let count = store.fts_document_count(scope).await?;
        let mut figures = self.figures();
        if figures.documents.len() >= STATS_MAX_TERMS {
            figures.documents.clear();
        }
        figures.documents.insert(key, (count, Instant::now()));
        Ok(count)
    }

    /// Memories within `scope` whose text contains `term`.
    pub(crate) async fn term_frequency<S: SearchSource + ?Sized>(
        &self,
        store: &S,
        term: &str,
        scope: TextScope<'_>,
    ) -> Result<i64> {
        let key = (scope_key(scope), term.to_owned());
        if let Some(count) = fresh(self.figures().frequencies.get(&key)) {
            return Ok(count);
        }
        let Some(query) = match_any(&[term.to_owned()]) else {
            return Ok(0);
        };
        let count = store.fts_match_count(&query, scope).await?;
        let mut figures = self.figures();
        if figures.frequencies.len() >= STATS_MAX_TERMS {
            figures.frequencies.clear();
        }
        figures.frequencies.insert(key, (count, Instant::now()));
        Ok(count)
    }

    /// How many memories each of `entity_ids` is linked to (0 for none).
    pub(crate) async fn entity_link_counts<S: SearchSource + ?Sized>(
        &self,
        store: &S,
        entity_ids: &[String],
    ) -> Result<HashMap<String, i64>> {
        let mut counts: HashMap<String, i64> = HashMap::new();
        let mut missing = Vec::new();
        {
            let figures = self.figures();
            for id in entity_ids {
                match fresh(figures.entity_links.get(id)) {
                    Some(count) => {
                        counts.insert(id.clone(), count);
                    }
                    None => missing.push(id.clone()),
                }
            }
        }
        if !missing.is_empty() {
            let found = store.entity_link_counts(&missing).await?;
            let now = Instant::now();
            let mut figures = self.figures();
            if figures.entity_links.len() >= STATS_MAX_TERMS {
                figures.entity_links.clear();
            }
            for id in missing {
                let count = found.get(&id).copied().unwrap_or(0);
                figures.entity_links.insert(id.clone(), (count, now));
                counts.insert(id, count);
            }
        }
        Ok(counts)
    }

    /// Memories with at least one link to `owner`'s entities (`None`: to any).
    pub(crate) async fn linked_memory_count<S: SearchSource + ?Sized>(
        &self,
        store: &S,
        owner: Option<&str>,
    ) -> Result<i64> {
        let key = owner.map(str::to_owned);
        if let Some(count) = fresh(self.figures().linked_memories.get(&key)) {
            return Ok(count);
        }
        let count = store.linked_memory_count(owner).await?;
        let mut figures = self.figures();
        if figures.linked_memories.len() >= STATS_MAX_TERMS {
            figures.linked_memories.clear();
        }
        figures.linked_memories.insert(key, (count, Instant::now()));
        Ok(count)
    }
}
