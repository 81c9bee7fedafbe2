//! The command line's grammar: the global options, every subcommand with its arguments, and
//! the parsers of `--user` and `--chat`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use mnemo_memory::MemoryKind;

/// Long-term memory for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "mnemo", version, about)]
pub(crate) struct Cli {
    /// Configuration file; default: ./config.toml if present, else the built-in defaults.
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Data directory; overrides `[kernel] data_dir`.
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Replay scenario files and check their expectations; ends with `N passed, M failed`.
    Replay {
        /// Scenario files (JSONL).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print every step and every passing expectation too.
        #[arg(long)]
        steps: bool,
    },
    /// Replay the bundled demo conversation and show what the kernel did at each step.
    Demo,
    /// Measure retrieval quality on LoCoMo-format data: recall@k, hit@k, MRR per mode.
    Eval {
        /// The JSONL file (e.g. ../shared/eval/locomo.dev.jsonl).
        #[arg(long)]
        data: PathBuf,
        /// Cut-offs, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = vec![1usize, 5, 10])]
        k: Vec<usize>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Also write each question's candidate lists (fts, vector, entity, with their scores)
        /// to this JSONL file.
        #[arg(long)]
        dump: Option<PathBuf>,
        /// Also run every case in ONE store, each as a user of its own, and report both.
        #[arg(long)]
        shared_store: bool,
        /// More users for the shared store: every case of this file (e.g. LongMemEval_S
        /// haystacks), stored and never asked.
        #[arg(long, requires = "shared_store")]
        distractors: Option<PathBuf>,
    },
    /// Measure the poisoning screen on labelled texts (JSONL `{id, label, kind, text}`, e.g.
    /// tests/data/injection/test.jsonl): attacks and benign texts held back, and its time.
    EvalScreening {
        /// The labelled sets, each reported on its own; a file of `mnemo eval`'s conversations
        /// (e.g. ../shared/eval/locomo.dev.jsonl) gives its turns as benign texts.
        #[arg(long, required = true, num_args = 1..)]
        data: Vec<PathBuf>,
        /// Screenings of each text, for the timing.
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// List every text screened wrongly.
        #[arg(long)]
        misses: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure ingest and search latency, database size and peak memory for N memories.
    Bench {
        /// Memories in the store.
        #[arg(long, default_value_t = 10_000)]
        memories: usize,
        /// Ingests timed, the last ones; the store is filled before them with `synchronous = off` (default: all).
        #[arg(long)]
        timed_ingest: Option<usize>,
        /// Distinct queries per round.
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Search rounds; the report gives the median of the rounds' percentiles.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Distinct texts embedded by the real model; other memories get mixes of their vectors.
        #[arg(long, default_value_t = 2_000)]
        real_embeddings: usize,
        /// Owners the memories are spread over; each search is one owner's.
        #[arg(long, default_value_t = 1)]
        users: usize,
        /// Keep the store in this (empty or new) directory instead of a temporary one.
        #[arg(long)]
        keep: Option<PathBuf>,
        /// Measure search only, on a store an earlier `--keep` run left (no ingest figures); vectors it lacks are filled first.
        #[arg(long, conflicts_with = "keep")]
        reuse: Option<PathBuf>,
        /// Forgets timed last, each of a turn with two facts drawn on it; they remove the turns and the facts drawn from them alone (default: 20, none on a store of --keep or --reuse).
        #[arg(long)]
        forgets: Option<usize>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure ingest and search over HTTP (`mnemo serve`'s routes, N concurrent clients) on a
    /// store that `mnemo bench --keep DIR` built, beside the same searches in process.
    BenchHttp {
        /// The store directory from `mnemo bench --keep DIR`.
        #[arg(long)]
        store: PathBuf,
        /// Concurrent clients.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Searches in each single-client phase (the concurrent phase sends clients/4 times as many).
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Events ingested over HTTP.
        #[arg(long, default_value_t = 2_000)]
        ingests: usize,
        /// Servers, each with its own kernel on the store, as behind a load balancer.
        #[arg(long, default_value_t = 1)]
        instances: usize,
        /// Then one user imports this many turns while another says one thing: how long until
        /// that turn has its vector (0: skip).
        #[arg(long, default_value_t = 0)]
        import_turns: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Talk to an agent on the configured LLM, with memory context and tools; /new starts a new session.
    Chat {
        /// The user you are; default `[kernel] default_user`.
        #[arg(long, value_parser = user_id)]
        user: Option<String>,
        /// The chat the conversation happens in, if any.
        #[arg(long, value_parser = chat_id)]
        chat: Option<String>,
    },
    /// Serve the enabled extensions' tools over the Model Context Protocol on stdio.
    Mcp {
        /// The user the tools act for; default `[kernel] default_user`.
        #[arg(long, value_parser = user_id)]
        user: Option<String>,
        /// The chat the tools act in, if any.
        #[arg(long, value_parser = chat_id)]
        chat: Option<String>,
    },
    /// Serve memory over HTTP: the JSON API under /v1 (OpenAPI at /openapi.json) and MCP at
    /// /mcp, for many users at once, behind API keys (`mnemo keys create`).
    Serve {
        /// Address and port to listen on; port 0 picks a free one.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Seconds a /v1 request may take before it is answered with `timeout`.
        #[arg(long, default_value_t = 30)]
        request_timeout_secs: u64,
        /// The largest request body, in bytes.
        #[arg(long, default_value_t = 16 << 20)]
        max_body_bytes: usize,
        /// A host name clients reach the server by (for MCP's Host check), beside loopback and
        /// the listen address; repeatable.
        #[arg(long = "allowed-host")]
        allowed_hosts: Vec<String>,
    },
    /// API keys for `mnemo serve`: stored hashed in the memory store, shared by every server on it.
    Keys {
        #[command(subcommand)]
        command: crate::keys::KeysCommand,
    },
    /// Store a fact for a user.
    Remember {
        /// The fact.
        text: String,
        /// Whose memory it is.
        #[arg(long, value_parser = user_id)]
        user: String,
        /// Who the fact is about ("my wife", "Sarah"); repeatable.
        #[arg(long = "subject")]
        subjects: Vec<String>,
        /// The chat it is said in: it belongs to that chat, and searches in other chats do not
        /// find it.
        #[arg(long, value_parser = chat_id)]
        chat: Option<String>,
        /// Share it with everyone in the chat instead of keeping it the user's own.
        #[arg(long, requires = "chat")]
        shared: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Search a user's memory.
    Search {
        /// What to look for.
        query: String,
        /// Whose memory.
        #[arg(long, value_parser = user_id)]
        user: String,
        /// The chat the user is in.
        #[arg(long, value_parser = chat_id)]
        chat: Option<String>,
        /// Only this kind: episode, fact or reflection.
        #[arg(long, value_parser = memory_kind)]
        kind: Option<MemoryKind>,
        /// Most results.
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON: an array of {id, kind, content, score, ...}.
        #[arg(long)]
        json: bool,
    },
    /// Forget a memory by id, with what was derived from it (facts drawn only from it, reflections
    /// built on it), as `[extensions.memory] forget` says, and print the receipt: removed from the store, its
    /// indexes and caches ("hard"), or soft-deleted ("soft"; `mnemo restore` brings it back).
    Forget {
        /// The memory's id.
        id: String,
        /// Remove it for good whatever `forget` says, a soft-deleted memory too.
        #[arg(long)]
        purge: bool,
        /// Print the receipt as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring back a soft-deleted memory (forgotten under `forget = "soft"`, expired, corrected
    /// or decayed): active again, and given its vector by the indexer.
    Restore {
        /// The memory's id.
        id: String,
    },
    /// Release a quarantined memory: the memory screen held it back from the agent's context
    /// (instructions aimed at the agent, hidden characters, an imitated tool call); released,
    /// it may be put into a context again. `mnemo search` flags quarantined hits.
    Release {
        /// The memory's id.
        id: String,
    },
    /// Remove everything stored about one user: memories, entities, people, sessions.
    ForgetUser {
        /// The user's id.
        #[arg(value_parser = user_id)]
        user: String,
    },
    /// Import conversation events (JSONL, as in replay) or an export; idempotent.
    Import {
        /// The JSONL file.
        file: PathBuf,
    },
    /// Store conversation events from standard input (JSONL, each with an id), acknowledging
    /// each on standard output once it is on disk; resending unacknowledged events is safe.
    Ingest,
    /// Export memory: lossless JSONL (import restores it exactly) or readable markdown.
    Export {
        /// jsonl or markdown.
        #[arg(long, default_value = "jsonl")]
        format: String,
        /// Only this user's memory.
        #[arg(long, value_parser = user_id)]
        user: Option<String>,
    },
    /// Copy the memory store into an empty one, between SQLite and PostgreSQL either way, and
    /// check the copy row for row; run it with the server stopped.
    MigrateStore {
        /// The store to copy: sqlite:PATH or a postgres:// URL.
        #[arg(long)]
        from: String,
        /// The empty store to copy into (made if needed): sqlite:PATH or a postgres:// URL.
        #[arg(long)]
        to: String,
    },
    /// Re-embed memories after an embedding-model change (resumable, with progress).
    Reindex {
        /// Rebuild every vector even if the index matches the current model, embedding every
        /// text again (after changing `max_seq_len` or `max_passages`, or to read long texts
        /// stored before passages existed).
        #[arg(long)]
        all: bool,
    },
    /// Check the store: database file, full-text and vector indexes, recorded events.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Counts of memories by kind.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Scheduled jobs.
    Jobs {
        #[command(subcommand)]
        command: crate::jobs::JobsCommand,
    },
}

/// `--user`: a user id by the kernel's one id rule (the same as on the wire and in tool calls).
pub(crate) fn user_id(value: &str) -> Result<String, mnemo_kernel::EventError> {
    mnemo_kernel::check_id("user", value).map(|()| value.to_owned())
}

/// `--kind`: a kind of memory.
pub(crate) fn memory_kind(value: &str) -> Result<MemoryKind, String> {
    MemoryKind::parse(value)
        .ok_or_else(|| format!("`{value}` is not a kind of memory: episode, fact or reflection"))
}

/// `--chat`: a chat id by the kernel's one id rule.
pub(crate) fn chat_id(value: &str) -> Result<String, mnemo_kernel::EventError> {
    mnemo_kernel::check_id("chat", value).map(|()| value.to_owned())
}
