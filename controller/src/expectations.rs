//! Expectations: what a controller has asked the API server to create or
//! delete for a key and has not yet seen in its cache, with client-go's
//! `ControllerExpectations` semantics (CT18).
//!
//! A controller that creates several objects for one key (a ReplicaSet its
//! pods, a Job its pods) cannot tell from its cache, right after the
//! creates, whether they happened: the watch has not delivered them yet, a
//! reconcile that trusted the cache would create them again. So before it
//! creates `n` objects it records [`expect_creations(key, n)`], the owned
//! type's event handler calls [`creation_observed(key)`] for each one its
//! informer sees, and a reconcile acts on the cache only once
//! [`satisfied(key)`] says every expected event arrived — or the
//! expectation is older than its time to live (5 minutes by default, as in
//! client-go): a create whose event never comes (it failed, or the watch
//! missed it) must not block the key for good. A create that failed is
//! taken back with [`creation_observed`] too, as client-go does.
//!
//! A key with no expectations is satisfied (a new controller, or a key
//! whose expectations were [`delete`]d because its object went away).
//!
//! ```
//! use kcontrol_controller::expectations::Expectations;
//!
//! let expectations = Expectations::new();
//! assert!(expectations.satisfied("ns/web"));      // nothing expected yet
//! expectations.expect_creations("ns/web", 2);     // before creating two pods
//! assert!(!expectations.satisfied("ns/web"));     // their events have not come
//! expectations.creation_observed("ns/web");       // the informer saw one
//! expectations.creation_observed("ns/web");       // and the other
//! assert!(expectations.satisfied("ns/web"));      // the cache can be trusted
//! ```
//!
//! In a hand-written controller the owned type's handler lowers them
//! ([`EnqueueHandler::observe_expectations`]); with the
//! [`Controller`](crate::Controller) builder,
//! [`with_expectations`](crate::Controller::with_expectations) does it
//! for every owned type and [`Context::expectations`](crate::Context::expectations)
//! hands them to the reconciler. Here a ReplicaSet-like controller of pods:
//!
//! ```no_run
//! # fn demo(factory: kcontrol_informer::InformerFactory) -> Result<(), kcontrol_informer::InformerError> {
//! use kcontrol_controller::expectations::Expectations;
//! use kcontrol_controller::handlers::EnqueueHandler;
//! use kcontrol_indexer::k8s_openapi::api::apps::v1::ReplicaSet;
//! use kcontrol_indexer::k8s_openapi::api::core::v1::Pod;
//! use kcontrol_workqueue::RateLimitingQueue;
//!
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
//! let expectations = Expectations::new();
//! factory.informer::<Pod>().add_event_handler(
//!     EnqueueHandler::for_owner::<ReplicaSet>(queue.clone())
//!         .observe_expectations(expectations.clone()),
//! )?;
//! // in the sync of key "ns/web": while `!expectations.satisfied("ns/web")`
//! // the pod cache is behind, create nothing; else count the pods, then
//! // `expectations.expect_creations("ns/web", missing)` and create them
//! // (`creation_observed` for each create that failed)
//! # Ok(()) }
//! ```
//!
//! [`EnqueueHandler::observe_expectations`]: crate::handlers::EnqueueHandler::observe_expectations
//! [`expect_creations(key, n)`]: Expectations::expect_creations
//! [`creation_observed(key)`]: Expectations::creation_observed
//! [`creation_observed`]: Expectations::creation_observed
//! [`satisfied(key)`]: Expectations::satisfied
//! [`delete`]: Expectations::delete

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// client-go's `ExpectationsTimeout`: how long expectations are waited for.
pub const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);

/// What is still expected for one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// Creations not yet observed (0 or less: none).
    pub adds: i64,
    /// Deletions not yet observed (0 or less: none).
    pub deletes: i64,
    /// When the expectations were set.
    pub since: Instant,
}

impl Pending {
    /// Whether every expected creation and deletion was observed.
    pub fn fulfilled(&self) -> bool {
        self.adds <= 0 && self.deletes <= 0
    }
}

/// Expected creations and deletions per controller key, shared by clones
/// (the event handlers and the workers hold the same map); see the
/// [module docs](self).
#[derive(Clone)]
pub struct Expectations {
    entries: Arc<Mutex<HashMap<String, Pending>>>,
    ttl: Duration,
}

impl Default for Expectations {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Expectations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expectations")
            .field("keys", &self.entries.lock().len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl Expectations {
    /// Empty, with expectations expiring after [`DEFAULT_TTL`].
    pub fn new() -> Self {
        Self::with_ttl(DEFAULT_TTL)
    }

    /// Empty, with expectations expiring `ttl` after they were set.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            entries: Arc::default(),
            ttl,
        }
    }

    /// The time to live of an expectation.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Sets `key`'s expectations to `adds` creations and `deletes`
    /// deletions, replacing any it had, and restarts its time to live.
    pub fn set(&self, key: &str, adds: i64, deletes: i64) {
        let pending = Pending {
            adds,
            deletes,
            since: Instant::now(),
        };
        self.entries.lock().insert(key.to_owned(), pending);
    }

