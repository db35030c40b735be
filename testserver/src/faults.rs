//! Fault injection: what a test can make the server do to its clients —
//! drop watches, expire lists and watches, compact history, fail requests
//! with 429 / 500 / 503, add latency, corrupt a watch frame, pause watch
//! delivery, serve from a lagging replica, answer watches 429 while a
//! watch cache initializes, restart (connections cut and refused, then
//! 503s and an initializing watch cache, then 410 for versions older than
//! the restart). Shared by the library handle and the admin HTTP endpoint.

use crate::flow_control::FlowControl;
use crate::http::request::Verb;
use crate::rest::Core;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How an injected failure answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// 429 `TooManyRequests` with `Retry-After: <seconds>`.
    TooManyRequests {
        /// The `Retry-After` value in seconds.
        retry_after_secs: u64,
    },
    /// 500 `InternalError`.
    InternalError,
    /// 503 `ServiceUnavailable` with `Retry-After: 1`, as kube-apiserver
    /// answers while it cannot serve (starting, storage unavailable).
    ServiceUnavailable,
}

/// Which requests an injected failure applies to (empty = every API request).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultScope {
    /// Only requests with this verb.
    pub verb: Option<Verb>,
    /// Only requests for this resource: its plural name (`configmaps`,
    /// `deployments`, any group) or plural and group (`deployments.apps`,
    /// the form the request log records).
    pub resource: Option<String>,
}

/// The resource a request is for, as fault scopes match it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScopedResource<'a> {
    pub(crate) plural: &'a str,
    /// Empty for the core group.
    pub(crate) group: &'a str,
}

impl ScopedResource<'_> {
    fn is(&self, name: &str) -> bool {
        match name.split_once('.') {
            None => name == self.plural,
            Some((plural, group)) => plural == self.plural && group == self.group,
        }
    }
}

impl FaultScope {
    fn matches(&self, verb: Option<Verb>, resource: Option<ScopedResource<'_>>) -> bool {
        self.verb.is_none_or(|v| Some(v) == verb)
            && self
                .resource
                .as_deref()
                .is_none_or(|name| resource.is_some_and(|r| r.is(name)))
    }
}

/// An API server restart, as [`Faults::restart`] plays it: what a
/// kube-apiserver killed with `kill -9` and started again looks like to its
/// clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restart {
    /// How long the port refuses connections (the process is down).
    pub down: Duration,
    /// Then how long every API request answers 503 `ServiceUnavailable`
    /// with `Retry-After: 1` (the server listens but is not ready).
    pub unavailable: Duration,
    /// Then how long watches answer 429 "storage is (re)initializing" with
    /// `Retry-After: 1` (the watch cache fills; lists are served).
    pub initializing: Duration,
}

/// A server that keeps falling over, as [`Faults::flap`] plays it: `times`
/// restarts, each down for `down` (port closed, connections cut, history
/// lost as in [`Faults::restart`]) and then up for `up` before the next
/// one (the last one stays up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flapping {
    /// How long each restart keeps the port closed.
    pub down: Duration,
    /// How long the server answers between two restarts.
    pub up: Duration,
    /// How many restarts.
    pub times: u32,
}

/// Whether the server listens, as the accept loop and [`Faults::restart`]
/// share it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listening {
    /// Accepting connections, after this many restarts.
    Up { restarts: u64 },
    /// A restart is asked for or under way.
    Down(Restart),
    /// The server has shut down.
    Stopped,
}

/// The phases that follow a restart's return.
#[derive(Clone, Copy, Debug)]
struct AfterRestart {
    unavailable_until: std::time::Instant,
    initializing_until: std::time::Instant,
}

/// A replica whose watch cache is behind: it serves what a watch cache
/// serves as of `rv`.
#[derive(Clone, Copy, Debug)]
struct Lagging {
    remaining: u64,
    rv: u64,
}

#[derive(Debug)]
struct InjectedFailures {
    failure: Failure,
    remaining: u64,
    scope: FaultScope,
    /// The end of a window of failures ([`Faults::fail_for`]).
    until: Option<std::time::Instant>,
    /// Only WatchList requests ([`Faults::fail_watch_lists_for`]).
    watch_lists_only: bool,
}

/// The fault-injection handle (cheap to clone).
#[derive(Clone)]
pub struct Faults {
    inner: Arc<FaultState>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").finish_non_exhaustive()
    }
}

