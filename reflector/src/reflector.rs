//! [`Reflector`]: the ListAndWatch loop — sync (a list, or WatchList's
//! initial events), then watch until a relist is needed, with backoff
//! between attempts and periodic resyncs — and the state it keeps (the last
//! synced resourceVersion and what the server has shown it supports).
//!
//! The list phase lives in [`crate::list`], the watch phase in
//! [`crate::watch`], WatchList in [`crate::watch_list`].

use std::any::Any;
use std::convert::Infallible;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::{Bookmark, ListParams, ResourceVersionMatch, WatchParams};
use kcontrol_deltafifo::DeltaFifo;
use kcontrol_indexer::{
    ApiResource, DynamicObject, KubeObject, PARTIAL_METADATA_API_VERSION, PARTIAL_METADATA_KIND,
};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::backoff::Pacing;
use crate::config::ReflectorConfig;
use crate::error::ReflectorError;
use crate::lister_watcher::{ListerWatcher, WatchEventStream};
use crate::metrics::{NoopReflectorMetrics, ReflectorMetrics, RestartCause, WatchEventType};

/// How often a running reflector checks whether its FIFO was closed.
const CLOSED_CHECK_PERIOD: Duration = Duration::from_millis(500);

/// What the reflector has learned so far.
#[derive(Debug, Default)]
pub(crate) struct SyncState {
    /// The resourceVersion of the last list, event or bookmark processed.
    pub(crate) last_sync_rv: Option<String>,
    /// The last version cannot be listed at (410 or "too large"): list at
    /// `""` (a consistent read) until a list succeeds (RF1).
    pub(crate) last_rv_unavailable: bool,
    /// A list at `"0"` came back in pages: the server honours `limit` even
    /// there (no watch cache), so relists are paged too.
    pub(crate) paginated_result: bool,
    /// A list (or WatchList sync) has succeeded once.
    pub(crate) synced_once: bool,
    /// The newest resourceVersion that lists or WatchLists since the last
    /// successful sync have delivered into the FIFO (RF9 streams them):
    /// after one fails, lists ask for data not older than it, so the FIFO
    /// never goes back in time (RF1). Cleared when a sync succeeds.
    pub(crate) delivered_floor: Option<String>,
    /// What ended the last ListAndWatch iteration (the next relist's cause).
    pub(crate) relist_cause: Option<RestartCause>,
    /// What ended the last watch, or made it fail to start (the next
    /// watch's restart cause).
    pub(crate) watch_end_cause: Option<RestartCause>,
    /// The last list or watch failure, described, until a list succeeds.
    pub(crate) last_error: Option<String>,
}

/// Whether resourceVersion `a` is newer than `b`. Versions are opaque to
/// clients, but every server in use sends decimal integers: compared by
/// length, then bytes, which is their numeric order.
pub(crate) fn is_newer(a: &str, b: &str) -> bool {
    (a.len(), a) > (b.len(), b)
}

/// Keeps in `slot` the newer of its version and `rv`.
pub(crate) fn keep_newest(slot: &mut Option<String>, rv: &str) {
    if rv.is_empty() {
        return;
    }
    if slot.as_deref().is_none_or(|cur| is_newer(rv, cur)) {
        *slot = Some(rv.to_owned());
    }
}

