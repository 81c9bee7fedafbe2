//! The `mnemo` command line.

mod commands;
mod input;
mod keys;
mod mcp;
mod migrate_store;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use mnemo_devtools::bench::BenchOptions;
use mnemo_kernel::host::{Config, Kernel};

/// Long-term memory for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "mnemo", version, about)]
struct Cli {
    /// Configuration file; default: ./config.toml if present, else the built-in defaults.
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Data directory; overrides `[kernel] data_dir`.
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
        command: keys::KeysCommand,
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
        #[arg(long)]
        kind: Option<String>,
        /// Most results.
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON: an array of {id, kind, content, score, ...}.
        #[arg(long)]
        json: bool,
    },
    /// Forget a memory by id: removed from the store, its indexes and caches.
    Forget {
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
        command: JobsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum JobsCommand {
    /// List every job of the enabled extensions with its cron expression.
    List,
    /// Run one job now.
    Run {
        /// The job's name.
        name: String,
    },
    /// Give the sessions and memories that the jobs gave up on after repeated failures (a model
    /// outage used up `max_consolidation_attempts` or `max_enrichment_attempts`) a fresh start.
    Retry,
}

/// `--user`: a user id by the kernel's one id rule (the same as on the wire and in tool calls).
fn user_id(value: &str) -> Result<String, mnemo_kernel::EventError> {
    mnemo_kernel::check_id("user", value).map(|()| value.to_owned())
}

/// `--chat`: a chat id by the kernel's one id rule.
fn chat_id(value: &str) -> Result<String, mnemo_kernel::EventError> {
    mnemo_kernel::check_id("chat", value).map(|()| value.to_owned())
}

/// Sets up logging on stderr for every command, and for `serve` the traces and metrics that
/// `[telemetry]` asks for. Serving reads its config here, before any log line.
fn init_telemetry(cli: &Cli) -> anyhow::Result<mnemo_telemetry::Telemetry> {
    let log_filter = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let serve_config = match cli.command {
        Command::Serve { .. } => Some(load_config(cli)?),
        _ => None,
    };
    let telemetry = mnemo_telemetry::Telemetry::init(&mnemo_telemetry::TelemetryOptions {
        log_filter,
        ansi: colours_on_stderr(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ),
        traces: serve_config.as_ref().map(|config| &config.telemetry),
        metrics: serve_config.is_some(),
    })?;
    Ok(telemetry)
}

/// Whether log lines on stderr get ANSI colours: only on a terminal, and not when `NO_COLOR` is
/// set to anything but the empty string (<https://no-color.org>).
fn colours_on_stderr(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// The config text and the name it is reported under.
fn config_source(explicit: Option<&Path>) -> anyhow::Result<(String, String)> {
    let path = match explicit {
        Some(path) => Some(path.to_path_buf()),
        None => Some(PathBuf::from("config.toml")).filter(|path| path.is_file()),
    };
    match path {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            Ok((text, path.display().to_string()))
        }
        None => Ok((
            mnemo_host::DEFAULT_CONFIG.to_owned(),
            "<built-in config.toml>".to_owned(),
        )),
    }
}

fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let (text, file) = config_source(cli.config.as_deref())?;
    let mut config = Config::parse(&text, &file)?;
    config.apply_env(|key| std::env::var(key).ok());
    if let Some(dir) = &cli.data_dir {
        config.kernel.data_dir = Some(dir.clone());
    }
    Ok(config)
}

async fn jobs(cli: &Cli, command: &JobsCommand) -> anyhow::Result<bool> {
    let config = load_config(cli)?;
    let kernel = match command {
        JobsCommand::List | JobsCommand::Retry => commands::start_for_store(config).await?,
        // The job may need the model; but no other job starts beside the one asked for.
        JobsCommand::Run { .. } => {
            Kernel::builder(mnemo_host::builtin_extensions(), config)
                .without_scheduler()
                .start()
                .await?
        }
    };
    let ok = match command {
        JobsCommand::List => {
            let jobs = kernel.jobs();
            if jobs.is_empty() {
                println!("no jobs: no enabled extension schedules any");
            }
            for (extension, spec) in jobs {
                println!(
                    "{:<28} {:<14} {:<20} {}",
                    spec.name, spec.cron, extension, spec.description
                );
            }
            true
        }
        JobsCommand::Retry => {
            let reset = match commands::memory_service(&kernel) {
                Ok(service) => service.retry_given_up().await.map_err(anyhow::Error::from),
                Err(error) => Err(error),
            };
            match reset {
                Ok((sessions, memories)) => {
                    println!(
                        "{sessions} sessions and {memories} memories will be tried again by the \
                         next run of their job (execute_consolidation, execute_entity_enrichment)"
                    );
                    true
                }
                Err(error) => {
                    kernel.shutdown().await;
                    return Err(error);
                }
            }
        }
        JobsCommand::Run { name } => {
            let run = kernel.run_job(name).await;
            kernel.settle().await;
            match run {
                Ok(run) => match run.outcome {
                    Ok(report) => {
                        println!("{name}: {report}");
                        let failures = run.failed_items;
                        if failures > 0 {
                            eprintln!("mnemo: job {name} ran, but {failures} of its items failed");
                        }
                        failures == 0
                    }
                    Err(error) => {
                        eprintln!("mnemo: job {name} failed: {error}");
                        false
                    }
                },
                Err(error) => {
                    kernel.shutdown().await;
                    return Err(error.into());
                }
            }
        }
    };
    kernel.shutdown().await;
    Ok(ok)
}

