//! An event recorder for controllers: client-go's `tools/record`, for
//! core/v1 Events.
//!
//! [`Recorder::event`] never blocks and never fails: it stamps the event and
//! puts it in a bounded buffer (dropping and counting it when the buffer is
//! full). A background task takes events from the buffer in order and,
//! like client-go's `EventCorrelator`:
//!
//! - writes a repeat (same source, object, type, reason and message) as a
//!   PATCH of the earlier Event's `count`, `lastTimestamp` and `message`
//!   instead of a new Event;
//! - combines similar events (ten messages with the same reason about one
//!   object within ten minutes) into one "combined from similar events";
//! - limits each source + object to a burst of 25 events refilled at one
//!   every five minutes, so a hot loop cannot flood the API server;
//! - retries writes that failed for a transient reason (network, 429, 5xx)
//!   with backoff, without holding up the events behind them.
//!
//! The caches behind this are LRUs of 4096 keys by default
//! ([`CorrelatorOptions`]). Messages longer than 1024 bytes are cut there.
//!
//! [`Recorder::publish`] is the same path awaited: it returns once the
//! event is written (or filtered, or given up), so a controller can be
//! sure an event is recorded before it acts — before removing a
//! finalizer, the last moment the object the event is about exists.
//!
//! ```no_run
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kcontrol_client::events::{EventType, Recorder};
//! use kcontrol_client::{Api, Client};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::try_default()?;
//! let recorder = Recorder::new(client.clone(), "my-controller")?;
//! let deploy = Api::<Deployment>::namespaced(client, "default").get("web").await?;
//! recorder.event(&deploy, EventType::Normal, "Scaled", "scaled to 3 replicas");
//! recorder.flush().await; // before exiting: wait until it is written
//! println!("{:?}", recorder.stats());
//! # Ok(()) }
//! ```

mod correlator;
mod keys;
mod reference;
mod spam;
mod stats;
mod writer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kcontrol_indexer::TypedResource;

use crate::Client;
use tokio::sync::{mpsc, oneshot};

pub use correlator::CorrelatorOptions;
pub use reference::object_reference;
pub use stats::RecorderStats;

use stats::Counters;
use writer::{Message, RetryPolicy, Writer};

/// The longest message kept; longer ones are cut at a character boundary.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// The default number of events the buffer holds (client-go's
/// `maxQueuedEvents`).
pub const DEFAULT_BUFFER_SIZE: usize = 1000;

/// The type of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something happened as expected (`Normal`).
    Normal,
    /// Something may need attention (`Warning`).
    Warning,
}

impl EventType {
    /// The API value: `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an awaited event ([`Recorder::publish`]) was not written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The per-object spam filter dropped it (more than its burst of
    /// events about one object from this source).
    #[error("the event was dropped by the per-object spam filter")]
    Filtered,
    /// The API server refused the write, or every attempt failed.
    #[error("writing the event failed: {0}")]
    Write(#[source] crate::Error),
    /// The writer stopped (its runtime shut down) before the event was
    /// written.
    #[error("the event writer stopped before the event was written")]
    WriterStopped,
}

/// A recorder could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecorderError {
    /// [`RecorderBuilder::build`] was called outside a tokio runtime, so the
    /// background writer has nowhere to run.
    #[error("an event recorder must be built inside a tokio runtime (its writer is a task)")]
    NoRuntime,
}

/// Options of a [`Recorder`]; see [`Recorder::builder`].
#[derive(Clone, Debug)]
pub struct RecorderBuilder {
    client: Client,
    component: String,
    host: Option<String>,
    buffer: usize,
    correlator: CorrelatorOptions,
    retry: RetryPolicy,
}

impl RecorderBuilder {
    /// `source.host` and `reportingInstance` of the events (e.g. the node or
    /// pod name); none by default.
    #[must_use]
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Events the buffer holds before new ones are dropped (default
    /// [`DEFAULT_BUFFER_SIZE`], at least 1).
    #[must_use]
    pub fn buffer_size(mut self, events: usize) -> Self {
        self.buffer = events.max(1);
        self
    }

    /// Aggregation, counting and spam-filter settings.
    #[must_use]
    pub fn correlator(mut self, options: CorrelatorOptions) -> Self {
        self.correlator = options;
        self
    }

    /// Attempts per write, the first included (default 5; at least 1), and
    /// the delay before the second (default 1 s, doubled each time up to
    /// 30 s; a server's `Retry-After` wins).
    #[must_use]
    pub fn retries(mut self, max_attempts: u32, backoff: Duration) -> Self {
        self.retry.max_attempts = max_attempts.max(1);
        self.retry.backoff = backoff;
        self
    }

    /// Starts the background writer on the current tokio runtime.
    pub fn build(self) -> Result<Recorder, RecorderError> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| RecorderError::NoRuntime)?;
        let (tx, rx) = mpsc::channel(self.buffer);
        let counters = Arc::new(Counters::default());
        let writer = Writer::new(
            self.client,
            correlator::Correlator::new(self.correlator),
            Arc::clone(&counters),
            self.retry,
        );
        runtime.spawn(writer.run(rx));
        Ok(Recorder {
            inner: Arc::new(Inner {
                tx,
                counters,
                source: EventSource {
                    component: Some(self.component),
                    host: self.host,
                },
                last_nanos: AtomicU64::new(0),
            }),
        })
    }
}

