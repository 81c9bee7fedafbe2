//! The kernel's lifecycle: the builder, which builds the enabled extensions from config, wires
//! their services, tools and jobs and starts them, and the shutdown that stops them again.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{ContextInner, JobEntry, Kernel, KernelContext, KernelInner};
use crate::clock::{Clock, SystemClock, VirtualClock};
use crate::config::{Config, ConfigError, LlmProvider};
use crate::error::{ExtensionError, KernelError};
use crate::extension::{Extension, ExtensionRegistry, Registrar, ToolSpec};
use crate::llm::openai::OpenAiClient;
use crate::llm::scripted::ScriptedLlm;
use crate::llm::LlmClient;
use crate::router::Router;
use crate::schedule::CronSchedule;
use crate::services::Services;

/// The least time an extension is given to stop, even past the shutdown's deadline: enough to
/// close its files.
const LEAST_STOP: Duration = Duration::from_millis(200);

/// Configures and starts a [`Kernel`].
pub struct KernelBuilder {
    registry: ExtensionRegistry,
    config: Config,
    clock: Option<Arc<dyn Clock>>,
    virtual_clock: Option<Arc<VirtualClock>>,
    llm: Option<Arc<dyn LlmClient>>,
    data_dir: Option<PathBuf>,
    scheduler: bool,
}

impl KernelBuilder {
    /// Runs on a virtual clock starting at `start`: jobs fire only through [`Kernel::advance_to`].
    pub fn virtual_clock(mut self, start: DateTime<Utc>) -> Self {
        let clock = Arc::new(VirtualClock::new(start));
        self.clock = Some(clock.clone());
        self.virtual_clock = Some(clock);
        self
    }