async fn run(cli: Cli, metrics: Option<Arc<mnemo_telemetry::Metrics>>) -> anyhow::Result<bool> {
    match &cli.command {
        Command::Replay { files, steps } => {
            let (text, file) = config_source(cli.config.as_deref())?;
            mnemo_devtools::replay::run(text, file, files, *steps).await
        }
        Command::Demo => {
            let (text, file) = config_source(cli.config.as_deref())?;
            // With a real model configured ([llm] or MNEMO_LLM_*), it answers instead.
            let llm = load_config(&cli)?.llm;
            mnemo_devtools::replay::demo(text, file, llm).await
        }
        Command::Jobs { command } => jobs(&cli, command).await,
        Command::Chat { user, chat } => {
            let config = load_config(&cli)?;
            let user = user
                .clone()
                .unwrap_or_else(|| config.kernel.default_user.clone());
            commands::chat(config, &user, chat.as_deref()).await
        }
        Command::Remember {
            text,
            user,
            subjects,
            chat,
            shared,
            json,
        } => {
            commands::remember(
                load_config(&cli)?,
                text,
                user,
                subjects,
                chat.as_deref(),
                *shared,
                *json,
            )
            .await
        }
        Command::Search {
            query,
            user,
            chat,
            kind,
            limit,
            json,
        } => {
            commands::search(
                load_config(&cli)?,
                query,
                user,
                chat.as_deref(),
                kind.as_deref(),
                *limit,
                *json,
            )
            .await
        }
        Command::Forget { id } => commands::forget(load_config(&cli)?, id).await,
        Command::ForgetUser { user } => commands::forget_user(load_config(&cli)?, user).await,
        Command::Mcp { user, chat } => {
            let config = load_config(&cli)?;
            let user = user
                .clone()
                .unwrap_or_else(|| config.kernel.default_user.clone());
            let (kernel, sampling) = commands::start_serving(config).await?;
            mcp::serve(kernel, user, chat.clone(), sampling).await?;
            Ok(true)
        }
        Command::Serve {
            listen,
            request_timeout_secs,
            max_body_bytes,
            allowed_hosts,
        } => {
            let config = load_config(&cli)?;
            let options = mnemo_server::ServeOptions {
                listen: *listen,
                request_timeout: std::time::Duration::from_secs(*request_timeout_secs),
                max_body_bytes: *max_body_bytes,
                allowed_hosts: allowed_hosts.clone(),
                metrics,
                metrics_access: config.telemetry.metrics,
            };
            keys::serve(config, &options).await?;
            Ok(true)
        }
        Command::Keys { command } => keys::run(load_config(&cli)?, command).await,
        Command::Stats { json } => commands::stats(load_config(&cli)?, *json).await,
        Command::Check { json } => commands::check(load_config(&cli)?, *json).await,
        Command::Import { file } => commands::import(load_config(&cli)?, file).await,
        Command::Ingest => commands::ingest(load_config(&cli)?).await,
        Command::MigrateStore { from, to } => migrate_store::run(from, to).await,
        Command::Reindex { all } => commands::reindex(load_config(&cli)?, *all).await,
        Command::Export { format, user } => {
            commands::export(load_config(&cli)?, format, user.as_deref()).await
        }
        Command::Eval {
            data,
            k,
            json,
            dump,
            shared_store,
            distractors,
        } => {
            let config = load_config(&cli)?;
            let options = mnemo_devtools::eval::EvalOptions {
                data,
                ks: k,
                json: *json,
                dump: dump.as_deref(),
                shared_store: *shared_store,
                distractors: distractors.as_deref(),
            };
            mnemo_devtools::eval::run(&config, &options).await?;
            Ok(true)
        }
        Command::BenchHttp {
            store,
            clients,
            queries,
            ingests,
            instances,
            import_turns,
            json,
        } => {
            let options = mnemo_devtools::bench_http::HttpBenchOptions {
                instances: *instances,
                import_turns: *import_turns,
                store: store.clone(),
                clients: *clients,
                queries: *queries,
                ingests: *ingests,
                json: *json,
            };
            mnemo_devtools::bench_http::run(&load_config(&cli)?, &options).await?;
            Ok(true)
        }
        Command::Bench {
            memories,
            timed_ingest,
            queries,
            rounds,
            real_embeddings,
            users,
            keep,
            reuse,
            json,
        } => {
            let config = load_config(&cli)?;
            let options = BenchOptions {
                memories: *memories,
                timed_ingest: timed_ingest.unwrap_or(*memories),
                queries: *queries,
                rounds: *rounds,
                real_embeddings: *real_embeddings,
                users: *users,
                keep: keep.clone(),
                reuse: reuse.clone(),
                json: *json,
            };
            mnemo_devtools::bench::run(&config, &options).await?;
            Ok(true)
        }
    }
}

/// Fixes the thread count the embedding model's math library asks for. Unset, candle reads the
/// CPU list from `/proc` on every matrix product: about 1.4 ms of a 12 ms query embedding here.
/// Runs before any other thread exists, so that setting the variable races with nothing.
fn pin_thread_count() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
}

/// The error and the causes under it, each said once: many errors already include their cause's
/// words in their own message, which `{:#}` would repeat.
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

fn main() -> ExitCode {
    pin_thread_count();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mnemo: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        let cli = Cli::parse();
        let telemetry = match init_telemetry(&cli) {
            Ok(telemetry) => telemetry,
            Err(error) => {
                eprintln!("mnemo: {}", describe(&error));
                return ExitCode::FAILURE;
            }
        };
        let metrics = telemetry.metrics();
        let code = match run(cli, metrics).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(error) => {
                eprintln!("mnemo: {}", describe(&error));
                ExitCode::FAILURE
            }
        };
        // The last spans go out on this runtime, so before it stops.
        telemetry.shutdown();
        code
    });
    // Work still on the blocking threads (an embedding batch the shutdown's grace cut off) is
    // not waited for: what it was for stays queued in the store.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    code
}
