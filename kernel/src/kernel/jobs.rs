//! Jobs: the kernel's record of each job's runs, running one on demand or when it is due,
//! and advancing virtual time through every due run.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{panic_message, Kernel, KernelInner};
use crate::clock::Clock;
use crate::error::KernelError;
use crate::extension::{JobClaims, JobHistory, JobSpec};
use crate::schedule::CronSchedule;

/// One run of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRun {
    /// The job's name.
    pub job: String,
    /// When it started, by the kernel's clock.
    pub at: DateTime<Utc>,
    /// When it ended, by the kernel's clock: what it made was made between `at` and this.
    pub finished_at: DateTime<Utc>,
    /// The job's one-line report, or why it failed.
    pub outcome: Result<String, String>,
    /// How many of its items the run failed on, as the job counted them (0 when the whole run
    /// failed: see `outcome`).
    pub failed_items: u64,
}

/// How many runs [`Kernel::job_runs`] keeps, over all jobs.
pub const KEPT_JOB_RUNS: usize = 1_000;

/// How often one job ran since the kernel started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobTotals {
    /// Runs, failed or not.
    pub runs: u64,
    /// Runs that failed or panicked.
    pub failures: u64,
}

/// A job as the kernel keeps it: whose it is, when it is due, whether it runs, how often it ran.
pub(super) struct JobEntry {
    pub(super) extension: usize,
    pub(super) spec: JobSpec,
    pub(super) schedule: CronSchedule,
    pub(super) next_due: Mutex<Option<DateTime<Utc>>>,
    pub(super) running: tokio::sync::Mutex<()>,
    pub(super) runs: AtomicU64,
    pub(super) failures: AtomicU64,
}

/// One job's real-time loop: sleep until it is due, run it, and again, until shutdown.
async fn run_on_schedule(
    weak: std::sync::Weak<KernelInner>,
    index: usize,
    shutdown: CancellationToken,
) {
    // The due time last run: a run that ends before the wall clock reaches it (the clock is
    // slewed, or the timer woke early) must not be given the same due time again.
    let mut last_due: Option<DateTime<Utc>> = None;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let job = &inner.jobs[index];
        let now = inner.ctx.now();
        let after = last_due.map_or(now, |last| last.max(now));
        let Some(due) = job.schedule.next_after(after) else {
            tracing::warn!(job = %job.spec.name, "the cron expression is never due again");
            return;
        };
        let name = job.spec.name.clone();
        drop(inner);
        let wait = (due - now).to_std().unwrap_or_default();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let Some(inner) = weak.upgrade() else { return };
        if inner.stopped.load(Ordering::Acquire) {
            return;
        }
        last_due = Some(due);
        if let Some(claims) = inner.ctx.services().get::<dyn JobClaims>() {
            match claims.claim_run(&name, due).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(job = %name, %due, "another instance ran this run");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(job = %name, %error, "cannot claim the run; running it anyway");
                }
            }
        }
        let kernel = Kernel { inner };
        if let Err(error) = kernel.run_job(&name).await {
            tracing::warn!(job = %name, %error, "scheduled job could not run");
        }
    }
}

impl Kernel {
    /// Every job as (extension, spec), in registration order.
    pub fn jobs(&self) -> Vec<(String, JobSpec)> {
        self.inner
            .jobs
            .iter()
            .map(|job| {
                (
                    self.inner.extensions[job.extension].name().to_owned(),
                    job.spec.clone(),
                )
            })
            .collect()
    }

