//! The order in which the indexer takes the queue, the same in both backends: round robin over
//! the users who have memories waiting, newest first within each user. One user's import of
//! thousands of turns then never holds back another user's new turn, and a user's latest turn
//! (the one they are most likely to ask about next) gets its vector before their backlog.
//!
//! Each queue row carries its memory's owner (`embedding_queue.user_id`, `''` for none, set by
//! a trigger), indexed with the time it was queued. A batch of `limit`:
//! 1. lists up to `limit` owners with rows waiting, in order of id, starting after the last
//!    owner the previous batch served ([`OwnerCursor`]) and wrapping round;
//! 2. takes each owner's newest `ceil(limit / owners)` rows, then gives what is left of the
//!    batch to the owners who had more.
//!
//! Listing the owners is a walk of the index (one seek per owner), so a batch costs the same
//! whether the queue holds a hundred rows or a million.

use std::sync::Mutex;

use sqlx::{Database, Encode, QueryBuilder, Type};

use crate::store::IndexItem;

/// The owner the last batch ended with: the next batch starts after it.
#[derive(Debug, Default)]
pub(crate) struct OwnerCursor(Mutex<Option<String>>);

impl OwnerCursor {
    pub(crate) fn get(&self) -> Option<String> {
        self.0.lock().map(|cursor| cursor.clone()).unwrap_or(None)
    }

    pub(crate) fn set(&self, owner: Option<String>) {
        if let Ok(mut cursor) = self.0.lock() {
            *cursor = owner;
        }
    }
}

/// The owners a batch serves, in turn: up to `limit` owners with queued rows, in order of id,
/// those after `after` first, then (wrapping round) those from the first up to `after`, each
/// once; with `free_at`, only rows whose lease (`claimed_until`, PostgreSQL) is free at that
/// moment count. One statement for both backends; one row per owner, column `user_id`.
pub(crate) fn owners_in_turn_query<'args, DB>(
    after: Option<&str>,
    free_at: Option<i64>,
    limit: usize,
) -> QueryBuilder<DB>
where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut builder = QueryBuilder::new("WITH RECURSIVE ");
    push_walk(&mut builder, "later", after, free_at, limit);
    builder.push(", ");
    push_walk(&mut builder, "earlier", None, free_at, limit);
    builder
        .push(
            " SELECT user_id FROM (SELECT user_id, n AS k FROM later WHERE user_id IS NOT NULL \
             UNION ALL SELECT user_id, n + ",
        )
        .push_bind(limit)
        .push(" AS k FROM earlier WHERE user_id IS NOT NULL");
    match after {
        Some(after) => {
            builder.push(" AND user_id <= ").push_bind(after.to_owned());
        }
        // Without a cursor, `later` already walked from the first owner.
        None => {
            builder.push(" AND FALSE");
        }
    }
    builder
        .push(") AS listed ORDER BY k LIMIT ")
        .push_bind(limit);
    builder
}

/// A recursive walk of `idx_embedding_queue_owner` named `name`, rows `(user_id, n)`: up to
/// `limit` owners from the first after `after` (from the first of all when `None`), each step
/// one seek to the next owner (past an owner's leased rows, at most a batch per instance).
fn push_walk<'args, DB>(
    builder: &mut QueryBuilder<DB>,
    name: &str,
    after: Option<&str>,
    free_at: Option<i64>,
    limit: i64,
) where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let free = |builder: &mut QueryBuilder<DB>| {
        if let Some(now) = free_at {
            builder
                .push(" AND (q.claimed_until IS NULL OR q.claimed_until <= ")
                .push_bind(now)
                .push(")");
        }
    };
    builder
        .push(name)
        .push(" (user_id, n) AS (SELECT (SELECT q.user_id FROM embedding_queue q WHERE ");
    match after {
        Some(after) => builder.push("q.user_id > ").push_bind(after.to_owned()),
        None => builder.push("TRUE"),
    };
    free(builder);
    builder.push(
        " ORDER BY q.user_id LIMIT 1), 1 UNION ALL SELECT (SELECT q.user_id FROM embedding_queue q \
         WHERE q.user_id > o.user_id",
    );
    free(builder);
    builder
        .push(" ORDER BY q.user_id LIMIT 1), o.n + 1 FROM ")
        .push(name)
        .push(" o WHERE o.user_id IS NOT NULL AND o.n < ")
        .push_bind(limit)
        .push(")");
}

