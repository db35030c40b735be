//! Whether clients honour the waits the server asks for: every answer
//! carrying `Retry-After` is remembered per client, and a request from
//! that client arriving before the wait is over counts as a violation.
//!
//! Clients are told apart by their `User-Agent` (each of a fleet of clients
//! should send its own); requests without one are not tracked.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Clients remembered at most; past it, those whose wait is over are
/// forgotten first.
const MAX_CLIENTS: usize = 100_000;

/// The waits asked of each client and the requests that came too soon.
#[derive(Debug, Default)]
pub(crate) struct RetryAfterLog {
    not_before: Mutex<HashMap<String, Instant>>,
    violations: AtomicU64,
}

impl RetryAfterLog {
    /// A request from `client` arrived at `at`; true (and counted) when the
    /// server had asked that client to wait past `at`.
    pub(crate) fn arrived(&self, client: &str, at: Instant) -> bool {
        if client.is_empty() {
            return false;
        }
        let early = self
            .not_before
            .lock()
            .get(client)
            .is_some_and(|until| at < *until);
        if early {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        early
    }

    /// The answer sent to `client` at `at` asked it to wait `wait`.
    pub(crate) fn asked(&self, client: &str, at: Instant, wait: Duration) {
        if client.is_empty() {
            return;
        }
        let until = at + wait;
        let mut map = self.not_before.lock();
        if map.len() >= MAX_CLIENTS && !map.contains_key(client) {
            map.retain(|_, t| *t > at);
            if map.len() >= MAX_CLIENTS {
                return;
            }
        }
        let slot = map.entry(client.to_owned()).or_insert(until);
        if *slot < until {
            *slot = until;
        }
    }

    /// Requests that came sooner than the wait asked of their client.
    pub(crate) fn violations(&self) -> u64 {
        self.violations.load(Ordering::SeqCst)
    }

    pub(crate) fn clear(&self) {
        self.not_before.lock().clear();
        self.violations.store(0, Ordering::SeqCst);
    }
}

/// The whole seconds of a `Retry-After` header (the form kube-apiserver
/// sends); `None` when absent or not a number.
pub(crate) fn header_secs(headers: &http::HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_before_the_wait_is_over_is_a_violation_of_that_client_only() {
        let log = RetryAfterLog::default();
        let t = Instant::now();
        log.asked("a", t, Duration::from_secs(1));
        assert!(log.arrived("a", t + Duration::from_millis(999)));
        assert!(
            !log.arrived("b", t + Duration::from_millis(10)),
            "another client"
        );
        assert!(
            !log.arrived("a", t + Duration::from_secs(1)),
            "waited exactly"
        );
        assert!(!log.arrived("", t), "untracked");
        assert_eq!(log.violations(), 1);
        // a shorter wait asked later does not shorten the one running
        log.asked("a", t + Duration::from_secs(2), Duration::from_secs(5));
        log.asked("a", t + Duration::from_secs(3), Duration::from_secs(1));
        assert!(log.arrived("a", t + Duration::from_secs(6)));
        assert_eq!(log.violations(), 2);
        log.clear();
        assert_eq!(log.violations(), 0);
        assert!(!log.arrived("a", t + Duration::from_secs(6)));
    }

    #[test]
    fn only_whole_seconds_are_read_from_the_header() {
        let mut h = http::HeaderMap::new();
        assert_eq!(header_secs(&h), None);
        h.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("3"),
        );
        assert_eq!(header_secs(&h), Some(Duration::from_secs(3)));
        h.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(header_secs(&h), None);
    }
}
