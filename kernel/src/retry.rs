//! Retrying calls to model servers (the chat model, a remote embedding provider): which failures
//! are worth another try, and how long to wait before it.
//!
//! A server that is overloaded (429), restarting (502, 503) or briefly unreachable usually
//! answers a moment later, and a nightly job that gives up at the first refusal loses a night.
//! Errors that another try cannot fix (400, 401, 404, a malformed reply) fail at once.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How often and how patiently to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first; 0 turns retrying off.
    pub max_retries: u32,
    /// The wait before the first retry; each later one waits twice as long, up to `max_delay`.
    pub base_delay: Duration,
    /// The longest wait, also for a server's `Retry-After`.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// A policy of `max_retries` tries after the first, the first waiting `base_delay_ms`.
    pub fn new(max_retries: u32, base_delay_ms: u64) -> Self {
        Self {
            max_retries,
            base_delay: Duration::from_millis(base_delay_ms),
            ..Self::default()
        }
    }

    /// Whether an HTTP status says "try again later": 408, 429, and server errors other than
    /// 501 (not implemented, which stays so).
    pub fn is_transient_status(status: u16) -> bool {
        matches!(status, 408 | 429) || ((500..=599).contains(&status) && status != 501)
    }

    /// The wait before retry number `retry` (0 for the first): the server's `Retry-After` when
    /// it sent one, else the exponential delay with up to a quarter of random jitter (so that
    /// many clients refused at once do not come back at once); never over `max_delay`.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let exponential = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.min(16)))
            .min(self.max_delay);
        let jitter_range = exponential.as_millis() as u64 / 4;
        let jitter = if jitter_range == 0 {
            0
        } else {
            random_u64() % jitter_range
        };
        (exponential + Duration::from_millis(jitter)).min(self.max_delay)
    }
}

/// The `Retry-After` header's wait, when it is given in seconds (the HTTP-date form is rare
/// from model servers and is ignored).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// A random number from the standard library's per-process hash keys; enough for jitter.
fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos().into()),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_statuses_are_retried_and_others_are_not() {
        for status in [408, 429, 500, 502, 503, 504] {
            assert!(RetryPolicy::is_transient_status(status), "{status}");
        }
        for status in [200, 400, 401, 403, 404, 422, 501] {
            assert!(!RetryPolicy::is_transient_status(status), "{status}");
        }
    }

    #[test]
    fn delays_double_with_bounded_jitter_and_respect_the_ceiling() {
        let policy = RetryPolicy::new(5, 100);
        for (retry, base) in [(0u32, 100u64), (1, 200), (2, 400)] {
            let delay = policy.delay(retry, None).as_millis() as u64;
            assert!(
                (base..=base + base / 4).contains(&delay),
                "retry {retry}: {delay} ms"
            );
        }
        assert_eq!(policy.delay(30, None), policy.max_delay);
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(3_600))),
            policy.max_delay
        );
    }

    #[test]
    fn retry_after_in_seconds_is_read() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2026 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
    }
}