/// Records core/v1 Events about objects, in the background. Cheap to clone:
/// clones share the buffer, the writer and the counters. The writer ends
/// once every clone is dropped and the buffer is written out.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

struct Inner {
    tx: mpsc::Sender<Message>,
    counters: Arc<Counters>,
    source: EventSource,
    last_nanos: AtomicU64,
}

impl Drop for Inner {
    /// The last handle is gone: events still queued are written only if
    /// the runtime lives on; say so, since a controller that forgot
    /// [`Recorder::flush`] before exiting loses them.
    fn drop(&mut self) {
        let queued = self.tx.max_capacity() - self.tx.capacity();
        if queued > 0 {
            tracing::warn!(
                queued,
                "event recorder dropped with events not yet written: call `Recorder::flush().await` before exiting, or they may be lost"
            );
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("component", &self.inner.source.component)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder reporting as `component` (the controller's name, e.g.
    /// `sample-controller`), with the default options. Must be called inside
    /// a tokio runtime.
    pub fn new(client: Client, component: impl Into<String>) -> Result<Self, RecorderError> {
        Self::builder(client, component).build()
    }

    /// A builder for a recorder reporting as `component`.
    pub fn builder(client: Client, component: impl Into<String>) -> RecorderBuilder {
        RecorderBuilder {
            client,
            component: component.into(),
            host: None,
            buffer: DEFAULT_BUFFER_SIZE,
            correlator: CorrelatorOptions::default(),
            retry: RetryPolicy {
                max_attempts: 5,
                backoff: Duration::from_secs(1),
                max_backoff: Duration::from_secs(30),
                max_pending: DEFAULT_BUFFER_SIZE,
            },
        }
    }

    /// Records an event about `obj`. Never blocks: the event is written in
    /// the background (or dropped and counted when the buffer is full).
    pub fn event<K: TypedResource>(
        &self,
        obj: &K,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.event_for(object_reference(obj), event_type, reason, message);
    }

    /// Records an event about the object `reference` points at.
    pub fn event_for(
        &self,
        reference: ObjectReference,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let event = self.make_event(reference, event_type, reason, message.into());
        log_event(&event, event_type);
        let counters = &self.inner.counters;
        match self
            .inner
            .tx
            .try_send(Message::Event(Box::new(event), Instant::now(), None))
        {
            Ok(()) => {
                counters.recorded.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                let dropped = counters.dropped.fetch_add(1, Ordering::Relaxed);
                if dropped.is_power_of_two() || dropped == 0 {
                    tracing::warn!(dropped = dropped + 1, "event buffer full: dropping events");
                }
            }
        }
    }

    /// Records an event about `obj` and waits until it is written: the
    /// buffered path of [`event`](Self::event) (in order with it,
    /// correlated, counted, retried on transient failures), awaited. Waits
    /// for room when the buffer is full instead of dropping the event.
    ///
    /// Use it where the event must exist before the controller goes on:
    /// before removing a finalizer (the object, and the reason it went,
    /// are otherwise gone before the event is written), before exiting.
    /// Elsewhere [`event`](Self::event) is cheaper: it never waits.
    ///
    /// # Errors
    /// [`PublishError`]: filtered as spam, refused or failed after the
    /// retries, or the writer stopped.
    pub async fn publish<K: TypedResource>(
        &self,
        obj: &K,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) -> Result<(), PublishError> {
        self.publish_for(object_reference(obj), event_type, reason, message)
            .await
    }

    /// [`publish`](Self::publish) about the object `reference` points at.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub async fn publish_for(
        &self,
        reference: ObjectReference,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) -> Result<(), PublishError> {
        let event = self.make_event(reference, event_type, reason, message.into());
        log_event(&event, event_type);
        let (reply, outcome) = oneshot::channel();
        let message = Message::Event(Box::new(event), Instant::now(), Some(reply));
        if self.inner.tx.send(message).await.is_err() {
            return Err(PublishError::WriterStopped);
        }
        self.inner.counters.recorded.fetch_add(1, Ordering::Relaxed);
        outcome.await.unwrap_or(Err(PublishError::WriterStopped))
    }

    /// What the recorder did so far.
    pub fn stats(&self) -> RecorderStats {
        self.inner.counters.snapshot()
    }

    /// Waits until every event recorded before this call is written, given
    /// up, or filtered (retries included). Returns at once if the writer is
    /// gone (its runtime shut down).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.inner.tx.send(Message::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }

    /// A unique name: `<object name>.<hex nanoseconds>`, as client-go names
    /// events; strictly increasing per recorder so names never collide.
    fn event_name(&self, object_name: &str, now: Timestamp) -> String {
        let wall = u64::try_from(now.as_nanosecond()).unwrap_or(0);
        let mut prev = self.inner.last_nanos.load(Ordering::Relaxed);
        let nanos = loop {
            let next = wall.max(prev.saturating_add(1));
            match self.inner.last_nanos.compare_exchange_weak(
                prev,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break next,
                Err(actual) => prev = actual,
            }
        };
        let base = if object_name.is_empty() {
            "event"
        } else {
            object_name
        };
        format!("{base}.{nanos:x}")
    }

    fn make_event(
        &self,
        involved: ObjectReference,
        event_type: EventType,
        reason: &str,
        mut message: String,
    ) -> Event {
        truncate(&mut message, MAX_MESSAGE_BYTES);
        let now = wall_clock_now();
        let name = self.event_name(involved.name.as_deref().unwrap_or(""), now);
        let namespace = involved
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let source = &self.inner.source;
        Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            involved_object: involved,
            reason: Some(reason.to_owned()),
            message: Some(message),
            type_: Some(event_type.as_str().to_owned()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            source: Some(source.clone()),
            reporting_component: source.component.clone(),
            reporting_instance: source.host.clone(),
            ..Event::default()
        }
    }
}

fn log_event(event: &Event, event_type: EventType) {
    let object = event.involved_object.name.as_deref().unwrap_or("");
    let namespace = event.involved_object.namespace.as_deref().unwrap_or("");
    let kind = event.involved_object.kind.as_deref().unwrap_or("");
    let reason = event.reason.as_deref().unwrap_or("");
    let message = event.message.as_deref().unwrap_or("");
    match event_type {
        EventType::Normal => {
            tracing::debug!(kind, namespace, object, reason, message, "event")
        }
        EventType::Warning => {
            tracing::info!(kind, namespace, object, reason, message, "warning event")
        }
    }
}

/// The current wall-clock time (jiff's own `now` needs its `std` feature,
/// which k8s-openapi does not turn on).
pub(crate) fn wall_clock_now() -> Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    let nanos = i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0);
    Timestamp::new(seconds, nanos).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Cuts `s` to at most `max` bytes at a character boundary.
fn truncate(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn client() -> Client {
        // Nothing listens on port 9: writes fail fast with a connect error.
        let config = Config::new(http::Uri::from_static("http://127.0.0.1:9"))
            .with_request_timeout(Some(Duration::from_secs(1)));
        Client::new(config).unwrap()
    }

    fn cm(name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm
    }

    #[test]
    fn building_outside_a_runtime_is_an_error() {
        assert!(matches!(
            Recorder::new(client(), "c"),
            Err(RecorderError::NoRuntime)
        ));
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let mut s = "é".repeat(600); // 1200 bytes
        truncate(&mut s, MAX_MESSAGE_BYTES);
        assert_eq!(s.len(), 1024);
        let mut short = "ok".to_owned();
        truncate(&mut short, 10);
        assert_eq!(short, "ok");
    }

    #[tokio::test]
    async fn events_are_stamped_like_client_go_events() {
        let recorder = Recorder::builder(client(), "ctl")
            .host("node-1")
            .build()
            .unwrap();
        let e = recorder.make_event(
            object_reference(&cm("a")),
            EventType::Warning,
            "Failed",
            "boom".into(),
        );
        assert!(e.metadata.name.as_deref().unwrap().starts_with("a."));
        assert_eq!(e.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.count, Some(1));
        assert_eq!(e.first_timestamp, e.last_timestamp);
        assert_eq!(e.reporting_component.as_deref(), Some("ctl"));
        assert_eq!(e.reporting_instance.as_deref(), Some("node-1"));
        assert_eq!(e.source.unwrap().host.as_deref(), Some("node-1"));
        // cluster-scoped objects: events go to "default"
        let mut ns = k8s_openapi::api::core::v1::Namespace::default();
        ns.metadata.name = Some("team".into());
        let e = recorder.make_event(object_reference(&ns), EventType::Normal, "R", String::new());
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    }

    #[tokio::test]
    async fn names_never_collide() {
        let recorder = Recorder::new(client(), "ctl").unwrap();
        let now = wall_clock_now();
        let names: std::collections::HashSet<String> =
            (0..1000).map(|_| recorder.event_name("x", now)).collect();
        assert_eq!(names.len(), 1000);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_buffer_drops_and_counts_without_blocking() {
        let recorder = Recorder::builder(client(), "ctl")
            .buffer_size(4)
            .retries(1, Duration::from_millis(1))
            .build()
            .unwrap();
        // The writer task cannot run until this task yields, so the buffer
        // fills: 4 accepted, 6 dropped, and no call blocked.
        for i in 0..10 {
            recorder.event(&cm("a"), EventType::Normal, "R", format!("m{i}"));
        }
        let stats = recorder.stats();
        assert_eq!((stats.recorded, stats.dropped), (4, 6));
        recorder.flush().await;
        let stats = recorder.stats();
        // nothing listens: every accepted event fails once and is given up
        assert_eq!(stats.failed, 4, "{stats:?}");
        assert_eq!(stats.processed(), stats.recorded);
    }
}
