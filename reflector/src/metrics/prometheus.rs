//! Prometheus metrics for reflectors (feature `prometheus`), through the
//! `prometheus-client` crate: every metric is a family labelled
//! `name="<reflector name>"` under the `reflector_` prefix.
//!
//! | metric | type |
//! |---|---|
//! | `reflector_lists_total` | counter |
//! | `reflector_relists_total` | counter |
//! | `reflector_list_items_total` | counter |
//! | `reflector_list_duration_seconds` | histogram |
//! | `reflector_watches_total` | counter |
//! | `reflector_watch_events_total` (also labelled `type`) | counter |
//! | `reflector_resyncs_total` | counter |
//! | `reflector_failures_total` | counter |
//! | `reflector_last_resource_version` | gauge (numeric versions only) |
//! | `reflector_items_per_list` | histogram: objects per successful list |
//! | `reflector_watch_duration_seconds` | histogram: how long watches lasted |
//! | `reflector_watch_restarts_total` | counter: watches after the first (a watch ended and another started) |
//! | `reflector_relist_incomplete` | gauge: 1 while a list has delivered part of a new state without completing it (the store may be mixed) |

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

use super::{ReflectorMetrics, RestartCause, WatchEventType};

/// A metric's labels: `name="<reflector or informer name>"` first.
#[doc(hidden)] // shared with kcontrol-informer's exporter, not API
pub type Labels = Vec<(String, String)>;

/// A family of histograms, each made by the family's bucket constructor.
#[doc(hidden)] // shared with kcontrol-informer's exporter, not API
pub type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Registers `family` in `registry` as `name` and returns it (a family is a
/// handle: the registry and the returned value share the metrics).
#[doc(hidden)] // shared with kcontrol-informer's exporter, not API
pub fn registered<M, C>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    family: Family<Labels, M, C>,
) -> Family<Labels, M, C>
where
    Family<Labels, M, C>: Metric + Clone,
{
    registry.register(name, help, family.clone());
    family
}

/// A counter family registered in `registry`.
#[doc(hidden)] // shared with kcontrol-informer's exporter, not API
pub fn counters(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, Counter> {
    registered(registry, name, help, Family::default())
}

/// A gauge family registered in `registry`.
#[doc(hidden)] // shared with kcontrol-informer's exporter, not API
pub fn gauges(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, Gauge> {
    registered(registry, name, help, Family::default())
}

/// A histogram family with `buckets` registered in `registry`.
#[doc(hidden)] // shared with kcontrol-informer's exporter, not API
pub fn histograms(
    registry: &mut Registry,
    name: &str,
    help: &str,
    buckets: fn() -> Histogram,
) -> HistogramFamily {
    registered(registry, name, help, Family::new_with_constructor(buckets))
}

/// `labels` and one more.
#[doc(hidden)] // shared with kcontrol-informer's exporter, not API
pub fn with_label(labels: &Labels, key: &str, value: &str) -> Labels {
    let mut more = labels.clone();
    more.push((key.to_owned(), value.to_owned()));
    more
}

/// Objects per list: 1 to about a million.
fn items_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 11))
}

/// Watch lifetimes: 0.1 s to about an hour.
fn watch_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 3.0, 10))
}

/// List durations: 10 ms to about 160 s.
fn list_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

/// The reflector metric families of one registry. Register once, then hand
/// each reflector its own handle with [`for_reflector`](Self::for_reflector).
///
/// ```
/// use kcontrol_reflector::metrics::prometheus::PrometheusReflectorMetrics;
/// use kcontrol_reflector::{RestartCause, WatchEventType};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let families = PrometheusReflectorMetrics::new(&mut registry);
/// let metrics = families.for_reflector("configmaps");
/// metrics.list_started(false);
/// metrics.relisting(RestartCause::Expired);
/// metrics.watch_event(WatchEventType::Modified);
/// metrics.last_resource_version("42");
/// metrics.relist_incomplete(true);
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"reflector_lists_total{name="configmaps"} 1"#));
/// assert!(text.contains(r#"reflector_last_resource_version{name="configmaps"} 42"#));
/// assert!(text.contains(r#"reflector_relists_total{name="configmaps",cause="expired"} 1"#));
/// assert!(text.contains(r#"reflector_watch_events_total{name="configmaps",type="MODIFIED"} 1"#));
/// assert!(text.contains(r#"reflector_relist_incomplete{name="configmaps"} 1"#));
/// ```
#[derive(Clone, Debug)]
pub struct PrometheusReflectorMetrics {
    lists: Family<Labels, Counter>,
    relists: Family<Labels, Counter>,
    items: Family<Labels, Counter>,
    list_duration: HistogramFamily,
    watches: Family<Labels, Counter>,
    events: Family<Labels, Counter>,
    resyncs: Family<Labels, Counter>,
    failures: Family<Labels, Counter>,
    last_rv: Family<Labels, Gauge<f64, AtomicU64>>,
    items_per_list: HistogramFamily,
    watch_duration: HistogramFamily,
    watch_restarts: Family<Labels, Counter>,
    relist_incomplete: Family<Labels, Gauge>,
}