    /// Uses this language model instead of the one in `[llm]`.
    pub fn llm(mut self, llm: Arc<dyn LlmClient>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Keeps data here instead of `[kernel] data_dir`.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Starts without the scheduler: no job comes due by itself (on either clock), and jobs run
    /// only through [`Kernel::run_job`]. For short commands that must not start a job that
    /// happens to come due while they run.
    pub fn without_scheduler(mut self) -> Self {
        self.scheduler = false;
        self
    }

    /// Builds every extension in the config, registers and starts the enabled ones.
    ///
    /// # Errors
    /// An unknown extension or key, a bad value (all reported at once), a duplicate tool, job or
    /// service, a bad cron expression, or an extension that fails to start.
    pub async fn start(self) -> Result<Kernel, KernelError> {
        let KernelBuilder {
            registry,
            config,
            clock,
            virtual_clock,
            llm,
            data_dir,
            scheduler,
        } = self;

        let mut problems = Vec::new();
        let mut extensions: Vec<Arc<dyn Extension>> = Vec::new();
        for section in &config.extensions {
            let Some(factory) = registry.get(&section.name) else {
                if !section.enabled {
                    // A switched-off extension this host does not have (an example that is no
                    // longer built in, one of another host's) changes nothing: say so, go on.
                    tracing::warn!(
                        extension = %section.name,
                        "[extensions.{}] is switched off and this host has no such extension; ignored",
                        section.name
                    );
                    continue;
                }
                problems.push(format!(
                    "unknown extension `{}` in [extensions.{}]; known extensions: {}",
                    section.name,
                    section.name,
                    registry.names().join(", ")
                ));
                continue;
            };
            // Disabled sections are checked too, so a typo never hides until the day they are enabled.
            match (factory.build)(section) {
                Ok(extension) if section.enabled => extensions.push(extension),
                Ok(_) => {}
                Err(err) => problems.extend(err.problems),
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError {
                file: config.file.clone(),
                problems,
            }
            .into());
        }

        let mut services = Services::default();
        for extension in &extensions {
            let mut registrar = Registrar {
                extension: extension.name(),
                services: &mut services,
                duplicates: Vec::new(),
            };
            extension
                .register(&mut registrar)
                .map_err(|err| ExtensionError::new(extension.name(), err))?;
            if let Some((api, first)) = registrar.duplicates.into_iter().next() {
                return Err(KernelError::Duplicate {
                    what: "service",
                    name: api,
                    first,
                    second: extension.name().to_owned(),
                });
            }
        }

        let llm: Option<Arc<dyn LlmClient>> = match llm {
            Some(llm) => Some(llm),
            None => match config.llm.provider {
                LlmProvider::None => None,
                LlmProvider::Openai => Some(Arc::new(OpenAiClient::new(&config.llm)?)),
                LlmProvider::Scripted => Some(Arc::new(ScriptedLlm::new())),
            },
        };
        let data_dir = data_dir.unwrap_or_else(|| config.data_dir());
        std::fs::create_dir_all(&data_dir).map_err(|source| KernelError::Io {
            context: format!("cannot create the data directory {}", data_dir.display()),
            source,
        })?;

        let router = Router::new(config.kernel.queue_capacity);
        let ctx = KernelContext {
            inner: Arc::new(ContextInner {
                clock: clock.unwrap_or_else(|| Arc::new(SystemClock)),
                router: router.clone(),
                services,
                llm,
                data_dir,
                shutdown: CancellationToken::new(),
            }),
        };

        let mut tools = Vec::new();
        let mut tool_index: HashMap<String, usize> = HashMap::new();
        let mut jobs: Vec<JobEntry> = Vec::new();
        for (index, extension) in extensions.iter().enumerate() {
            if let Some(provider) = extension.tool_provider() {
                for spec in provider.tools() {
                    if let Some(&first) = tool_index.get(&spec.name) {
                        return Err(duplicate(
                            "tool",
                            &spec.name,
                            &extensions,
                            tools_owner(&tools, first),
                            index,
                        ));
                    }
                    tool_index.insert(spec.name.clone(), tools.len());
                    tools.push((index, spec));
                }
            }
            if let Some(provider) = extension.scheduler_provider() {
                for spec in provider.jobs() {
                    if let Some(first) = jobs.iter().find(|job| job.spec.name == spec.name) {
                        return Err(duplicate(
                            "job",
                            &spec.name,
                            &extensions,
                            first.extension,
                            index,
                        ));
                    }
                    let schedule =
                        CronSchedule::parse(&spec.cron).map_err(|source| KernelError::Cron {
                            job: spec.name.clone(),
                            extension: extension.name().to_owned(),
                            source,
                        })?;
                    jobs.push(JobEntry {
                        extension: index,
                        spec,
                        schedule,
                        next_due: Mutex::new(None),
                        running: tokio::sync::Mutex::new(()),
                        runs: AtomicU64::new(0),
                        failures: AtomicU64::new(0),
                    });
                }
            }
        }

        let kernel = Kernel {
            inner: Arc::new(KernelInner {
                ctx,
                config,
                extensions,
                tools,
                tool_index,
                jobs,
                virtual_clock,
                job_runs: Mutex::new(VecDeque::new()),
                subscriber_tasks: Mutex::new(Vec::new()),
                cron_tasks: Mutex::new(Vec::new()),
                stopped: AtomicBool::new(false),
            }),
        };
        kernel.spawn_subscribers();

        for (started, extension) in kernel.inner.extensions.iter().enumerate() {
            let span = tracing::info_span!("extension", extension = %extension.name());
            if let Err(err) = extension.start(&kernel.inner.ctx).instrument(span).await {
                let error = ExtensionError::new(extension.name(), err);
                tracing::error!(%error, "start failed; stopping the extensions already started");
                kernel
                    .stop_extensions(started, Instant::now() + kernel.shutdown_grace())
                    .await;
                kernel.inner.ctx.router().close();
                return Err(error.into());
            }
            tracing::info!(extension = %extension.name(), "started");
        }
        if scheduler {
            kernel.start_scheduler().await?;
        } else {
            tracing::debug!("started without the scheduler");
        }
        Ok(kernel)
    }
}

fn tools_owner(tools: &[(usize, ToolSpec)], position: usize) -> usize {
    tools[position].0
}

fn duplicate(
    what: &'static str,
    name: &str,
    extensions: &[Arc<dyn Extension>],
    first: usize,
    second: usize,
) -> KernelError {
    KernelError::Duplicate {
        what,
        name: name.to_owned(),
        first: extensions[first].name().to_owned(),
        second: extensions[second].name().to_owned(),
    }
}

impl Kernel {
    /// A builder for a kernel hosting the extensions of `registry` that `config` enables.
    pub fn builder(registry: ExtensionRegistry, config: Config) -> KernelBuilder {
        KernelBuilder {
            registry,
            config,
            clock: None,
            virtual_clock: None,
            llm: None,
            data_dir: None,
            scheduler: true,
        }
    }

