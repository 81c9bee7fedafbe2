//! Hybrid search policy: which candidate lists to gather and how (FTS query building and
//! narrowing, the conversation-context list, the vector list, the entity co-mention walk), how
//! to shape a query that names a conversation's speakers or a period of time, how to fuse and rank the lists, and
//! the corpus statistics that steer it. [`Searcher`] does it all; the service holds one and
//! calls it. It holds no SQL: what it needs from storage it asks for through [`source::SearchSource`],
//! only the store methods search calls, which every `crate::store::MemoryBackend` provides;
//! the tests (`tests/`) run the real search over a small in-memory store that provides it.

mod agents_words;
mod candidates;
mod entities;
mod feedback;
pub(crate) mod fts_query;
mod full_text;
mod fusion;
mod query_vectors;
mod ranking;
mod searcher;
mod source;
mod speakers;
mod stats;
#[cfg(test)]
mod tests;
mod when;

#[cfg(test)]
pub(crate) use full_text::search_fts;
pub(crate) use full_text::similar_facts;
pub(crate) use ranking::traced;
pub(crate) use searcher::{SearchConfig, Searcher};
#[cfg(test)]
pub(crate) use stats::CorpusStats;

/// `list` as owned strings: the words and names the search tests pass around.
#[cfg(test)]
pub(crate) fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|item| (*item).to_owned()).collect()
}
