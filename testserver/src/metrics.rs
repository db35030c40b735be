//! The request log and counters tests read: every request with its verb,
//! resource, status and duration; totals by verb and resource, by status
//! code; watches open and opened; requests in flight and rejected by the
//! admission limit; requests that came sooner than the `Retry-After` their
//! client was given.

use crate::http::request::Verb;
use crate::retry_after::RetryAfterLog;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One served request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// Kubernetes verb, for resource requests.
    pub verb: Option<Verb>,
    /// `resource` or `resource.group`, for resource requests.
    pub resource: Option<String>,
    /// Subresource (`status`).
    pub subresource: Option<String>,
    /// Namespace, if any.
    pub namespace: Option<String>,
    /// Object name, if any.
    pub name: Option<String>,
    /// HTTP status code sent.
    pub status: u16,
    /// `User-Agent` header.
    pub user_agent: String,
    /// `Accept` header of the request (empty when absent).
    pub accept: String,
    /// `Content-Type` of the answer (the encoding negotiated; empty when absent).
    pub content_type: String,
    /// Time until the response head was ready (watch and list bodies
    /// stream after that).
    pub duration: Duration,
}

/// Totals since start (or the last reset).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests by (verb, resource) — `resource` as in [`RequestRecord`].
    pub by_verb_resource: BTreeMap<(String, String), u64>,
    /// Requests by HTTP status code.
    pub by_status: BTreeMap<u16, u64>,
    /// All requests.
    pub total: u64,
    /// Watches open now.
    pub active_watches: u64,
    /// Watches opened since start.
    pub watches_opened: u64,
    /// API requests holding a seat of the admission limit now (counted
    /// whether or not a limit is set).
    pub in_flight: u64,
    /// Requests answered 429 by the admission limit.
    pub rejected_in_flight: u64,
    /// Requests that arrived before the wait a `Retry-After` had asked of
    /// their client (told apart by `User-Agent`) was over.
    pub retry_after_violations: u64,
}

impl Counters {
    /// Requests with this verb and resource (e.g. `("list", "configmaps")`).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.by_verb_resource
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }
}

/// Log and counters.
pub(crate) struct Metrics {
    log: Mutex<VecDeque<RequestRecord>>,
    log_capacity: usize,
    counters: Mutex<Counters>,
    active_watches: AtomicU64,
    watches_opened: AtomicU64,
    pub(crate) retry_after: RetryAfterLog,
}

impl Metrics {
    pub(crate) fn new(log_capacity: usize) -> Self {
        Self {
            log: Mutex::new(VecDeque::new()),
            log_capacity,
            counters: Mutex::new(Counters::default()),
            active_watches: AtomicU64::new(0),
            watches_opened: AtomicU64::new(0),
            retry_after: RetryAfterLog::default(),
        }
    }

    pub(crate) fn record(&self, rec: RequestRecord) {
        {
            let mut c = self.counters.lock();
            c.total += 1;
            *c.by_status.entry(rec.status).or_default() += 1;
            if let (Some(v), Some(r)) = (rec.verb, &rec.resource) {
                *c.by_verb_resource
                    .entry((v.as_str().to_owned(), r.clone()))
                    .or_default() += 1;
            }
        }
        if self.log_capacity > 0 {
            let mut log = self.log.lock();
            if log.len() >= self.log_capacity {
                log.pop_front();
            }
            log.push_back(rec);
        }
    }

    pub(crate) fn watch_started(&self) {
        self.active_watches.fetch_add(1, Ordering::SeqCst);
        self.watches_opened.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn watch_ended(&self) {
        self.active_watches.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn counters(&self) -> Counters {
        let mut c = self.counters.lock().clone();
        c.active_watches = self.active_watches.load(Ordering::SeqCst);
        c.watches_opened = self.watches_opened.load(Ordering::SeqCst);
        c.retry_after_violations = self.retry_after.violations();
        c
    }

    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        self.log.lock().iter().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        self.log.lock().clear();
        *self.counters.lock() = Counters::default();
        self.retry_after.clear();
    }
}
