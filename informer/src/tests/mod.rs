//! Unit tests of the informer: an informer runs on a tokio runtime with a
//! [`FeedSource`], and the test fills its DeltaFIFO by hand, the way the
//! reflector would. Handlers record what they see; a sentinel object pushed
//! through the FIFO is the barrier that says a handler has seen everything
//! queued before it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod in1_buffering;
mod in2_late_handlers;
mod in3_notifications;
mod in4_resync_sync_removal;
mod in6_wait;
mod indexers;
mod metrics;
mod model;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kcontrol_deltafifo::DeltaFifo;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{meta_namespace_key, Object, ObjectOrTombstone};
use parking_lot::{Condvar, Mutex};
use tokio_util::sync::CancellationToken;

use crate::builder::SharedIndexInformerBuilder;
use crate::source::FeedSource;
use crate::{ResourceEventHandler, SharedIndexInformer};

/// The namespace of barrier objects, left out of every comparison.
pub(crate) const SENTINEL_NS: &str = "sentinel";

/// Every bounded wait in these tests.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) fn cm(ns: &str, name: &str, rv: &str) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.meta_mut().namespace = Some(ns.into());
    cm.meta_mut().name = Some(name.into());
    cm.meta_mut().resource_version = Some(rv.into());
    cm.data = Some([("rv".to_owned(), rv.to_owned())].into());
    Arc::new(cm)
}

pub(crate) fn key(obj: &ConfigMap) -> String {
    meta_namespace_key(obj).unwrap()
}

pub(crate) fn rv(obj: &ConfigMap) -> String {
    obj.resource_version().unwrap_or_default().to_owned()
}

pub(crate) use kcontrol_testserver::eventually_blocking;

/// A small deterministic random number generator (xorshift64*).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33).unwrap() % n
    }
}

/// One notification as a recorder saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Add {
        key: String,
        rv: String,
        initial: bool,
    },
    Update {
        key: String,
        old: String,
        new: String,
        same_arc: bool,
    },
    Delete {
        key: String,
        rv: String,
        tombstone: bool,
    },
}

#[derive(Default)]
pub(crate) struct RecState {
    /// Every non-sentinel notification, in order.
    pub(crate) log: Vec<Event>,
    /// key -> resourceVersion, rebuilt from the notifications.
    pub(crate) view: BTreeMap<String, String>,
    /// Notifications that did not fit the view (an add of a known key, an
    /// update whose old state is not the view's, a delete of an unknown key).
    pub(crate) errors: Vec<String>,
    /// The highest sentinel number seen.
    pub(crate) sentinel: u64,
}

impl RecState {
    fn apply(&mut self, event: Event) {
        match &event {
            Event::Add { key, rv, .. } => {
                if let Some(prev) = self.view.insert(key.clone(), rv.clone()) {
                    self.errors
                        .push(format!("add of {key}@{rv} already at {prev}"));
                }
            }
            Event::Update { key, old, new, .. } => match self.view.insert(key.clone(), new.clone())
            {
                Some(prev) if &prev == old => {}
                prev => self.errors.push(format!(
                    "update of {key} from {old} to {new}, view had {prev:?}"
                )),
            },
            Event::Delete { key, rv, .. } => {
                if self.view.remove(key).is_none() {
                    self.errors
                        .push(format!("delete of {key}@{rv} not in view"));
                }
            }
        }
        self.log.push(event);
    }
}

/// A gate a handler waits at (bounded by [`WAIT`]) until the test opens it.
#[derive(Default)]
pub(crate) struct Gate {
    open: Mutex<bool>,
    cond: Condvar,
    /// How many times a handler has arrived at the closed gate.
    arrived: Mutex<usize>,
}

impl Gate {
    pub(crate) fn pass(&self) {
        *self.arrived.lock() += 1;
        self.cond.notify_all();
        let mut open = self.open.lock();
        let deadline = Instant::now() + WAIT;
        while !*open {
            if self.cond.wait_until(&mut open, deadline).timed_out() {
                return;
            }
        }
    }

    pub(crate) fn open(&self) {
        *self.open.lock() = true;
        self.cond.notify_all();
    }

    pub(crate) fn arrived(&self) -> usize {
        *self.arrived.lock()
    }
}

/// A handler that records everything, optionally stopping at a gate
/// before handling each notification.
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) state: Mutex<RecState>,
    changed: Condvar,
    pub(crate) gate: Option<Arc<Gate>>,
}

impl Recorder {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub(crate) fn gated(gate: &Arc<Gate>) -> Arc<Self> {
        Arc::new(Self {
            gate: Some(Arc::clone(gate)),
            ..Self::default()
        })
    }