    /// Stops the first `count` extensions in reverse start order, each within the time left
    /// until `deadline` (and at least [`LEAST_STOP`], so that a late one still closes its files).
    async fn stop_extensions(&self, count: usize, deadline: Instant) {
        for extension in self.inner.extensions[..count].iter().rev() {
            let allowed = deadline
                .saturating_duration_since(Instant::now())
                .max(LEAST_STOP);
            match tokio::time::timeout(allowed, extension.stop(&self.inner.ctx)).await {
                Ok(Ok(())) => tracing::info!(extension = %extension.name(), "stopped"),
                Ok(Err(error)) => {
                    tracing::warn!(extension = %extension.name(), %error, "stop failed")
                }
                Err(_) => tracing::warn!(
                    extension = %extension.name(), allowed_ms = allowed.as_millis() as u64,
                    "did not stop within the grace period"
                ),
            }
        }
    }

    /// The configured grace period of a shutdown (`[kernel] shutdown_grace_ms`).
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.inner.config.kernel.shutdown_grace_ms)
    }

    /// Shuts down within the configured grace period ([`Kernel::shutdown_by`]).
    pub async fn shutdown(&self) {
        self.shutdown_by(Instant::now() + self.shutdown_grace())
            .await;
    }

    /// Shuts down by `deadline`: cancels background work, stops the scheduler, drains every
    /// event queue, then stops the extensions in reverse start order and drops the published
    /// APIs ([`KernelContext::services`] finds none afterwards). Each step takes what time is
    /// left; what does not finish by then is left (a job is stopped, an event stays unhandled,
    /// an embedding batch in flight is dropped: queues that matter are durable). Calling it again
    /// does nothing.
    pub async fn shutdown_by(&self, deadline: Instant) {
        if self.inner.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.ctx.inner.shutdown.cancel();
        let cron_tasks = std::mem::take(
            &mut *self
                .inner
                .cron_tasks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        // A job that is running finishes in time, or is stopped, so that none works on while
        // the extensions stop; none starts after this.
        let aborts: Vec<_> = cron_tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout_at(deadline, futures::future::join_all(cron_tasks))
            .await
            .is_err()
        {
            tracing::warn!("a scheduled job did not finish within the grace period; stopped");
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
        self.inner.ctx.router().close();
        let tasks = std::mem::take(
            &mut *self
                .inner
                .subscriber_tasks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let drained = tokio::time::timeout_at(deadline, futures::future::join_all(tasks)).await;
        if drained.is_err() {
            tracing::warn!("event queues did not drain within the grace period");
        }
        self.stop_extensions(self.inner.extensions.len(), deadline)
            .await;
        // A service that holds the context (the memory service does) would otherwise keep the
        // context, and with it every service and the embedding model, alive after the kernel
        // is dropped: about 140 MB a kernel in `mnemo eval`, which starts one per case.
        self.inner.ctx.inner.services.clear();
    }
}