/// The first pass's share of a batch of `limit` for each of `owners` owners.
pub(crate) fn first_share(limit: usize, owners: usize) -> usize {
    limit.div_ceil(owners.max(1))
}

/// An owner's queued rows (column `memory_id`); a backend appends its own conditions, then
/// [`finish_pick_query`].
pub(crate) fn pick_query<'args, DB>(owner: &str) -> QueryBuilder<DB>
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB> + 'args,
{
    let mut builder = QueryBuilder::new("SELECT memory_id FROM embedding_queue WHERE user_id = ");
    builder.push_bind(owner.to_owned());
    builder
}

/// Ends [`pick_query`]: newest first (`sequence` orders the rows queued in the same second:
/// SQLite's `rowid`, PostgreSQL's `seq`), `take` rows after the `skip` newest.
pub(crate) fn finish_pick_query<'args, DB>(
    builder: &mut QueryBuilder<DB>,
    sequence: &str,
    take: usize,
    skip: usize,
) where
    DB: Database,
    i64: Encode<'args, DB> + Type<DB> + 'args,
{
    builder
        .push(" ORDER BY enqueued_at DESC, ")
        .push(sequence)
        .push(" DESC LIMIT ")
        .push_bind(i64::try_from(take).unwrap_or(i64::MAX))
        .push(" OFFSET ")
        .push_bind(i64::try_from(skip).unwrap_or(i64::MAX));
}

/// Takes a batch of up to `limit` from owners in turn (see the module docs). The backend asks
/// [`TurnTaker::next_pick`] which owner to read and how many rows, reads up to that many of the
/// owner's newest queued rows that are not in [`TurnTaker::taken`], and hands them to
/// [`TurnTaker::record`], until there is nothing left to pick.
#[derive(Debug)]
pub(crate) struct TurnTaker {
    owners: Vec<String>,
    limit: usize,
    share: usize,
    taken: Vec<Vec<String>>,
    total: usize,
    /// The next owner to ask, in the first pass (`< owners.len()`) or the second.
    step: usize,
}

/// One read a [`TurnTaker`] asks for: up to `take` rows of owner number `owner`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pick {
    pub owner: usize,
    pub take: usize,
}

impl TurnTaker {
    pub(crate) fn new(owners: Vec<String>, limit: usize) -> Self {
        Self {
            share: first_share(limit, owners.len()),
            taken: vec![Vec::new(); owners.len()],
            owners,
            limit,
            total: 0,
            step: 0,
        }
    }

    /// The next read, `None` when the batch is full or every owner was asked.
    pub(crate) fn next_pick(&mut self) -> Option<Pick> {
        let count = self.owners.len();
        while self.total < self.limit && self.step < 2 * count {
            let step = self.step;
            self.step += 1;
            if step < count {
                let take = self.share.min(self.limit - self.total);
                return Some(Pick { owner: step, take });
            }
            // The second pass: what is left goes to owners who filled their share.
            let owner = step - count;
            if self.taken[owner].len() == self.share {
                return Some(Pick {
                    owner,
                    take: self.limit - self.total,
                });
            }
        }
        None
    }

    pub(crate) fn owner(&self, pick: Pick) -> &str {
        &self.owners[pick.owner]
    }

    /// The rows this batch already has of `pick`'s owner.
    pub(crate) fn taken(&self, pick: Pick) -> &[String] {
        &self.taken[pick.owner]
    }

    pub(crate) fn record(&mut self, pick: Pick, rows: Vec<String>) {
        self.total += rows.len();
        self.taken[pick.owner].extend(rows);
    }

    /// The rows taken, and the owner the batch ended with (for [`OwnerCursor`]).
    pub(crate) fn finish(self) -> (Vec<String>, Option<String>) {
        let last = self
            .owners
            .iter()
            .zip(&self.taken)
            .rev()
            .find(|(_, rows)| !rows.is_empty())
            .map(|(owner, _)| owner.clone());
        (self.taken.into_iter().flatten().collect(), last)
    }
}