/// Lists and watches one resource into a [`DeltaFifo`], with client-go's
/// Reflector semantics (RF1–RF9 of DESIGN.md):
///
/// - **RF1** the first list asks for resourceVersion `"0"` (any cached
///   state), a relist for the last synced version; a list answered 410 or
///   "too large resourceVersion" is retried at once at `""` (a consistent
///   read), and the last version counts as unavailable until a list succeeds;
/// - **RF2** lists are paged (`limit` = [`page_size`](crate::WatchConfig::page_size),
///   `continue` tokens); an expired continue token falls back to one full
///   list under the same version rules; a single huge page (the watch cache
///   ignores `limit` at `"0"`) is handled the same way;
/// - **RF3** watches start from the last synced version with bookmarks and
///   a `timeoutSeconds` uniform in `[min_watch_timeout, 2 × min_watch_timeout)`;
///   bookmarks only advance [`last_sync_resource_version`](Self::last_sync_resource_version);
/// - **RF4** (client-go's `watch`) a watch that ends normally — or whose
///   connection is reset or cut mid-stream — is resumed at once from the
///   last version without a relist; 429, a refused connection and a watch
///   start answered 5xx with `Retry-After` back off and watch again;
///   everything else (410, other 5xx including 504, other start failures,
///   a watch that ends without any event in under a second) relists after
///   a backoff, a 410 at the last synced version first;
/// - **RF5** backoff is exponential from 800 ms to 30 s with jitter, and
///   starts over only after two minutes without one
///   ([`BackoffConfig`](crate::BackoffConfig)); a request answered 429 or
///   5xx with `Retry-After` is sent again after exactly that wait, up to
///   ten times (client-go's REST client); after that, and for a wait asked
///   in an `ERROR` event, the wait is never shorter than asked; the relist
///   a 410 calls for after an outage is spread over the backoff instead of
///   waiting it; [`PacingPreset::ClientGo`](crate::PacingPreset) follows
///   client-go's rules instead;
/// - **RF6** with [`use_watch_list`](crate::WatchConfig::use_watch_list), the
///   state comes from a watch with `sendInitialEvents=true`: the initial
///   events (changes and plain bookmarks among them applied too) stream
///   into [`DeltaFifo::begin_replace`], which is finished at the bookmark
///   annotated `k8s.io/initial-events-end`; a stream or request that fails
///   before it deletes nothing; a refused or throttled one is tried again
///   after a backoff, any other failure lists instead for that attempt
///   (client-go); the next attempt tries WatchList again;
/// - **RF7** a watch event that does not decode, or holds an object of
///   another kind, is an error that restarts the watch (from the last
///   version; after three such failures in a row without progress, a
///   relist) — never a panic, never a silent skip; an event of a type the
///   client does not know relists (client-go's decoder rejects it);
/// - **RF8** after any sequence of faults the FIFO's consumer converges to
///   the server's state;
/// - **RF9** a relist never holds the list: each object is decoded and
///   queued as it arrives, page by page, and the replace is finished after
///   the last page (or dropped, deleting nothing, if a page fails); after
///   such a failure, until a relist completes, relists are buffered and
///   applied whole, and [`relist_incomplete`](Self::relist_incomplete) is
///   true.
///
/// It also resyncs the FIFO every [`resync_period`](ReflectorConfig::resync_period)
/// (when [`should_resync`](ReflectorConfig::should_resync) agrees), calls
/// the [`error_handler`](ReflectorConfig::error_handler) on every failure
/// that ends a ListAndWatch iteration (not on those healed at once: a list
/// retried at `""`, an expired continue token, a re-watch, the WatchList
/// fallback; those are logged at debug),
/// and reports to [`metrics`](ReflectorConfig::metrics).
pub struct Reflector<K: KubeObject> {
    pub(crate) lister_watcher: Arc<dyn ListerWatcher<K>>,
    pub(crate) fifo: Arc<DeltaFifo<K>>,
    pub(crate) config: ReflectorConfig<K>,
    pub(crate) metrics: Arc<dyn ReflectorMetrics>,
    pub(crate) state: Mutex<SyncState>,
    pub(crate) pacing: Mutex<Pacing>,
    /// What the lister-watcher says it lists, for RF7 checks.
    pub(crate) expected: Option<ApiResource>,
    running: AtomicBool,
}

impl<K: KubeObject> fmt::Debug for Reflector<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.config.name)
            .field("resource", &self.expected)
            .field("state", &*self.state.lock())
            .finish_non_exhaustive()
    }
}

