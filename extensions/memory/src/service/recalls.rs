//! Recall counts kept off the request path. A search notes which memories it returned (how
//! many times, and when last); a background task writes what was noted once a second, one
//! statement per distinct (times, second) pair, and [`MemoryService::close`] and decay write
//! the rest first. So 20 searches no longer make 20 write transactions (each waiting for the
//! store's writer). The one write a search still makes is rare: a faded memory it recalls is
//! back in the context at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, DurationRound as _, TimeDelta, Utc};

use super::MemoryService;
use crate::error::Result;

/// How often noted recalls are written.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Recalls noted and not yet written: by memory id, how many times and the last moment.
type Pending = HashMap<String, (u32, DateTime<Utc>)>;

/// Recalls noted and not yet written, and the lock one flush at a time holds.
#[derive(Debug, Default)]
pub(crate) struct Recalls {
    pending: Mutex<Pending>,
    /// Held for a whole flush: a second flush (decay's, close's) waits for the one running, so
    /// that it finds written what that one had taken.
    flushing: tokio::sync::Mutex<()>,
    /// Tells the background writer to write what is left and stop.
    stop: tokio::sync::Notify,
}

impl Recalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts `ids` as recalled `times` more times, the last at `at`.
    pub(crate) fn note(&self, ids: &[String], at: DateTime<Utc>) {
        self.add(ids.iter().cloned(), 1, at);
    }

    fn add(&self, ids: impl IntoIterator<Item = String>, times: u32, at: DateTime<Utc>) {
        let mut pending = self.lock();
        for id in ids {
            let entry = pending.entry(id).or_insert((0, at));
            entry.0 = entry.0.saturating_add(times);
            entry.1 = entry.1.max(at);
        }
    }
}

impl MemoryService {
    /// Writes the recalls noted so far; on failure they stay noted for the next flush.
    ///
    /// # Errors
    /// The store fails.
    pub(crate) async fn flush_recalls(&self) -> Result<()> {
        let _one_flush = self.recalls.flushing.lock().await;
        let pending = std::mem::take(&mut *self.recalls.lock());
        if pending.is_empty() {
            return Ok(());
        }
        let store = self.store()?;
        // The store keeps whole seconds: one statement per (times, second).
        let mut groups: HashMap<(u32, DateTime<Utc>), Vec<String>> = HashMap::new();
        for (id, (times, at)) in pending {
            let second = at.duration_trunc(TimeDelta::seconds(1)).unwrap_or(at);
            groups.entry((times, second)).or_default().push(id);
        }
        let mut failed = None;
        for ((times, at), ids) in groups {
            if let Err(error) = store.touch(&ids, times, at).await {
                // Kept for the next flush (a recall noted meanwhile adds to it).
                self.recalls.add(ids, times, at);
                failed = Some(error);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Starts the task that writes noted recalls every [`FLUSH_EVERY`];
    /// [`MemoryService::stop_recall_writer`] ends it after a last write.
    pub(crate) fn start_recall_writer(self: &Arc<Self>) {
        let service = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(FLUSH_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let Some(stop) = service.upgrade() else {
                    return;
                };
                // Not cancelled in the middle of a write: told to stop, it writes the rest.
                let stopping = tokio::select! {
                    _ = ticks.tick() => false,
                    _ = stop.recalls.stop.notified() => true,
                };
                if let Err(error) = stop.flush_recalls().await {
                    tracing::warn!(%error, "recall counts not written yet; will retry");
                }
                if stopping {
                    return;
                }
            }
        });
        let previous = self
            .recall_writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(task);
        if let Some(previous) = previous {
            previous.abort();
        }
    }

    /// Ends the background writer after it has written what was noted (or, if it cannot within
    /// a few seconds, stops it), then writes anything noted since.
    pub(crate) async fn stop_recall_writer(&self) {
        let writer = self
            .recall_writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut writer) = writer {
            self.recalls.stop.notify_one();
            if tokio::time::timeout(Duration::from_secs(3), &mut writer)
                .await
                .is_err()
            {
                writer.abort();
            }
        }
        if let Err(error) = self.flush_recalls().await {
            tracing::warn!(%error, "recall counts noted since the last write are lost");
        }
    }
}
