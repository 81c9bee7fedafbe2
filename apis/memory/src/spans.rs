//! The names of the `tracing` spans the memory service opens, for hosts that turn spans into
//! traces and metrics (`mnemo-telemetry`); the kernel's own are in `mnemo_kernel::spans`. A
//! span whose work failed records `error.type` (`mnemo_kernel::spans::ERROR_TYPE`).
//!
//! The memory operations also carry the OpenTelemetry GenAI conventions' memory attributes
//! (`mnemo_kernel::spans::gen_ai`): `gen_ai.operation.name` and `gen_ai.memory.record.count`.
//! They keep their names (`memory.ingest`, `memory.search`) rather than take the conventions'
//! (`create_memory`, `search_memory`), so that the queries and dashboards built on them still
//! work.

/// Storing one conversation event, or one batch of them, on the hot path (field
/// [`INGEST_OUTCOME`]); `gen_ai.operation.name` is `create_memory`, `gen_ai.memory.record.count`
/// the events it was given.
pub const INGEST: &str = "memory.ingest";
/// The field of an [`INGEST`] span that says what became of the event: `stored`, `skipped`
/// (stored before, or not a turn) or `error`.
pub const INGEST_OUTCOME: &str = "mnemo.ingest.outcome";
/// One search, from the candidate lists to the loaded hits (fields `mnemo.search.mode`,
/// `mnemo.search.limit`, `mnemo.search.hits`); the lists and the fusion are spans under it.
/// `gen_ai.operation.name` is `search_memory`, `gen_ai.memory.record.count` the hits.
pub const SEARCH: &str = "memory.search";
/// One forget, with what was derived from it (`gen_ai.operation.name` `delete_memory`,
/// `gen_ai.memory.record.count` the memories removed, `mnemo.forget.receipt` the receipt's id).
pub const FORGET: &str = "memory.forget";
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