/// Clears the running flag when `run` ends, however it ends.
struct RunningGuard<'a>(&'a AtomicBool);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<K> Reflector<K>
where
    K: KubeObject + DeserializeOwned,
{
    /// A reflector that fills `fifo` from `lister_watcher`. Nothing happens
    /// until [`run`](Self::run).
    pub fn new(
        lister_watcher: Arc<dyn ListerWatcher<K>>,
        fifo: Arc<DeltaFifo<K>>,
        config: ReflectorConfig<K>,
    ) -> Self {
        let metrics = config
            .metrics
            .clone()
            .unwrap_or_else(|| Arc::new(NoopReflectorMetrics));
        Self {
            expected: lister_watcher.api_resource(),
            pacing: Mutex::new(Pacing::new(
                config.watch_config.pacing,
                config.watch_config.backoff,
            )),
            lister_watcher,
            fifo,
            config,
            metrics,
            state: Mutex::new(SyncState::default()),
            running: AtomicBool::new(false),
        }
    }

    /// The resourceVersion of the last list, event or bookmark processed;
    /// `None` before the first sync.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.state.lock().last_sync_rv.clone()
    }

    /// The last list or watch failure since the last successful list (or
    /// WatchList sync), described for a person: `None` while healthy. A
    /// resource the server does not serve (404) says so, which is what a
    /// cache that never syncs usually means (a CRD not installed).
    pub fn last_error(&self) -> Option<String> {
        self.state.lock().last_error.clone()
    }

    /// The reflector's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The FIFO this reflector fills.
    pub fn fifo(&self) -> &Arc<DeltaFifo<K>> {
        &self.fifo
    }

    /// Lists and watches until `shutdown` is cancelled or the FIFO is
    /// closed, retrying every failure after a backoff (client-go's `Run`).
    ///
    /// Returns promptly on shutdown, whatever it is doing (listing,
    /// watching, backing off): the list or watch under way is dropped, and
    /// a relist under way deletes nothing. A closed FIFO ends it too, within
    /// about half a second. A reflector runs once at
    /// a time: a second concurrent call returns at once.
    pub async fn run(&self, shutdown: CancellationToken) {
        if self.running.swap(true, Ordering::AcqRel) {
            tracing::warn!(reflector = %self.config.name, "reflector is already running");
            return;
        }
        let _running = RunningGuard(&self.running);
        tracing::debug!(reflector = %self.config.name, resource = ?self.expected, "reflector starts");
        while !shutdown.is_cancelled() && !self.fifo.is_closed() {
            let ended = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                () = self.fifo_closed() => break,
                Err(error) = self.list_and_watch() => error,
            };
            if error_stops(&ended) || self.fifo.is_closed() {
                break;
            }
            self.report(&ended);
            self.state.lock().relist_cause = Some(ended.restart_cause());
            let delay = self.next_backoff(&ended);
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                () = self.fifo_closed() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        tracing::debug!(reflector = %self.config.name, "reflector stops");
    }

    /// Completes once the FIFO is closed (checked every
    /// [`CLOSED_CHECK_PERIOD`]: the FIFO has no close notification for
    /// producers).
    async fn fifo_closed(&self) {
        while !self.fifo.is_closed() {
            tokio::time::sleep(CLOSED_CHECK_PERIOD).await;
        }
    }

    /// One ListAndWatch: sync, then watch (and resync) until something
    /// needs a relist. Never returns `Ok`.
    async fn list_and_watch(&self) -> Result<Infallible, ReflectorError> {
        let initial_watch = self.sync().await?;
        tokio::select! {
            result = self.watch_loop(initial_watch) => result,
            result = self.resync_loop() => result,
        }
    }

    /// Gets the current state into the FIFO: through WatchList when enabled
    /// and supported (returning the watch to go on with), else a list.
    async fn sync(&self) -> Result<Option<WatchEventStream<K>>, ReflectorError> {
        if self.config.watch_config.use_watch_list {
            loop {
                let preset = self.pacing.lock().preset();
                match self.watch_list().await {
                    Ok(stream) => return Ok(Some(stream)),
                    Err(e) if e.is_fifo_closed() => return Err(e),
                    // client-go: a server refusing connections or asking for a
                    // wait (429) gets WatchList again after a backoff: a list
                    // would cost it more (RF6)
                    Err(e) if e.retries_watch_list(preset) => {
                        self.note_retry(&e);
                        tokio::time::sleep(self.next_backoff(&e)).await;
                    }
                    // client-go: any other WatchList failure falls back to a
                    // list for this attempt (making progress beats waiting); the
                    // next attempt tries WatchList again (a 403 while RBAC
                    // propagates must not turn it off for good)
                    Err(e) => {
                        tracing::warn!(reflector = %self.config.name, error = %e, "WatchList failed; listing instead for this attempt");
                        self.metrics.failure();
                        break;
                    }
                }
            }
        }
        self.list().await?;
        Ok(None)
    }

    /// Queues a resync every resync period, when `should_resync` agrees.
    async fn resync_loop(&self) -> Result<Infallible, ReflectorError> {
        let Some(period) = self.config.resync_period.filter(|p| !p.is_zero()) else {
            return std::future::pending().await;
        };
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if self.config.should_resync.as_ref().is_none_or(|f| f()) {
                tracing::trace!(reflector = %self.config.name, "resync");
                self.fifo.resync()?;
                self.metrics.resync();
            }
        }
    }

    /// Records a processed resourceVersion.
    pub(crate) fn set_last_sync_rv(&self, rv: String) {
        self.metrics.last_resource_version(&rv);
        self.state.lock().last_sync_rv = Some(rv);
    }

    /// The version a list asks for and how it must match (RF1): `""` when
    /// the last one is unavailable; after a failed list or WatchList that
    /// delivered objects, the newest version delivered (or the last synced,
    /// if newer) with `NotOlderThan`, so no replica older than what the
    /// FIFO already holds can answer; else `"0"` before the first sync and
    /// the last synced version after it.
    pub(crate) fn list_target(&self) -> (String, Option<ResourceVersionMatch>) {
        let state = self.state.lock();
        if state.last_rv_unavailable {
            return (String::new(), None);
        }
        if let Some(floor) = &state.delivered_floor {
            let mut newest = Some(floor.clone());
            if let Some(last) = &state.last_sync_rv {
                keep_newest(&mut newest, last);
            }
            let rv = newest.unwrap_or_else(|| floor.clone());
            return (rv, Some(ResourceVersionMatch::NotOlderThan));
        }
        let rv = state.last_sync_rv.clone().unwrap_or_else(|| "0".to_owned());
        (rv, None)
    }

    /// Records that the list or WatchList under way has delivered objects up
    /// to `newest` into the FIFO (cleared when it succeeds).
    pub(crate) fn note_delivered(&self, newest: Option<&str>) {
        if let Some(rv) = newest {
            let started = {
                let mut state = self.state.lock();
                let started = state.delivered_floor.is_none();
                keep_newest(&mut state.delivered_floor, rv);
                started && state.delivered_floor.is_some()
            };
            if started {
                self.metrics.relist_incomplete(true);
            }
        }
    }

    /// A list or WatchList completed its replace: the last version is
    /// available again, and nothing is left half delivered.
    pub(crate) fn sync_finished(&self) {
        let was_incomplete = {
            let mut state = self.state.lock();
            state.last_rv_unavailable = false;
            state.synced_once = true;
            state.last_error = None;
            state.delivered_floor.take().is_some()
        };
        if was_incomplete {
            self.metrics.relist_incomplete(false);
        }
    }

    /// Whether a list or WatchList has delivered part of a new state into
    /// the FIFO without completing it: while it streams, or after it failed
    /// part way until a relist completes. Meanwhile the store may hold
    /// objects at the newer version beside objects that state no longer
    /// has (the completed replace deletes them). Relists after such a
    /// failure are buffered and applied whole (RF9), so none of them can
    /// leave it so. Also reported as
    /// [`ReflectorMetrics::relist_incomplete`].
    pub fn relist_incomplete(&self) -> bool {
        self.state.lock().delivered_floor.is_some()
    }

    /// The wait before the next attempt after `error` (RF5).
    pub(crate) fn next_backoff(&self, error: &ReflectorError) -> Duration {
        let delay = self.pacing.lock().after_failure(error.pacing());
        self.metrics.backoff(delay);
        delay
    }

    /// The wait before a watch that confirms `error` (a 410 after an
    /// outage) with a second answer, instead of relisting now (RF5).
    pub(crate) fn confirm_before_relist(&self, error: &ReflectorError) -> Option<Duration> {
        let wait = self.pacing.lock().confirm_before_relist(error.pacing())?;
        self.metrics.backoff(wait);
        tracing::debug!(reflector = %self.config.name, ?wait, "410 after an outage: confirming before the relist");
        Some(wait)
    }

    /// Reports a list about to start: a relist (with its cause) after the
    /// first sync.
    pub(crate) fn list_starting(&self) {
        let (relist, cause) = {
            let mut state = self.state.lock();
            (state.synced_once, state.relist_cause.take())
        };
        if let (true, Some(cause)) = (relist, cause) {
            self.metrics.relisting(cause);
        }
        self.metrics.list_started(relist);
    }

    /// Reports a watch request about to be sent: a restart (with its
    /// cause) when a watch ended before.
    pub(crate) fn watch_starting(&self) {
        if let Some(cause) = self.state.lock().watch_end_cause.take() {
            self.metrics.watch_restarting(cause);
        }
        self.metrics.watch_started();
    }

    /// Records what ended a watch (or its start).
    pub(crate) fn watch_ended_by(&self, cause: RestartCause) {
        self.state.lock().watch_end_cause = Some(cause);
    }

    /// A watch delivered an event: an outage is over (RF5).
    pub(crate) fn progressed(&self) {
        self.pacing.lock().progressed();
    }

    /// A failure the reflector heals at once (a list retried at `""`, an
    /// expired continue token, a re-watch): counted and logged at debug,
    /// not handed to the error handler, which (as in client-go) hears only
    /// of failures that end a ListAndWatch iteration.
    pub(crate) fn note_retry(&self, error: &ReflectorError) {
        self.metrics.failure();
        self.state.lock().last_error = Some(error.describe());
        tracing::debug!(reflector = %self.config.name, %error, "retrying");
    }

    /// Hands a failure that ended a ListAndWatch iteration to the error
    /// handler, the log and the metrics.
    pub(crate) fn report(&self, error: &ReflectorError) {
        self.metrics.failure();
        self.state.lock().last_error = Some(error.describe());
        if error.is_expired() {
            tracing::debug!(reflector = %self.config.name, %error, "resourceVersion expired");
        } else {
            tracing::warn!(reflector = %self.config.name, %error, "list or watch failed");
        }
        if let Some(handler) = &self.config.error_handler {
            handler(error);
        }
    }

    /// Checks an object's kind (RF7), strips its managedFields if asked
    /// (a protobuf answer came without them) and applies the transform.
    pub(crate) fn prepare(&self, mut obj: K) -> Result<K, ReflectorError> {
        self.check_kind(&obj)?;
        if self.config.watch_config.strip_managed_fields {
            obj.drop_managed_fields();
        }
        Ok(match &self.config.transform {
            Some(transform) => transform(obj),
            None => obj,
        })
    }

    /// The parameters every list starts from: the decoding the config asks.
    pub(crate) fn base_list_params(&self) -> ListParams {
        ListParams {
            strip_managed_fields: self.config.watch_config.strip_managed_fields,
            ..ListParams::default()
        }
    }

    /// The parameters every watch starts from: the decoding the config asks.
    pub(crate) fn base_watch_params(&self) -> WatchParams {
        WatchParams {
            strip_managed_fields: self.config.watch_config.strip_managed_fields,
            ..WatchParams::default()
        }
    }

    /// Rejects a dynamic object that says it is of another kind than the
    /// resource listed (typed objects check their kind when they decode).
    fn check_kind(&self, obj: &K) -> Result<(), ReflectorError> {
        let (Some(expected), Some(dynamic)) = (
            &self.expected,
            (obj as &dyn Any).downcast_ref::<DynamicObject>(),
        ) else {
            return Ok(());
        };
        match &dynamic.types {
            Some(types) => {
                self.check_type_meta(expected, Some(&types.api_version), Some(&types.kind))
            }
            None => Ok(()),
        }
    }

    /// Counts a bookmark and rejects one that names another resource's type
    /// (a dynamic reflector's check; typed objects check when they decode).
    pub(crate) fn accept_bookmark(&self, bookmark: &Bookmark) -> Result<(), ReflectorError> {
        self.metrics.watch_event(WatchEventType::Bookmark);
        match &self.expected {
            Some(expected) => self.check_type_meta(
                expected,
                bookmark.api_version.as_deref(),
                bookmark.kind.as_deref(),
            ),
            None => Ok(()),
        }
    }

    /// Rejects an `apiVersion`/`kind` pair (where given) that is not the
    /// resource's.
    pub(crate) fn check_type_meta(
        &self,
        expected: &ApiResource,
        api_version: Option<&str>,
        kind: Option<&str>,
    ) -> Result<(), ReflectorError> {
        let want_version = expected.api_version();
        let version_ok = api_version.is_none_or(|v| v == want_version);
        let kind_ok = kind.is_none_or(|k| k == expected.kind);
        if version_ok && kind_ok {
            return Ok(());
        }
        // a metadata-only list and watch: every object and bookmark is a
        // PartialObjectMetadata (asked for by the lister-watcher's Accept)
        if api_version == Some(PARTIAL_METADATA_API_VERSION) && kind == Some(PARTIAL_METADATA_KIND)
        {
            return Ok(());
        }
        Err(ReflectorError::UnexpectedObject {
            expected: format!("{}/{}", want_version, expected.kind),
            got: format!("{}/{}", api_version.unwrap_or("?"), kind.unwrap_or("?")),
        })
    }
}

