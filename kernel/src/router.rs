//! The message router: publish/subscribe by topic over bounded, ordered queues.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{mpsc, watch};

use crate::event::Event;

/// Why an event could not be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The kernel is shutting down and accepts no new events.
    #[error("the router is closed: the kernel is shutting down")]
    Closed,
}

struct Subscription {
    name: String,
    topics: Vec<String>,
    sender: mpsc::Sender<Event>,
}

impl Subscription {
    fn wants(&self, topic: &str) -> bool {
        self.topics
            .iter()
            .any(|wanted| wanted == "*" || wanted == topic)
    }
}

struct RouterInner {
    capacity: usize,
    subscriptions: RwLock<Vec<Subscription>>,
    /// Deliveries queued or being handled; zero means the bus is quiet.
    in_flight: watch::Sender<usize>,
    next_id: AtomicU64,
    published: Mutex<HashMap<String, u64>>,
    closed: AtomicBool,
    /// Distinguishes this run's generated event ids from every other run's, so that ids stay
    /// unique in stores that outlive the process (import is idempotent by event id).
    run_id: String,
}

/// Routes events to subscribers by topic.
///
/// Each subscriber owns a bounded queue (`[kernel] queue_capacity`): a publisher waits while a
/// subscriber's queue is full, so a slow subscriber slows producers down instead of growing memory.
/// A subscriber sees events in the order they were published. Cloning is cheap.
#[derive(Clone)]
pub struct Router {
    inner: Arc<RouterInner>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("capacity", &self.inner.capacity)
            .finish()
    }
}

impl Router {
    pub(crate) fn new(capacity: usize) -> Self {
        let (in_flight, _) = watch::channel(0);
        Self {
            inner: Arc::new(RouterInner {
                capacity: capacity.max(1),
                subscriptions: RwLock::new(Vec::new()),
                in_flight,
                next_id: AtomicU64::new(1),
                published: Mutex::new(HashMap::new()),
                closed: AtomicBool::new(false),
                run_id: run_id(),
            }),
        }
    }

    /// Adds a subscriber; the caller drains the receiver and calls [`Router::delivered`] per event.
    pub(crate) fn subscribe(&self, name: &str, topics: Vec<String>) -> mpsc::Receiver<Event> {
        let (sender, receiver) = mpsc::channel(self.inner.capacity);
        self.inner
            .subscriptions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(Subscription {
                name: name.to_owned(),
                topics,
                sender,
            });
        receiver
    }

    /// Marks one delivery as handled.
    pub(crate) fn delivered(&self) {
        self.inner
            .in_flight
            .send_modify(|count| *count = count.saturating_sub(1));
    }

    /// Publishes `event` to every subscriber of its topic and returns it with its id.
    ///
    /// An event without an id gets `evt_<run>_<n>`, unique across runs. Waits while a subscriber's queue is full.
    ///
    /// # Errors
    /// [`PublishError::Closed`] once shutdown has begun.
    pub async fn publish(&self, event: Event) -> Result<Event, PublishError> {
        self.deliver(event, None).await
    }

    /// Publishes `event` as [`Router::publish`] does, to every subscriber but `handled_by`, which
    /// has handled it already: a host that stores a turn through the memory service directly
    /// (to acknowledge it after commit) passes it on to the other extensions without the memory
    /// extension ingesting it a second time.
    ///
    /// # Errors
    /// [`PublishError::Closed`] once shutdown has begun.
    pub async fn publish_except(
        &self,
        event: Event,
        handled_by: &str,
    ) -> Result<Event, PublishError> {
        self.deliver(event, Some(handled_by)).await
    }

    async fn deliver(&self, mut event: Event, skip: Option<&str>) -> Result<Event, PublishError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(PublishError::Closed);
        }
        if event.id.is_empty() {
            let number = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            event.id = format!("evt_{}_{number}", self.inner.run_id);
        }
        let targets: Vec<(String, mpsc::Sender<Event>)> = {
            let subscriptions = self
                .inner
                .subscriptions
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            subscriptions
                .iter()
                .filter(|subscription| subscription.wants(event.topic()))
                .filter(|subscription| skip != Some(subscription.name.as_str()))
                .map(|subscription| (subscription.name.clone(), subscription.sender.clone()))
                .collect()
        };
        *self
            .inner
            .published
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(event.topic().to_owned())
            .or_default() += 1;
        tracing::debug!(event_id = %event.id, topic = event.topic(), subscribers = targets.len(), "publish");
        for (name, sender) in targets {
            // Counted before the send so that `settle` cannot miss it; the guard uncounts it if
            // the send fails or the publishing future is dropped while waiting for room.
            self.inner.in_flight.send_modify(|count| *count += 1);
            let mut uncount = InFlightGuard {
                router: self,
                armed: true,
            };
            match sender.send(event.clone()).await {
                Ok(()) => uncount.armed = false,
                Err(_) => {
                    tracing::warn!(subscriber = %name, event_id = %event.id, "subscriber gone; event dropped for it");
                }
            }
        }
        Ok(event)
    }

    /// How many events of `topic` were published since start.
    pub fn published(&self, topic: &str) -> u64 {
        self.inner
            .published
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(topic)
            .copied()
            .unwrap_or(0)
    }

    /// Waits until every published event has been handled, including events published by handlers.
    pub async fn settle(&self) {
        let mut in_flight = self.inner.in_flight.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail.
        let _ = in_flight.wait_for(|count| *count == 0).await;
    }

    /// Deliveries queued or being handled now, over every subscriber: the depth of the bus.
    pub fn in_flight(&self) -> usize {
        *self.inner.in_flight.borrow()
    }

    /// True when no delivery is queued or being handled.
    pub fn is_quiet(&self) -> bool {
        self.in_flight() == 0
    }

    /// Stops accepting events and closes every queue; subscribers drain what is queued, then end.
    pub(crate) fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner
            .subscriptions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }
}

