//! The kernel: builds extensions from config, wires their roles, and owns the router, clock and jobs.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::FutureExt;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::{Clock, SystemClock, VirtualClock};
use crate::config::{Config, ConfigError, LlmProvider};
use crate::error::{ExtensionError, KernelError};
use crate::event::Event;
use crate::extension::{
    ContextRequest, Extension, ExtensionRegistry, Registrar, ToolError, ToolScope, ToolSpec,
};
use crate::llm::openai::OpenAiClient;
use crate::llm::scripted::ScriptedLlm;
use crate::llm::LlmClient;
use crate::router::{PublishError, Router};
use crate::schedule::CronSchedule;
use crate::services::Services;

mod jobs;

use jobs::JobEntry;

/// The least time an extension is given to stop, even past the shutdown's deadline: enough to
/// close its files.
const LEAST_STOP: Duration = Duration::from_millis(200);
pub use jobs::{JobRun, JobTotals, KEPT_JOB_RUNS};

/// What every extension receives: clock, bus, services, model, data directory and shutdown signal.
///
/// Cloning is cheap.
#[derive(Clone)]
pub struct KernelContext {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    clock: Arc<dyn Clock>,
    router: Router,
    services: Services,
    llm: Option<Arc<dyn LlmClient>>,
    data_dir: PathBuf,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for KernelContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelContext")
            .field("data_dir", &self.inner.data_dir)
            .finish()
    }
}

impl KernelContext {
    /// The current time by the kernel's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.inner.clock.now()
    }

    /// The kernel's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Publishes an event on the bus.
    ///
    /// # Errors
    /// [`PublishError::Closed`] during shutdown.
    pub async fn publish(&self, event: Event) -> Result<Event, PublishError> {
        self.inner.router.publish(event).await
    }

    /// Publishes an event to every subscriber but the extension `handled_by`, which has handled
    /// it already ([`Router::publish_except`]).
    ///
    /// # Errors
    /// [`PublishError::Closed`] during shutdown.
    pub async fn publish_except(
        &self,
        event: Event,
        handled_by: &str,
    ) -> Result<Event, PublishError> {
        self.inner.router.publish_except(event, handled_by).await
    }

    /// The router, for counts and [`Router::settle`].
    pub fn router(&self) -> &Router {
        &self.inner.router
    }

    /// The typed APIs other extensions published.
    pub fn services(&self) -> &Services {
        &self.inner.services
    }

    /// The language model, if one is configured and can answer now
    /// ([`LlmClient::available`]).
    pub fn llm(&self) -> Option<Arc<dyn LlmClient>> {
        self.inner.llm.clone().filter(|llm| llm.available())
    }

    /// The directory extensions keep their files in; it exists.
    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    /// Cancelled when the kernel begins to shut down; background tasks `select!` on it.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }
}

struct KernelInner {
    ctx: KernelContext,
    config: Config,
    extensions: Vec<Arc<dyn Extension>>,
    tools: Vec<(usize, ToolSpec)>,
    tool_index: HashMap<String, usize>,
    jobs: Vec<JobEntry>,
    virtual_clock: Option<Arc<VirtualClock>>,
    /// The last [`KEPT_JOB_RUNS`] runs, oldest first.
    job_runs: Mutex<VecDeque<JobRun>>,
    subscriber_tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The real-time scheduler's tasks, one per job.
    cron_tasks: Mutex<Vec<JoinHandle<()>>>,
    stopped: AtomicBool,
}