/// `items` in the order their ids were taken (`ids`).
pub(crate) fn in_order_taken(mut items: Vec<IndexItem>, ids: &[String]) -> Vec<IndexItem> {
    items.sort_by_key(|item| ids.iter().position(|id| *id == item.memory_id));
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owners `owners_in_turn_query` lists over a queue of `owners` (SQLite in memory).
    async fn in_turn(owners: &[&str], after: Option<&str>, limit: usize) -> Vec<String> {
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        sqlx::query(
            "CREATE TABLE embedding_queue (memory_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, \
             enqueued_at INTEGER NOT NULL, claimed_until INTEGER)",
        )
        .execute(&pool)
        .await
        .unwrap();
        for (index, owner) in owners.iter().enumerate() {
            for row in 0..2 {
                sqlx::query("INSERT INTO embedding_queue VALUES (?, ?, ?, NULL)")
                    .bind(format!("{owner}{row}"))
                    .bind(*owner)
                    .bind(index as i64)
                    .execute(&pool)
                    .await
                    .unwrap();
            }
        }
        owners_in_turn_query::<sqlx::Sqlite>(after, None, limit)
            .build_query_scalar::<String>()
            .fetch_all(&pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn owners_are_served_in_turn_from_after_the_cursor_each_once() {
        assert_eq!(
            in_turn(&["a", "b", "c", "d"], Some("b"), 3).await,
            ["c", "d", "a"]
        );
        assert_eq!(in_turn(&["a", "b"], None, 8).await, ["a", "b"]);
        assert_eq!(in_turn(&["x", "y", "z"], Some("w"), 1).await, ["x"]);
        assert_eq!(
            in_turn(&["a", "b", "c"], Some("c"), 8).await,
            ["a", "b", "c"],
            "past the last owner, round to the first, each once"
        );
        assert!(in_turn(&[], Some("a"), 8).await.is_empty());
    }

    #[test]
    fn a_batch_is_shared_out_evenly() {
        assert_eq!(first_share(32, 2), 16);
        assert_eq!(first_share(32, 3), 11);
        assert_eq!(first_share(32, 0), 32);
    }

    /// Runs a taker over an in-memory queue.
    fn take(
        owners: &[&str],
        limit: usize,
        queue: impl Fn(&str) -> Vec<String>,
    ) -> (Vec<String>, Option<String>) {
        let mut taker = TurnTaker::new(owners.iter().map(|s| (*s).to_owned()).collect(), limit);
        while let Some(pick) = taker.next_pick() {
            assert!(pick.take >= 1);
            let rows = queue(taker.owner(pick))
                .into_iter()
                .filter(|row| !taker.taken(pick).contains(row))
                .take(pick.take)
                .collect();
            taker.record(pick, rows);
        }
        taker.finish()
    }

    #[test]
    fn a_batch_takes_every_owner_s_newest_then_fills_from_those_with_more() {
        // ana queued 10 (a9 newest), ben 1: a batch of 8 takes ben's and 7 of ana's, newest first.
        let queue = |owner: &str| -> Vec<String> {
            match owner {
                "ana" => (0..10).rev().map(|n| format!("a{n}")).collect(),
                _ => vec!["b0".to_owned()],
            }
        };
        let (rows, last) = take(&["ana", "ben"], 8, queue);
        assert_eq!(rows, ["a9", "a8", "a7", "a6", "a5", "a4", "a3", "b0"]);
        assert_eq!(last.as_deref(), Some("ben"));
        assert_eq!(
            take(&["ana", "ben"], 1, queue).0,
            ["a9"],
            "never past the limit"
        );
        let (rows, last) = take(&["ben", "ana"], 3, queue);
        assert_eq!(
            (rows, last.as_deref()),
            (
                vec!["b0".to_owned(), "a9".to_owned(), "a8".to_owned()],
                Some("ana")
            )
        );
        assert_eq!(take(&[], 4, queue), (Vec::new(), None));
    }
}