/// Whether an error ends `run` (the FIFO is closed).
fn error_stops(error: &ReflectorError) -> bool {
    error.is_fifo_closed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WatchConfig;
    use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn run_is_a_send_future_and_the_reflector_is_shareable() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Reflector<ConfigMap>>();
        shareable::<Reflector<DynamicObject>>();
        let client = kcontrol_client::Client::new(kcontrol_client::Config::new(
            "http://127.0.0.1:1".parse().expect("a valid URL"),
        ))
        .expect("a client");
        let api = kcontrol_client::Api::<ConfigMap>::all(client);
        let reflector = Reflector::new(
            Arc::new(api),
            DeltaFifo::builder().build(),
            ReflectorConfig::default(),
        );
        let run = reflector.run(CancellationToken::new());
        assert_send(&run);
        assert_eq!(reflector.last_sync_resource_version(), None);
        assert_eq!(reflector.list_target().0, "0");
        reflector.state.lock().last_sync_rv = Some("12".into());
        assert_eq!(reflector.list_target().0, "12");
        reflector.state.lock().last_rv_unavailable = true;
        assert_eq!(reflector.list_target().0, "");
        // after a failed list that delivered up to 30: not older than that
        reflector.state.lock().last_rv_unavailable = false;
        reflector.note_delivered(Some("30"));
        reflector.note_delivered(Some("9"));
        assert_eq!(
            reflector.list_target(),
            ("30".to_owned(), Some(ResourceVersionMatch::NotOlderThan))
        );
        reflector.state.lock().last_sync_rv = Some("100".into());
        assert_eq!(reflector.list_target().0, "100");
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert!(is_newer("10", "9"));
        assert!(!is_newer("9", "10"));
        assert!(!is_newer("7", "7"));
        let mut slot = None;
        keep_newest(&mut slot, "");
        assert_eq!(slot, None);
        keep_newest(&mut slot, "99");
        keep_newest(&mut slot, "100");
        keep_newest(&mut slot, "98");
        assert_eq!(slot.as_deref(), Some("100"));
    }

    #[test]
    fn page_limits_follow_client_go() {
        let client = kcontrol_client::Client::new(kcontrol_client::Config::new(
            "http://127.0.0.1:1".parse().expect("a valid URL"),
        ))
        .expect("a client");
        let api = kcontrol_client::Api::<ConfigMap>::all(client);
        let reflector = Reflector::new(
            Arc::new(api),
            DeltaFifo::builder().build(),
            ReflectorConfig::default().watch_config(WatchConfig::default().page_size(100)),
        );
        assert_eq!(reflector.page_limit("0"), Some(100));
        assert_eq!(reflector.page_limit(""), Some(100));
        assert_eq!(
            reflector.page_limit("42"),
            None,
            "relists read the watch cache"
        );
        reflector.state.lock().paginated_result = true;
        assert_eq!(reflector.page_limit("42"), Some(100));
    }
}
