//! The names of the `tracing` spans the memory service opens, for hosts that turn spans into
//! traces and metrics (`mnemo-telemetry`); the kernel's own are in `mnemo_kernel::spans`. A
//! span whose work failed records `error.type` (`mnemo_kernel::spans::ERROR_TYPE`).

/// Storing one conversation event on the hot path (field [`INGEST_OUTCOME`]).
pub const INGEST: &str = "memory.ingest";
/// The field of an [`INGEST`] span that says what became of the event: `stored`, `skipped`
/// (stored before, or not a turn) or `error`.
pub const INGEST_OUTCOME: &str = "mnemo.ingest.outcome";
/// One search, from the candidate lists to the loaded hits (fields `mnemo.search.mode`,
/// `mnemo.search.limit`, `mnemo.search.hits`); the lists and the fusion are spans under it.
pub const SEARCH: &str = "memory.search";
/// The full-text candidate list of a search (field [`SEARCH_CANDIDATES`]).
pub const SEARCH_FTS: &str = "memory.search.fts";
/// The vector candidate list of a search: the query's embedding and the nearest memories.
pub const SEARCH_VECTOR: &str = "memory.search.vector";
/// The entity candidate list of a search: memories linked to the entities the query names.
pub const SEARCH_ENTITY: &str = "memory.search.entity";
/// The feedback candidate list of a search: the query vector moved towards its best first
/// matches' vectors, and its nearest memories.
pub const SEARCH_FEEDBACK: &str = "memory.search.feedback";
/// The sentence-key list of a search (a query in the first person): the turns the user spoke
/// whose best sentence is nearest the query's embedding.
pub const SEARCH_SENTENCES: &str = "memory.search.sentences";
/// Fusing the candidate lists and ranking the fused candidates.
pub const SEARCH_FUSION: &str = "memory.search.fusion";
/// The field of a list span: how many candidates the list gave.
pub const SEARCH_CANDIDATES: &str = "mnemo.search.candidates";