    /// The last runs of every job (at most [`KEPT_JOB_RUNS`]), oldest first. A long-running
    /// kernel keeps no more; [`Kernel::job_totals`] counts every run.
    pub fn job_runs(&self) -> Vec<JobRun> {
        self.inner
            .job_runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// How often the job `name` ran and failed since start, or `None` for no such job.
    pub fn job_totals(&self, name: &str) -> Option<JobTotals> {
        let job = self.inner.jobs.iter().find(|job| job.spec.name == name)?;
        Some(JobTotals {
            runs: job.runs.load(Ordering::Relaxed),
            failures: job.failures.load(Ordering::Relaxed),
        })
    }

    /// Runs the job `name` now. Two runs of one job never overlap: a second caller waits.
    ///
    /// # Errors
    /// [`KernelError::UnknownJob`]. A job that fails is not an error here: see [`JobRun::outcome`].
    pub async fn run_job(&self, name: &str) -> Result<JobRun, KernelError> {
        let job = self
            .inner
            .jobs
            .iter()
            .find(|job| job.spec.name == name)
            .ok_or_else(|| KernelError::UnknownJob(name.to_owned()))?;
        let _running = job.running.lock().await;
        let extension = &self.inner.extensions[job.extension];
        let at = self.inner.ctx.now();
        let span = tracing::info_span!(
            crate::spans::JOB,
            extension = %extension.name(),
            job = %name,
            outcome = tracing::field::Empty,
            failed_items = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let outcome = match extension.scheduler_provider() {
            None => Err("the extension has no scheduler role".to_owned()),
            Some(provider) => {
                match AssertUnwindSafe(provider.run_job(&self.inner.ctx, name))
                    .catch_unwind()
                    .instrument(span.clone())
                    .await
                {
                    Ok(Ok(report)) => Ok(report),
                    Ok(Err(error)) => Err(error.to_string()),
                    Err(panic) => Err(format!("panicked: {}", panic_message(panic.as_ref()))),
                }
            }
        };
        match &outcome {
            Ok(report) => {
                tracing::info!(job = %name, report = %report.summary, failed = report.failed, "job done");
            }
            Err(error) => tracing::warn!(job = %name, %error, "job failed"),
        }
        let failed_items = outcome.as_ref().map_or(0, |report| report.failed);
        span.record(
            crate::spans::JOB_OUTCOME,
            match &outcome {
                Ok(_) if failed_items == 0 => "ok",
                Ok(_) => "partial",
                Err(_) => "failed",
            },
        );
        span.record("failed_items", crate::spans::count(failed_items));
        if outcome.is_err() {
            span.record(crate::spans::ERROR_TYPE, "job_failed");
        }
        drop(span);
        let run = JobRun {
            job: name.to_owned(),
            at,
            finished_at: self.inner.ctx.now(),
            outcome: outcome.map(|report| report.summary),
            failed_items,
        };
        job.runs.fetch_add(1, Ordering::Relaxed);
        if run.outcome.is_err() {
            job.failures.fetch_add(1, Ordering::Relaxed);
        }
        {
            let mut runs = self
                .inner
                .job_runs
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if runs.len() == KEPT_JOB_RUNS {
                runs.pop_front();
            }
            runs.push_back(run.clone());
        }
        if let Some(history) = self.inner.ctx.services().get::<dyn JobHistory>() {
            if let Err(error) = history.record_run(&run).await {
                tracing::warn!(job = %name, %error, "cannot record the run in the job history");
            }
        }
        Ok(run)
    }

    /// The last `limit` runs of every job, newest first: from the lasting [`JobHistory`] when an
    /// extension keeps one (shared by the instances on one store, and kept across restarts),
    /// else from this kernel's own record since it started.
    pub async fn job_history(&self, limit: usize) -> Vec<JobRun> {
        if let Some(history) = self.inner.ctx.services().get::<dyn JobHistory>() {
            match history.recent_runs(limit).await {
                Ok(runs) => return runs,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the job history; showing this process's runs");
                }
            }
        }
        let mut runs = self.job_runs();
        runs.reverse();
        runs.truncate(limit);
        runs
    }

    /// Moves the virtual clock to `target`, firing every job that comes due on the way, in time
    /// order, exactly once per due time, with the clock standing at the due time while it runs.
    ///
    /// # Errors
    /// [`KernelError::NotVirtualClock`] on the system clock; [`KernelError::ClockBackwards`].
    pub async fn advance_to(&self, target: DateTime<Utc>) -> Result<Vec<JobRun>, KernelError> {
        let clock = self
            .inner
            .virtual_clock
            .as_ref()
            .ok_or(KernelError::NotVirtualClock)?;
        let now = clock.now();
        if target < now {
            return Err(KernelError::ClockBackwards { now, target });
        }
        self.settle().await;
        let mut runs = Vec::new();
        loop {
            let mut earliest: Option<(usize, DateTime<Utc>)> = None;
            for (index, job) in self.inner.jobs.iter().enumerate() {
                let due = *job
                    .next_due
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Some(due) = due {
                    if due <= target && earliest.is_none_or(|(_, best)| due < best) {
                        earliest = Some((index, due));
                    }
                }
            }
            let Some((index, due)) = earliest else { break };
            clock.set(due);
            let job = &self.inner.jobs[index];
            *job.next_due
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = job.schedule.next_after(due);
            let name = job.spec.name.clone();
            runs.push(self.run_job(&name).await?);
            self.settle().await;
        }
        clock.set(target);
        Ok(runs)
    }

    /// Moves the virtual clock forward by `by`; see [`Kernel::advance_to`].
    ///
    /// # Errors
    /// As [`Kernel::advance_to`].
    pub async fn advance_by(&self, by: chrono::Duration) -> Result<Vec<JobRun>, KernelError> {
        let target = self.inner.ctx.now() + by;
        self.advance_to(target).await
    }

    /// True when the kernel runs on a virtual clock.
    pub fn is_virtual_clock(&self) -> bool {
        self.inner.virtual_clock.is_some()
    }

    pub(super) async fn start_scheduler(&self) -> Result<(), KernelError> {
        if self.inner.jobs.is_empty() {
            return Ok(());
        }
        if self.inner.virtual_clock.is_some() {
            let now = self.inner.ctx.now();
            for job in &self.inner.jobs {
                *job.next_due
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) =
                    job.schedule.next_after(now);
            }
            return Ok(());
        }
        // Real time: one task per job sleeps until the job's next due time by the same cron
        // evaluation that virtual time uses (`CronSchedule::next_after`), so both agree.
        let mut tasks = Vec::with_capacity(self.inner.jobs.len());
        for (index, job) in self.inner.jobs.iter().enumerate() {
            let weak = Arc::downgrade(&self.inner);
            let shutdown = self.inner.ctx.shutdown_token();
            let span = tracing::info_span!("cron", job = %job.spec.name);
            tasks.push(tokio::spawn(
                run_on_schedule(weak, index, shutdown).instrument(span),
            ));
        }
        *self
            .inner
            .cron_tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tasks;
        tracing::info!(jobs = self.inner.jobs.len(), "cron scheduler started");
        Ok(())
    }
}