/// A running kernel. Cloning is cheap; every clone is the same kernel.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<KernelInner>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("extensions", &self.extension_names())
            .finish()
    }
}

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

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
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

    /// The context extensions receive.
    pub fn context(&self) -> &KernelContext {
        &self.inner.ctx
    }

    /// The configuration the kernel was started with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Names of the running extensions, in start order.
    pub fn extension_names(&self) -> Vec<String> {
        self.inner
            .extensions
            .iter()
            .map(|extension| extension.name().to_owned())
            .collect()
    }

    /// Publishes an event and returns it with its id.
    ///
    /// # Errors
    /// [`KernelError::Publish`] during shutdown.
    pub async fn publish(&self, event: Event) -> Result<Event, KernelError> {
        Ok(self.inner.ctx.publish(event).await?)
    }

    /// Publishes an event to every extension but `handled_by`, which has handled it already
    /// (a host that stored a turn through the memory service to acknowledge it after commit).
    ///
    /// # Errors
    /// [`KernelError::Publish`] during shutdown.
    pub async fn publish_except(
        &self,
        event: Event,
        handled_by: &str,
    ) -> Result<Event, KernelError> {
        Ok(self.inner.ctx.publish_except(event, handled_by).await?)
    }

    /// Waits until every published event has been handled and every extension's background
    /// work is done ([`Extension::idle`]); repeats until both are quiet at once.
    pub async fn settle(&self) {
        loop {
            self.inner.ctx.router().settle().await;
            for extension in &self.inner.extensions {
                extension.idle(&self.inner.ctx).await;
            }
            if self.inner.ctx.router().is_quiet() {
                break;
            }
        }
    }

    /// Every tool of every enabled extension.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.inner
            .tools
            .iter()
            .map(|(_, spec)| spec.clone())
            .collect()
    }

    /// Calls a tool by name as the agent would: arguments are checked against its schema first.
    ///
    /// # Errors
    /// [`ToolError`] naming an unknown tool, a bad argument, or the tool's own failure.
    pub async fn call_tool(
        &self,
        scope: &ToolScope,
        name: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let Some(&position) = self.inner.tool_index.get(name) else {
            return Err(ToolError::UnknownTool(name.to_owned()));
        };
        let (extension_index, spec) = &self.inner.tools[position];
        let arguments = if arguments.is_null() {
            Value::Object(serde_json::Map::new())
        } else {
            arguments
        };
        scope
            .validate()
            .map_err(|error| ToolError::invalid(name, format!("the caller's {error}")))?;
        crate::schema::check(&spec.parameters, &arguments)
            .map_err(|reason| ToolError::invalid(name, reason))?;
        let extension = &self.inner.extensions[*extension_index];
        let Some(provider) = extension.tool_provider() else {
            return Err(ToolError::UnknownTool(name.to_owned()));
        };
        let span = tracing::info_span!("tool", extension = %extension.name(), tool = %name);
        match AssertUnwindSafe(provider.call_tool(&self.inner.ctx, scope, name, arguments))
            .catch_unwind()
            .instrument(span)
            .await
        {
            Ok(result) => result,
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(extension = %extension.name(), tool = %name, %message, "tool panicked");
                Err(ToolError::failed(name, "the tool panicked; see the log"))
            }
        }
    }

    /// Every context block for `request`, in extension order, as (extension, block).
    ///
    /// A provider that fails or panics is logged and left out.
    pub async fn gather_context(&self, request: &ContextRequest) -> Vec<(String, String)> {
        let span = tracing::info_span!(
            crate::spans::CONTEXT_ASSEMBLY,
            blocks = tracing::field::Empty
        );
        let blocks = self.gather_blocks(request).instrument(span.clone()).await;
        span.record("blocks", crate::spans::count(blocks.len()));
        blocks
    }

    /// Every context block, each provider's call in its own `context` span.
    async fn gather_blocks(&self, request: &ContextRequest) -> Vec<(String, String)> {
        let mut blocks = Vec::new();
        for extension in &self.inner.extensions {
            let Some(provider) = extension.context_provider() else {
                continue;
            };
            let span = tracing::info_span!("context", extension = %extension.name());
            match AssertUnwindSafe(provider.context(&self.inner.ctx, request))
                .catch_unwind()
                .instrument(span)
                .await
            {
                Ok(Ok(Some(block))) if !block.trim().is_empty() => {
                    blocks.push((extension.name().to_owned(), block));
                }
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(extension = %extension.name(), %error, "context provider failed; block left out");
                }
                Err(panic) => {
                    let message = panic_message(panic.as_ref());
                    tracing::error!(extension = %extension.name(), %message, "context provider panicked; block left out");
                }
            }
        }
        blocks
    }

    fn spawn_subscribers(&self) {
        let mut tasks = Vec::new();
        for extension in &self.inner.extensions {
            let Some(handler) = extension.event_handler() else {
                continue;
            };
            let router = self.inner.ctx.router().clone();
            let mut receiver = router.subscribe(extension.name(), handler.topics());
            let extension = extension.clone();
            let ctx = self.inner.ctx.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(event) = receiver.recv().await {
                    if let Some(handler) = extension.event_handler() {
                        let span = tracing::info_span!(
                            "event",
                            extension = %extension.name(),
                            event_id = %event.id,
                            topic = %event.topic()
                        );
                        match AssertUnwindSafe(handler.handle(&ctx, &event))
                            .catch_unwind()
                            .instrument(span)
                            .await
                        {
                            Ok(Ok(())) => {}
                            Ok(Err(error)) => tracing::warn!(
                                extension = %extension.name(), event_id = %event.id, %error,
                                "event handler failed"
                            ),
                            Err(panic) => tracing::error!(
                                extension = %extension.name(), event_id = %event.id,
                                message = %panic_message(panic.as_ref()),
                                "event handler panicked"
                            ),
                        }
                    }
                    router.delivered();
                }
            }));
        }
        *self
            .inner
            .subscriber_tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tasks;
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
