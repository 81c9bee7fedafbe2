//! The `mnemo` command line.

mod cli;
mod commands;
mod input;
mod jobs;
mod keys;
mod mcp;
mod migrate_store;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use mnemo_devtools::bench::BenchOptions;
use mnemo_kernel::host::Config;

use cli::{Cli, Command};
// The `--user` and `--chat` parsers, which `keys.rs` uses too.
use cli::{chat_id, user_id};

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
        Command::Jobs { command } => jobs::run(&cli, command).await,
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
                *kind,
                *limit,
                *json,
            )
            .await
        }
        Command::Forget { id, purge, json } => {
            commands::forget(load_config(&cli)?, id, *purge, *json).await
        }
        Command::Restore { id } => commands::restore(load_config(&cli)?, id).await,
        Command::Release { id } => commands::release(load_config(&cli)?, id).await,
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
        Command::EvalScreening {
            data,
            rounds,
            misses,
            json,
        } => {
            mnemo_devtools::screening_eval::run(
                &mnemo_devtools::screening_eval::ScreeningEvalOptions {
                    data,
                    rounds: *rounds,
                    misses: *misses,
                    json: *json,
                },
            )?;
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
            forgets,
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
                // Other benches read a kept store: it is not forgotten from unless asked.
                forgets: forgets.unwrap_or(if keep.is_some() || reuse.is_some() {
                    0
                } else {
                    20
                }),
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
