//! `mnemo jobs`: the enabled extensions' scheduled jobs: list them, run one now, or retry what
//! they gave up on.

use clap::Subcommand;
use mnemo_kernel::host::Kernel;

use crate::cli::Cli;
use crate::{commands, load_config};

#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
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

/// `mnemo jobs …`; false when the job run failed, or failed on some of its items.
pub(crate) async fn run(cli: &Cli, command: &JobsCommand) -> anyhow::Result<bool> {
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
