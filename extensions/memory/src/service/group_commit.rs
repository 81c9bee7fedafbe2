//! Group commit: turns that arrive while another commit is running wait for it, then commit
//! together in one transaction, so that concurrent requests share one fsync instead of taking
//! one each in turn.
//!
//! A caller queues its turns, then waits either for its answer or for the commit lock. Whoever
//! takes the lock leads: it takes every turn queued so far (its own among them) and commits them
//! in a task of its own, so that a caller who goes away (a request timed out) abandons no one
//! else's turns. If the group's transaction fails, each caller's turns are committed again
//! alone, so that one bad request fails only itself. A caller's turns are all stored or none,
//! as before; each caller is answered only after the commit that holds its turns.

use std::sync::{Arc, Mutex, PoisonError};

use mnemo_ner_api::ExtractedEntity;
use tokio::sync::oneshot;

use crate::error::{MemoryError, Result};
use crate::store::{MemoryBackend, NewMemory, StoredTurn, TurnRow};

/// A group takes waiting callers, in order, while their turns add up to at most this many (a
/// caller with more commits alone): past a hundred or so turns a transaction's fsync is
/// already shared, and a larger one only makes every caller in it wait longer.
const MAX_GROUP_TURNS: usize = 128;

/// A turn to store, owned so that it can wait for the group's commit.
#[derive(Debug, Clone)]
pub(super) struct OwnedTurn {
    pub(super) memory: NewMemory,
    pub(super) entities: Vec<ExtractedEntity>,
    pub(super) event_id: Option<String>,
    pub(super) record_session: bool,
    /// The messaging provider its event named, recorded with the session.
    pub(super) provider: Option<String>,
}

impl OwnedTurn {
    fn row(&self) -> TurnRow<'_> {
        TurnRow {
            memory: &self.memory,
            entities: &self.entities,
            event_id: self.event_id.as_deref(),
            record_session: self.record_session,
            provider: self.provider.as_deref(),
        }
    }
}

/// One caller's turns and where its answer goes.
struct Waiting {
    caller: u64,
    turns: Vec<OwnedTurn>,
    answer: oneshot::Sender<Result<Vec<StoredTurn>>>,
}

/// The queue of turns waiting for a commit, and the lock of the commit running.
#[derive(Default)]
pub(crate) struct GroupCommit {
    waiting: Arc<Mutex<Vec<Waiting>>>,
    committing: Arc<tokio::sync::Mutex<()>>,
    callers: std::sync::atomic::AtomicU64,
}

/// Takes a caller's turns off the queue if the caller goes away (its request was cancelled)
/// before a leader took them: what nobody will be told of is not stored. Turns a leader took
/// are committed either way, as a commit under way always was.
struct LeaveIfGone {
    waiting: Arc<Mutex<Vec<Waiting>>>,
    caller: u64,
}

impl Drop for LeaveIfGone {
    fn drop(&mut self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.retain(|queued| queued.caller != self.caller);
    }
}

impl GroupCommit {
    /// Stores `turns` in `store` in one transaction, with whatever else is waiting; returns
    /// what each became, in order.
    ///
    /// # Errors
    /// The store fails on these turns (nothing of them is stored).
    pub(super) async fn commit(
        &self,
        store: &Arc<dyn MemoryBackend>,
        turns: Vec<OwnedTurn>,
    ) -> Result<Vec<StoredTurn>> {
        if turns.is_empty() {
            return Ok(Vec::new());
        }
        let (answer, mut answered) = oneshot::channel();
        let caller = self
            .callers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock_waiting().push(Waiting {
            caller,
            turns,
            answer,
        });
        let _leave_if_gone = LeaveIfGone {
            waiting: self.waiting.clone(),
            caller,
        };
        loop {
            let lead = tokio::select! {
                biased;
                answer = &mut answered => return answer.unwrap_or_else(|_| Err(interrupted())),
                lead = self.committing.clone().lock_owned() => lead,
            };
            // A leader may have committed these turns while this caller waited for the lock.
            match answered.try_recv() {
                Ok(answer) => return answer,
                Err(oneshot::error::TryRecvError::Closed) => return Err(interrupted()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let group: Vec<Waiting> = {
                let mut waiting = self.lock_waiting();
                let mut turns = 0;
                let take = waiting
                    .iter()
                    .take_while(|caller| {
                        turns += caller.turns.len();
                        turns <= MAX_GROUP_TURNS
                    })
                    .count()
                    .max(1)
                    .min(waiting.len());
                waiting.drain(..take).collect()
            };
            let store = store.clone();
            let committed = tokio::spawn(async move {
                commit_group(store.as_ref(), group).await;
                drop(lead);
            });
            // This caller's answer comes through `answered`, from this group or a later one.
            let _ = committed.await;
        }
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The commit task ended without answering (it panicked): nothing is known to be stored, and
/// the caller may send again (a resent event is stored once).
fn interrupted() -> MemoryError {
    MemoryError::Database(sqlx::Error::WorkerCrashed)
}

/// Commits `group` in one transaction and answers each caller; when that fails on the data
/// (not on reaching the database), each caller's turns alone.
async fn commit_group(store: &dyn MemoryBackend, group: Vec<Waiting>) {
    if group.len() > 1 {
        let rows: Vec<TurnRow<'_>> = group
            .iter()
            .flat_map(|waiting| waiting.turns.iter().map(OwnedTurn::row))
            .collect();
        match store.insert_turns(&rows).await {
            Ok(stored) => {
                drop(rows);
                let mut stored = stored.into_iter();
                for waiting in group {
                    let mine: Vec<StoredTurn> = stored.by_ref().take(waiting.turns.len()).collect();
                    let _ = waiting.answer.send(Ok(mine));
                }
                return;
            }
            // The database cannot be reached: trying each caller again would only make the
            // last wait once more per caller. Every caller is told, in the same words.
            Err(error) if error.is_unavailable() => {
                drop(rows);
                let words = error.to_string();
                for waiting in group {
                    let _ = waiting
                        .answer
                        .send(Err(MemoryError::Database(sqlx::Error::Io(
                            std::io::Error::other(words.clone()),
                        ))));
                }
                return;
            }
            Err(_) => {}
        }
        tracing::debug!(
            callers = group.len(),
            "a group commit failed; committing each caller's turns alone"
        );
    }
    for waiting in group {
        let rows: Vec<TurnRow<'_>> = waiting.turns.iter().map(OwnedTurn::row).collect();
        let result = store.insert_turns(&rows).await;
        drop(rows);
        let _ = waiting.answer.send(result);
    }
}