impl PrometheusReflectorMetrics {
    /// Registers the reflector metric families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let r = registry.sub_registry_with_prefix("reflector");
        Self {
            lists: counters(r, "lists", "Lists started (including WatchList initial syncs)"),
            relists: counters(
                r,
                "relists",
                "Relists, by what ended the previous ListAndWatch iteration (cause)",
            ),
            items: counters(r, "list_items", "Objects received by lists"),
            list_duration: histograms(
                r,
                "list_duration_seconds",
                "How long successful lists took",
                list_histogram,
            ),
            watches: counters(r, "watches", "Watch requests sent"),
            events: counters(r, "watch_events", "Watch events received, by type"),
            resyncs: counters(r, "resyncs", "Resyncs queued"),
            failures: counters(r, "failures", "List and watch failures"),
            last_rv: registered(
                r,
                "last_resource_version",
                "The last synced resourceVersion (when numeric)",
                Family::default(),
            ),
            items_per_list: histograms(
                r,
                "items_per_list",
                "Objects received per successful list",
                items_histogram,
            ),
            watch_duration: histograms(
                r,
                "watch_duration_seconds",
                "How long watch streams lasted",
                watch_histogram,
            ),
            watch_restarts: counters(
                r,
                "watch_restarts",
                "Watches started again, by what ended the previous one (cause)",
            ),
            relist_incomplete: gauges(
                r,
                "relist_incomplete",
                "1 while a list or WatchList has delivered part of a new state without completing it: the store may hold objects at the newer version beside objects that state no longer has",
            ),
        }
    }

    /// The metrics of the reflector called `name`.
    pub fn for_reflector(&self, name: &str) -> Arc<dyn ReflectorMetrics> {
        let labels = vec![("name".to_owned(), name.to_owned())];
        let with_type = |t: WatchEventType| with_label(&labels, "type", t.as_str());
        let event_labels = [
            with_type(WatchEventType::Added),
            with_type(WatchEventType::Modified),
            with_type(WatchEventType::Deleted),
            with_type(WatchEventType::Bookmark),
            with_type(WatchEventType::Error),
        ];
        Arc::new(Named {
            families: self.clone(),
            labels,
            event_labels,
        })
    }
}

/// One reflector's handle on the families.
struct Named {
    families: PrometheusReflectorMetrics,
    labels: Labels,
    /// `labels` plus each event type, made once.
    event_labels: [Labels; 5],
}

impl Named {
    fn with_cause(&self, cause: RestartCause) -> Labels {
        with_label(&self.labels, "cause", cause.as_str())
    }
}

impl ReflectorMetrics for Named {
    fn list_started(&self, _relist: bool) {
        self.families.lists.get_or_create(&self.labels).inc();
    }

    fn relisting(&self, cause: RestartCause) {
        self.families
            .relists
            .get_or_create(&self.with_cause(cause))
            .inc();
    }

    fn watch_restarting(&self, cause: RestartCause) {
        self.families
            .watch_restarts
            .get_or_create(&self.with_cause(cause))
            .inc();
    }

    fn list_finished(&self, items: u64, elapsed: Duration) {
        self.families
            .items
            .get_or_create(&self.labels)
            .inc_by(items);
        self.families
            .list_duration
            .get_or_create(&self.labels)
            .observe(elapsed.as_secs_f64());
        self.families
            .items_per_list
            .get_or_create(&self.labels)
            .observe(items as f64);
    }

    fn watch_started(&self) {
        self.families.watches.get_or_create(&self.labels).inc();
    }

    fn watch_ended(&self, _events: u64, elapsed: Duration) {
        self.families
            .watch_duration
            .get_or_create(&self.labels)
            .observe(elapsed.as_secs_f64());
    }

    fn watch_event(&self, event: WatchEventType) {
        let [added, modified, deleted, bookmark, error] = &self.event_labels;
        let labels = match event {
            WatchEventType::Added => added,
            WatchEventType::Modified => modified,
            WatchEventType::Deleted => deleted,
            WatchEventType::Bookmark => bookmark,
            WatchEventType::Error => error,
        };
        self.families.events.get_or_create(labels).inc();
    }

    fn resync(&self) {
        self.families.resyncs.get_or_create(&self.labels).inc();
    }

    fn failure(&self) {
        self.families.failures.get_or_create(&self.labels).inc();
    }

    fn last_resource_version(&self, resource_version: &str) {
        if let Ok(v) = resource_version.parse::<f64>() {
            self.families.last_rv.get_or_create(&self.labels).set(v);
        }
    }

    fn relist_incomplete(&self, incomplete: bool) {
        self.families
            .relist_incomplete
            .get_or_create(&self.labels)
            .set(i64::from(incomplete));
    }
}