    /// Expects `adds` creations for `key` (client-go's `ExpectCreations`:
    /// replaces what `key` expected).
    pub fn expect_creations(&self, key: &str, adds: i64) {
        self.set(key, adds, 0);
    }

    /// Expects `deletes` deletions for `key` (client-go's
    /// `ExpectDeletions`: replaces what `key` expected).
    pub fn expect_deletions(&self, key: &str, deletes: i64) {
        self.set(key, 0, deletes);
    }

    /// Adds `adds` creations and `deletes` deletions to what `key` expects
    /// (nothing when `key` expects nothing: set them first). The time to
    /// live is not restarted.
    pub fn raise(&self, key: &str, adds: i64, deletes: i64) {
        if let Some(p) = self.entries.lock().get_mut(key) {
            p.adds += adds;
            p.deletes += deletes;
        }
    }

    /// One creation for `key` was observed (or failed and will not come).
    pub fn creation_observed(&self, key: &str) {
        self.raise(key, -1, 0);
    }

    /// One deletion for `key` was observed (or failed and will not come).
    pub fn deletion_observed(&self, key: &str) {
        self.raise(key, 0, -1);
    }

    /// Whether a reconcile of `key` may trust the cache: `key` expects
    /// nothing, every expected event was observed, or the expectations
    /// are at least [`ttl`](Self::ttl) old (logged: an event was missed).
    pub fn satisfied(&self, key: &str) -> bool {
        let entries = self.entries.lock();
        let Some(p) = entries.get(key) else {
            return true;
        };
        if p.fulfilled() {
            return true;
        }
        if p.since.elapsed() >= self.ttl {
            tracing::debug!(
                key,
                adds = p.adds,
                deletes = p.deletes,
                "expectations expired"
            );
            return true;
        }
        false
    }

    /// What `key` still expects, if anything was set.
    pub fn pending(&self, key: &str) -> Option<Pending> {
        self.entries.lock().get(key).copied()
    }

    /// Forgets `key`'s expectations (its object was deleted).
    pub fn delete(&self, key: &str) {
        self.entries.lock().remove(key);
    }

    /// How many keys have expectations.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no key has expectations.
    pub fn is_empty(&self) -> bool {
        self.entries.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ct18_unknown_keys_are_satisfied() {
        let e = Expectations::new();
        assert!(e.satisfied("ns/a"));
        assert!(e.pending("ns/a").is_none());
        // observing for a key that expects nothing creates nothing
        e.creation_observed("ns/a");
        e.deletion_observed("ns/a");
        assert!(e.is_empty());
        assert!(e.satisfied("ns/a"));
    }

    #[test]
    fn ct18_creations_are_satisfied_once_all_are_observed() {
        let e = Expectations::new();
        e.expect_creations("ns/a", 3);
        for _ in 0..2 {
            assert!(!e.satisfied("ns/a"));
            e.creation_observed("ns/a");
        }
        assert!(!e.satisfied("ns/a"));
        assert!(e.satisfied("ns/b"), "keys are independent");
        e.creation_observed("ns/a");
        assert!(e.satisfied("ns/a"));
        // an event beyond the expected ones keeps it satisfied
        e.creation_observed("ns/a");
        assert!(e.satisfied("ns/a"));
        assert_eq!(e.pending("ns/a").map(|p| p.adds), Some(-1));
    }

    #[test]
    fn ct18_deletions_set_replaces_and_raise_adds() {
        let e = Expectations::new();
        e.expect_creations("ns/a", 5);
        e.expect_deletions("ns/a", 1); // replaces: no creation expected now
        assert_eq!(e.pending("ns/a").map(|p| (p.adds, p.deletes)), Some((0, 1)));
        assert!(!e.satisfied("ns/a"));
        e.raise("ns/a", 1, 0);
        e.deletion_observed("ns/a");
        assert!(!e.satisfied("ns/a"), "the raised creation is still due");
        e.creation_observed("ns/a");
        assert!(e.satisfied("ns/a"));
        e.delete("ns/a");
        assert!(e.pending("ns/a").is_none());
        assert_eq!(e.len(), 0);
    }

    #[test]
    fn ct18_expired_expectations_are_satisfied() {
        // a time to live of zero: expired as soon as set
        let e = Expectations::with_ttl(Duration::ZERO);
        e.expect_creations("ns/a", 1);
        assert!(e.satisfied("ns/a"));
        assert_eq!(e.pending("ns/a").map(|p| p.adds), Some(1));
        // the default one does not expire within a test
        let e = Expectations::new();
        e.expect_creations("ns/a", 1);
        assert!(!e.satisfied("ns/a"));
        assert_eq!(e.ttl(), DEFAULT_TTL);
    }

    #[test]
    fn ct18_clones_share_the_map_across_threads() {
        let e = Expectations::new();
        e.expect_creations("ns/a", 100);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let e = e.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        e.creation_observed("ns/a");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(e.satisfied("ns/a"));
        assert_eq!(e.pending("ns/a").map(|p| p.adds), Some(0));
    }
}