pub(crate) struct FaultState {
    core: Arc<Core>,
    flow_control: Arc<FlowControl>,
    latency_ms: AtomicU64,
    failures: Mutex<Vec<InjectedFailures>>,
    lagging: Mutex<Option<Lagging>>,
    initializing: Mutex<Vec<(String, std::time::Instant)>>,
    listening: watch::Sender<Listening>,
    after_restart: Mutex<Option<AfterRestart>>,
    expire_lists: AtomicU64,
    expire_watches: AtomicU64,
    close_after: AtomicU64,
    corrupt: AtomicU64,
    foreign: AtomicU64,
    close_epoch: watch::Sender<u64>,
    paused: watch::Sender<bool>,
    restarts: AtomicU64,
}

fn take_one(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl Faults {
    pub(crate) fn new(core: Arc<Core>, flow_control: Arc<FlowControl>) -> Self {
        Self {
            inner: Arc::new(FaultState {
                core,
                flow_control,
                latency_ms: AtomicU64::new(0),
                failures: Mutex::new(Vec::new()),
                lagging: Mutex::new(None),
                initializing: Mutex::new(Vec::new()),
                listening: watch::Sender::new(Listening::Up { restarts: 0 }),
                after_restart: Mutex::new(None),
                expire_lists: AtomicU64::new(0),
                expire_watches: AtomicU64::new(0),
                close_after: AtomicU64::new(0),
                corrupt: AtomicU64::new(0),
                foreign: AtomicU64::new(0),
                close_epoch: watch::Sender::new(0),
                paused: watch::Sender::new(false),
                restarts: AtomicU64::new(0),
            }),
        }
    }

    /// Ends every open watch now (the response ends cleanly, as when
    /// kube-apiserver closes a watch).
    pub fn close_all_watches(&self) {
        self.inner.close_epoch.send_modify(|e| *e += 1);
    }

    /// Ends each watch (open or future) after it has sent `events` events
    /// (bookmarks not counted); `None` turns this off.
    pub fn close_watches_after(&self, events: Option<u64>) {
        self.inner
            .close_after
            .store(events.unwrap_or(0), Ordering::SeqCst);
    }

    /// The next `n` lists answer HTTP 410 `Expired`.
    pub fn expire_next_lists(&self, n: u64) {
        self.inner.expire_lists.fetch_add(n, Ordering::SeqCst);
    }

    /// The next `n` watches answer one ERROR event with a 410 `Expired` Status.
    pub fn expire_next_watches(&self, n: u64) {
        self.inner.expire_watches.fetch_add(n, Ordering::SeqCst);
    }

    /// Drops all retained event history: watches, continue tokens and
    /// exact lists from before now get 410 `Expired`.
    pub fn compact(&self) {
        self.inner.core.store.compact();
    }

    /// The next `n` API requests (all of them) fail with `failure`.
    pub fn fail_next(&self, n: u64, failure: Failure) {
        self.fail_next_matching(n, failure, FaultScope::default());
    }

    /// The next `n` API requests within `scope` fail with `failure`.
    pub fn fail_next_matching(&self, n: u64, failure: Failure, scope: FaultScope) {
        if n > 0 {
            self.inner.failures.lock().push(InjectedFailures {
                failure,
                remaining: n,
                scope,
                until: None,
                watch_lists_only: false,
            });
        }
    }

    /// Every API request within `scope` fails with `failure` for the next
    /// `duration` (a window of overload or outage, however few requests
    /// come meanwhile; [`Faults::fail_next`] counts requests instead).
    pub fn fail_for(&self, duration: Duration, failure: Failure, scope: FaultScope) {
        self.inner.failures.lock().push(InjectedFailures {
            failure,
            remaining: u64::MAX,
            scope,
            until: Some(std::time::Instant::now() + duration),
            watch_lists_only: false,
        });
    }

    /// Every WatchList request (a watch with `sendInitialEvents=true`)
    /// fails with `failure` for the next `duration`; plain watches and
    /// lists are served (a server whose priority and fairness throttles the
    /// expensive initial-events streams, say).
    pub fn fail_watch_lists_for(&self, duration: Duration, failure: Failure) {
        self.inner.failures.lock().push(InjectedFailures {
            failure,
            remaining: u64::MAX,
            scope: FaultScope {
                verb: Some(Verb::Watch),
                resource: None,
            },
            until: Some(std::time::Instant::now() + duration),
            watch_lists_only: true,
        });
    }

    /// At most `limit` API requests in flight (`None`: no limit); beyond
    /// it, 429 with `Retry-After: 1`, as kube-apiserver's priority and
    /// fairness rejects what it cannot seat (the `flow_control` module: a watch
    /// holds its seat only until its initial events are sent).
    pub fn limit_in_flight(&self, limit: Option<usize>) {
        self.inner.flow_control.set_limit(limit);
    }

    /// Restarts the server `flapping.times` times ([`Faults::restart`]
    /// with no 503 or watch-cache phase), up for `flapping.up` between two
    /// restarts. Returns once the last restart is over (or the server has
    /// shut down).
    pub async fn flap(&self, flapping: Flapping) {
        let restart = Restart {
            down: flapping.down,
            unavailable: Duration::ZERO,
            initializing: Duration::ZERO,
        };
        for i in 0..flapping.times {
            if i > 0 {
                tokio::time::sleep(flapping.up).await;
            }
            self.restart(restart).await;
            if matches!(*self.inner.listening.borrow(), Listening::Stopped) {
                return;
            }
        }
    }

    /// How many restarts ([`Faults::restart`], [`Faults::flap`]) the
    /// server has come back from.
    pub fn restarts(&self) -> u64 {
        self.inner.restarts.load(Ordering::SeqCst)
    }

    /// The next `requests` lists and watches that a watch cache serves are
    /// answered by a replica whose cache lags at `rv` (several API servers
    /// behind a load balancer):
    ///
    /// - a list at `"0"` returns the state at `rv`, with `rv` as its
    ///   resourceVersion;
    /// - a list at a version `n` (`NotOlderThan`, or unset without `limit`)
    ///   returns the state at `rv` when `n <= rv`, else 504 "Too large
    ///   resource version" (the replica does not catch up);
    /// - a watch from a version `n <= rv` sends the events up to `rv` and
    ///   ends; from `n > rv` it answers 504 "Too large resource version".
    ///
    /// Consistent reads (`resourceVersion=""`), exact and continued lists and
    /// WatchList requests are served fresh and do not count. A state at `rv`
    /// older than the retained history is served fresh. Replaces an earlier
    /// setting.
    pub fn serve_from_lagging_replica(&self, requests: u64, rv: u64) {
        *self.inner.lagging.lock() = (requests > 0).then_some(Lagging {
            remaining: requests,
            rv,
        });
    }

    /// For the next `duration`, watches of `resource` (its plural, or
    /// plural and group as in [`FaultScope::resource`]) answer HTTP 429
    /// "storage is (re)initializing" with `Retry-After: 1`, as
    /// kube-apiserver does while the watch cache of a CRD just established
    /// initializes.
    pub fn initialize_watch_cache(&self, resource: &str, duration: Duration) {
        let until = std::time::Instant::now() + duration;
        let mut list = self.inner.initializing.lock();
        list.retain(|(name, _)| name != resource);
        list.push((resource.to_owned(), until));
    }

    /// Restarts the server as a killed kube-apiserver comes back: every
    /// connection is cut (watches and requests under way end without a
    /// word), the port refuses connections for `restart.down`, then every
    /// API request answers 503 for `restart.unavailable`, then watches
    /// answer 429 "storage is (re)initializing" for `restart.initializing`.
    /// The stored objects survive (they are in etcd); the watch history
    /// does not: a watch or exact read from a version older than the
    /// restart answers 410 Expired, a list at such a version (not older
    /// than) is served. Returns once the port accepts connections again
    /// (or the server has shut down); a restart asked for while one is
    /// under way waits for it and then plays its own.
    pub async fn restart(&self, restart: Restart) {
        let mut rx = self.inner.listening.subscribe();
        let before = loop {
            match *rx.borrow_and_update() {
                Listening::Up { restarts } => break restarts,
                Listening::Stopped => return,
                Listening::Down(_) => {}
            }
            if rx.changed().await.is_err() {
                return;
            }
        };
        self.inner.listening.send_replace(Listening::Down(restart));
        // the sender lives as long as `self`: `wait_for` ends on a change
        let _ = rx
            .wait_for(|l| match l {
                Listening::Up { restarts } => *restarts > before,
                Listening::Stopped => true,
                Listening::Down(_) => false,
            })
            .await;
    }

    /// Every API request waits this long before it is served.
    pub fn set_latency(&self, latency: Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.inner.latency_ms.store(ms, Ordering::SeqCst);
    }

    /// The next `n` watch events sent (on any watch) are replaced by a
    /// frame that is not valid JSON; the watch goes on after it.
    pub fn corrupt_next_watch_frames(&self, n: u64) {
        self.inner.corrupt.fetch_add(n, Ordering::SeqCst);
    }

    /// The next `n` watch events sent (on any watch) are replaced by a
    /// well-formed event whose object is of an unexpected kind (a `Status`
    /// in an ADDED event); the watch goes on after it.
    pub fn send_unexpected_kind_frames(&self, n: u64) {
        self.inner.foreign.fetch_add(n, Ordering::SeqCst);
    }

    /// Stops delivering watch events (they queue in the history window).
    pub fn pause_watches(&self) {
        self.inner.paused.send_replace(true);
    }

    /// Resumes watch delivery.
    pub fn resume_watches(&self) {
        self.inner.paused.send_replace(false);
    }

    /// Clears every injected fault (does not reopen closed watches).
    pub fn reset(&self) {
        let s = &self.inner;
        s.latency_ms.store(0, Ordering::SeqCst);
        s.failures.lock().clear();
        *s.lagging.lock() = None;
        s.initializing.lock().clear();
        *s.after_restart.lock() = None;
        s.expire_lists.store(0, Ordering::SeqCst);
        s.expire_watches.store(0, Ordering::SeqCst);
        s.close_after.store(0, Ordering::SeqCst);
        s.corrupt.store(0, Ordering::SeqCst);
        s.foreign.store(0, Ordering::SeqCst);
        s.paused.send_replace(false);
    }

    pub(crate) fn flow_control(&self) -> &FlowControl {
        &self.inner.flow_control
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_millis(self.inner.latency_ms.load(Ordering::SeqCst))
    }

    /// Takes one injected failure for this request, if any applies.
    ///
    /// `watch_list`: the request is a WatchList (a watch with
    /// `sendInitialEvents=true`).
    pub(crate) fn take_failure(
        &self,
        verb: Option<Verb>,
        resource: Option<ScopedResource<'_>>,
        watch_list: bool,
    ) -> Option<Failure> {
        let mut list = self.inner.failures.lock();
        let now = std::time::Instant::now();
        list.retain(|f| f.until.is_none_or(|until| now < until));
        let idx = list.iter().position(|f| {
            f.remaining > 0
                && f.scope.matches(verb, resource)
                && (watch_list || !f.watch_lists_only)
        })?;
        let entry = list.get_mut(idx)?;
        entry.remaining -= 1;
        let failure = entry.failure;
        if entry.remaining == 0 {
            list.remove(idx);
        }
        Some(failure)
    }

    /// Whether the watch cache of `resource` is initializing.
    pub(crate) fn initializing(&self, resource: ScopedResource<'_>) -> bool {
        let now = std::time::Instant::now();
        if self
            .after_restart()
            .is_some_and(|a| now < a.initializing_until)
        {
            return true;
        }
        let mut list = self.inner.initializing.lock();
        list.retain(|(_, until)| *until > now);
        list.iter().any(|(name, _)| resource.is(name))
    }

    /// Whether the server is back from a restart but not ready (every API
    /// request answers 503).
    pub(crate) fn unavailable(&self) -> bool {
        self.after_restart()
            .is_some_and(|a| std::time::Instant::now() < a.unavailable_until)
    }

    fn after_restart(&self) -> Option<AfterRestart> {
        let mut after = self.inner.after_restart.lock();
        if after.is_some_and(|a| std::time::Instant::now() >= a.initializing_until) {
            *after = None;
        }
        *after
    }

    pub(crate) fn subscribe_listening(&self) -> watch::Receiver<Listening> {
        self.inner.listening.subscribe()
    }

    /// The server went down: what etcd saw meanwhile (the restarted
    /// server's own writes) moves the version on, and the new watch cache
    /// holds no history.
    pub(crate) fn went_down(&self) {
        self.inner.core.store.restart();
    }

    /// The server listens again after its `restarts`-th restart.
    pub(crate) fn came_back(&self, restart: Restart, restarts: u64) {
        let now = std::time::Instant::now();
        let unavailable_until = now + restart.unavailable;
        *self.inner.after_restart.lock() = Some(AfterRestart {
            unavailable_until,
            initializing_until: unavailable_until + restart.initializing,
        });
        self.inner.restarts.store(restarts, Ordering::SeqCst);
        self.inner
            .listening
            .send_replace(Listening::Up { restarts });
    }

    /// The server has shut down: restarts asked for end at once.
    pub(crate) fn stopped(&self) {
        self.inner.listening.send_replace(Listening::Stopped);
    }

    /// The lagging replica's version, if it serves this request.
    pub(crate) fn take_lagging(&self) -> Option<u64> {
        let mut lagging = self.inner.lagging.lock();
        let l = lagging.as_mut()?;
        l.remaining -= 1;
        let rv = l.rv;
        if l.remaining == 0 {
            *lagging = None;
        }
        Some(rv)
    }

    pub(crate) fn take_list_expiry(&self) -> bool {
        take_one(&self.inner.expire_lists)
    }

    pub(crate) fn take_watch_expiry(&self) -> bool {
        take_one(&self.inner.expire_watches)
    }

    pub(crate) fn take_foreign_frame(&self) -> bool {
        self.inner.foreign.load(Ordering::Relaxed) > 0 && take_one(&self.inner.foreign)
    }

    pub(crate) fn take_corrupt_frame(&self) -> bool {
        self.inner.corrupt.load(Ordering::Relaxed) > 0 && take_one(&self.inner.corrupt)
    }

    pub(crate) fn close_after(&self) -> Option<u64> {
        Some(self.inner.close_after.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    pub(crate) fn subscribe_close(&self) -> watch::Receiver<u64> {
        self.inner.close_epoch.subscribe()
    }

    pub(crate) fn subscribe_paused(&self) -> watch::Receiver<bool> {
        self.inner.paused.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENTS: ScopedResource<'static> = ScopedResource {
        plural: "deployments",
        group: "apps",
    };
    const CONFIGMAPS: ScopedResource<'static> = ScopedResource {
        plural: "configmaps",
        group: "",
    };

    fn scope(verb: Option<Verb>, resource: Option<&str>) -> FaultScope {
        FaultScope {
            verb,
            resource: resource.map(str::to_owned),
        }
    }

    #[test]
    fn a_scope_names_the_resource_by_plural_or_by_plural_and_group() {
        for name in ["deployments", "deployments.apps"] {
            let s = scope(Some(Verb::Create), Some(name));
            assert!(s.matches(Some(Verb::Create), Some(DEPLOYMENTS)), "{name}");
            assert!(!s.matches(Some(Verb::Update), Some(DEPLOYMENTS)), "{name}");
            assert!(!s.matches(Some(Verb::Create), Some(CONFIGMAPS)), "{name}");
            assert!(!s.matches(Some(Verb::Create), None), "{name}");
        }
        assert!(!scope(None, Some("deployments.batch")).matches(None, Some(DEPLOYMENTS)));
        assert!(scope(None, Some("configmaps")).matches(None, Some(CONFIGMAPS)));
        assert!(!scope(None, Some("configmaps.apps")).matches(None, Some(CONFIGMAPS)));
    }

    /// A window of failures fails every matching request, however many,
    /// until it ends; an ended window fails none and is dropped.
    #[test]
    fn a_window_of_failures_ends_on_time_not_on_a_count() {
        let server = crate::TestServer::builder().start_blocking().unwrap();
        let faults = server.faults();
        let deployments = || scope(None, Some("deployments"));
        faults.fail_for(Duration::ZERO, Failure::InternalError, deployments());
        assert_eq!(
            faults.take_failure(Some(Verb::List), Some(DEPLOYMENTS), false),
            None
        );
        assert!(faults.inner.failures.lock().is_empty());

        faults.fail_for(
            Duration::from_secs(3600),
            Failure::ServiceUnavailable,
            deployments(),
        );
        for _ in 0..1_000 {
            assert_eq!(
                faults.take_failure(Some(Verb::List), Some(DEPLOYMENTS), false),
                Some(Failure::ServiceUnavailable)
            );
        }
        assert_eq!(
            faults.take_failure(Some(Verb::List), Some(CONFIGMAPS), false),
            None
        );
        faults.reset();
        assert_eq!(
            faults.take_failure(Some(Verb::List), Some(DEPLOYMENTS), false),
            None
        );
    }

    /// A WatchList window fails WatchList requests only: plain watches and
    /// lists of the same resource are served.
    #[test]
    fn a_watch_list_window_fails_watch_lists_only() {
        let server = crate::TestServer::builder().start_blocking().unwrap();
        let faults = server.faults();
        let throttled = Failure::TooManyRequests {
            retry_after_secs: 1,
        };
        faults.fail_watch_lists_for(Duration::from_secs(3600), throttled);
        assert_eq!(
            faults.take_failure(Some(Verb::Watch), Some(CONFIGMAPS), true),
            Some(throttled)
        );
        assert_eq!(
            faults.take_failure(Some(Verb::Watch), Some(CONFIGMAPS), false),
            None
        );
        assert_eq!(
            faults.take_failure(Some(Verb::List), Some(CONFIGMAPS), true),
            None
        );
        faults.reset();
        assert_eq!(
            faults.take_failure(Some(Verb::Watch), Some(CONFIGMAPS), true),
            None
        );
    }

    #[test]
    fn an_empty_scope_matches_every_api_request() {
        let s = FaultScope::default();
        assert!(s.matches(None, None));
        assert!(s.matches(Some(Verb::Watch), Some(CONFIGMAPS)));
    }
}