/// A short id for this router: wall-clock nanoseconds mixed with the process id and an address.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or_default();
    let local = 0_u8;
    let mixed = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ (std::ptr::addr_of!(local) as u64).rotate_left(17);
    format!("{mixed:x}")
}

struct InFlightGuard<'a> {
    router: &'a Router,
    armed: bool,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.router.delivered();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventPayload;
    use chrono::Utc;

    fn custom(topic: &str, n: u64) -> Event {
        Event::new(
            Utc::now(),
            EventPayload::Custom {
                topic: topic.into(),
                data: serde_json::json!(n),
            },
        )
    }

    #[tokio::test]
    async fn an_event_published_except_one_subscriber_reaches_only_the_others() {
        let router = Router::new(4);
        let mut memory = router.subscribe("memory", vec!["a".into()]);
        let mut mirror = router.subscribe("mirror", vec!["a".into()]);
        router
            .publish_except(custom("a", 1), "memory")
            .await
            .unwrap();
        let delivered = mirror.recv().await.unwrap();
        assert_eq!(delivered.payload, custom("a", 1).payload);
        router.delivered();
        router.settle().await;
        assert!(
            memory.try_recv().is_err(),
            "the skipped subscriber got nothing"
        );
        assert_eq!(router.in_flight(), 0);
        router.publish(custom("a", 2)).await.unwrap();
        assert!(
            memory.recv().await.is_some(),
            "a plain publish still reaches it"
        );
    }

    #[tokio::test]
    async fn delivers_by_topic_in_order_and_settles() {
        let router = Router::new(4);
        let mut only_a = router.subscribe("a", vec!["a".into()]);
        let mut all = router.subscribe("all", vec!["*".into()]);
        let consumer_router = router.clone();
        let seen_a = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(event) = only_a.recv().await {
                seen.push(event.payload.clone());
                consumer_router.delivered();
            }
            seen
        });
        let all_router = router.clone();
        let seen_all = tokio::spawn(async move {
            let mut count = 0;
            while let Some(_event) = all.recv().await {
                count += 1;
                all_router.delivered();
            }
            count
        });
        for n in 0..20 {
            let published = router.publish(custom("a", n)).await.unwrap();
            assert!(published.id.starts_with("evt_"));
            router.publish(custom("b", n)).await.unwrap();
        }
        router.settle().await;
        assert_eq!(router.published("a"), 20);
        router.close();
        assert_eq!(
            router.publish(custom("a", 99)).await.unwrap_err(),
            PublishError::Closed
        );
        let seen = seen_a.await.unwrap();
        let numbers: Vec<u64> = seen
            .iter()
            .map(|payload| match payload {
                EventPayload::Custom { data, .. } => data.as_u64().unwrap(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(numbers, (0..20).collect::<Vec<_>>(), "in publish order");
        assert_eq!(seen_all.await.unwrap(), 40);
    }

    #[tokio::test]
    async fn full_queue_makes_the_publisher_wait() {
        let router = Router::new(1);
        let mut receiver = router.subscribe("slow", vec!["t".into()]);
        router.publish(custom("t", 1)).await.unwrap();
        let blocked = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            router.publish(custom("t", 2)),
        )
        .await;
        assert!(
            blocked.is_err(),
            "second publish must wait for the full queue"
        );
        receiver.recv().await.unwrap();
        router.delivered();
        // The timed-out publish dropped its event and uncounted it; the queue has room again.
        router.publish(custom("t", 3)).await.unwrap();
        receiver.recv().await.unwrap();
        router.delivered();
        tokio::time::timeout(std::time::Duration::from_secs(1), router.settle())
            .await
            .expect("a cancelled publish must not leave a delivery counted");
    }
}