    fn record(&self, obj: &ConfigMap, event: impl FnOnce() -> Event) {
        if let Some(gate) = &self.gate {
            gate.pass();
        }
        let mut st = self.state.lock();
        if obj.namespace() == Some(SENTINEL_NS) {
            let n = obj
                .name()
                .and_then(|n| n.strip_prefix('s'))
                .and_then(|n| n.parse().ok());
            st.sentinel = st.sentinel.max(n.unwrap_or(0));
        } else {
            st.apply(event());
        }
        self.changed.notify_all();
    }

    /// Waits until the recorder has seen sentinel `n`.
    pub(crate) fn wait_sentinel(&self, n: u64) -> bool {
        let mut st = self.state.lock();
        let deadline = Instant::now() + WAIT;
        while st.sentinel < n {
            if self.changed.wait_until(&mut st, deadline).timed_out() {
                return st.sentinel >= n;
            }
        }
        true
    }

    /// Waits until at least `n` notifications are logged.
    pub(crate) fn wait_logged(&self, n: usize) -> bool {
        let mut st = self.state.lock();
        let deadline = Instant::now() + WAIT;
        while st.log.len() < n {
            if self.changed.wait_until(&mut st, deadline).timed_out() {
                return st.log.len() >= n;
            }
        }
        true
    }

    pub(crate) fn log(&self) -> Vec<Event> {
        self.state.lock().log.clone()
    }

    pub(crate) fn view(&self) -> BTreeMap<String, String> {
        self.state.lock().view.clone()
    }

    pub(crate) fn errors(&self) -> Vec<String> {
        self.state.lock().errors.clone()
    }
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, is_in_initial_list: bool) {
        self.record(obj, || Event::Add {
            key: key(obj),
            rv: rv(obj),
            initial: is_in_initial_list,
        });
    }

    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.record(new, || Event::Update {
            key: key(new),
            old: rv(old),
            new: rv(new),
            same_arc: Arc::ptr_eq(old, new),
        });
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        let o = obj.object();
        self.record(o, || Event::Delete {
            key: key(o),
            rv: rv(o),
            tombstone: obj.is_tombstone(),
        });
    }
}

/// An informer running on its own runtime, fed by the test.
pub(crate) struct Harness {
    pub(crate) informer: Arc<SharedIndexInformer<ConfigMap>>,
    pub(crate) source: Arc<FeedSource<ConfigMap>>,
    pub(crate) shutdown: CancellationToken,
    runtime: tokio::runtime::Runtime,
    task: Option<tokio::task::JoinHandle<()>>,
    sentinels: u64,
}

impl Harness {
    /// An informer built by `configure`, not yet running.
    pub(crate) fn new(
        configure: impl FnOnce(
            SharedIndexInformerBuilder<ConfigMap>,
        ) -> SharedIndexInformerBuilder<ConfigMap>,
    ) -> Self {
        let source = Arc::new(FeedSource::default());
        let feed: Arc<dyn crate::source::Source<ConfigMap>> = source.clone();
        let informer = configure(SharedIndexInformerBuilder::with_source(Box::new(
            move |_| feed,
        )))
        .build();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Self {
            informer,
            source,
            shutdown: CancellationToken::new(),
            runtime,
            task: None,
            sentinels: 0,
        }
    }

    /// Starts the informer and waits until its FIFO exists.
    pub(crate) fn start(&mut self) -> Arc<DeltaFifo<ConfigMap>> {
        let informer = Arc::clone(&self.informer);
        let token = self.shutdown.clone();
        self.task = Some(
            self.runtime
                .spawn(async move { informer.run(token).await.unwrap() }),
        );
        eventually_blocking("self.source.fifo().is_some()", || {
            self.source.fifo().is_some()
        });
        self.fifo()
    }

    pub(crate) fn fifo(&self) -> Arc<DeltaFifo<ConfigMap>> {
        self.source.fifo().unwrap()
    }

    /// Queues a sentinel and waits until the store and each recorder have
    /// seen it: they have then seen every change queued before.
    pub(crate) fn barrier(&mut self, recorders: &[&Recorder]) {
        self.sentinels += 1;
        let n = self.sentinels;
        let name = format!("s{n}");
        self.fifo().add(cm(SENTINEL_NS, &name, "0")).unwrap();
        let lister = self.informer.lister();
        eventually_blocking(format!("barrier {n} to be stored"), || {
            lister.get(SENTINEL_NS, &name).is_some()
        });
        for r in recorders {
            assert!(r.wait_sentinel(n), "a handler did not reach barrier {n}");
        }
    }

    /// The store as key -> resourceVersion, without sentinels.
    pub(crate) fn store_view(&self) -> BTreeMap<String, String> {
        self.informer
            .store()
            .list()
            .iter()
            .filter(|o| o.namespace() != Some(SENTINEL_NS))
            .map(|o| (key(o), rv(o)))
            .collect()
    }

    /// Stops the informer and waits until `run` returns.
    pub(crate) fn stop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            self.runtime
                .block_on(async { tokio::time::timeout(WAIT, task).await })
                .expect("run ended")
                .unwrap();
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
