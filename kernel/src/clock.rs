//! Where the kernel and every extension get the current time.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// A source of the current time.
///
/// Extensions must read time only through the clock in their [`crate::KernelContext`], never from
/// the system directly, so that replays under a [`VirtualClock`] are deterministic.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to; used by the replay harness and tests.
///
/// It never moves backwards: [`VirtualClock::set`] to an earlier time is ignored. The kernel moves
/// it through [`crate::host::Kernel::advance_to`], which also fires the cron jobs that came due.
#[derive(Debug)]
pub struct VirtualClock {
    now: Mutex<DateTime<Utc>>,
}

impl VirtualClock {
    /// A virtual clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// Moves the clock forward to `to`; an earlier time leaves it where it is.
    pub fn set(&self, to: DateTime<Utc>) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if to > *now {
            *now = to;
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn virtual_clock_moves_forward_only() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let clock = VirtualClock::new(start);
        assert_eq!(clock.now(), start);
        let later = start + chrono::Duration::hours(5);
        clock.set(later);
        assert_eq!(clock.now(), later);
        clock.set(start);
        assert_eq!(clock.now(), later, "the clock must not move backwards");
    }
}
