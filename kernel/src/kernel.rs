//! The kernel: builds extensions from config, wires their roles, and owns the router, clock and jobs.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, VirtualClock};
use crate::config::Config;
use crate::error::KernelError;
use crate::event::Event;
use crate::extension::{Extension, ToolSpec};
use crate::llm::LlmClient;
use crate::router::{PublishError, Router};
use crate::services::Services;

mod dispatch;
mod jobs;
mod lifecycle;

use jobs::JobEntry;

pub use jobs::{JobRun, JobTotals, KEPT_JOB_RUNS};
pub use lifecycle::KernelBuilder;

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

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

impl Kernel {
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
}
