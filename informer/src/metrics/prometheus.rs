//! Prometheus metrics for informers (feature `prometheus`), through the
//! `prometheus-client` crate: every metric is a family labelled
//! `name="<informer name>"` and `handler="<handler name>"` under the
//! `informer_` prefix, like the reflector's.
//!
//! | metric | type |
//! |---|---|
//! | `informer_notifications_total` (also labelled `kind`) | counter: notifications queued |
//! | `informer_handled_total` (also labelled `kind`) | counter: notifications handled |
//! | `informer_handler_duration_seconds` | histogram |
//! | `informer_handler_panics_total` | counter |
//! | `informer_pending_notifications` | gauge: buffer depth |
//! | `informer_handler_synced` | gauge: 1 once synced |
//! | `informer_handlers` (labelled `name` only) | gauge: handlers registered |

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::InformerMetrics;
use crate::notification::NotificationKind;

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Handler call durations: 10 µs to about 10 s.
fn handler_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_01, 4.0, 11))
}

/// The informer metric families of one registry. Register once, then hand
/// each informer its own handle with [`for_informer`](Self::for_informer).
///
/// ```
/// use kcontrol_informer::metrics::prometheus::PrometheusInformerMetrics;
/// use kcontrol_informer::NotificationKind;
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let families = PrometheusInformerMetrics::new(&mut registry);
/// let metrics = families.for_informer("configmaps");
/// metrics.handler_registered("cache-warmer", true);
/// metrics.notification_queued("cache-warmer", NotificationKind::Add);
/// metrics.pending("cache-warmer", 1);
/// metrics.handler_synced("cache-warmer");
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"informer_notifications_total{name="configmaps",handler="cache-warmer",kind="add"} 1"#));
/// assert!(text.contains(r#"informer_handler_synced{name="configmaps",handler="cache-warmer"} 1"#));
/// assert!(text.contains(r#"informer_handlers{name="configmaps"} 1"#));
/// ```
#[derive(Clone, Debug)]
pub struct PrometheusInformerMetrics {
    queued: Family<Labels, Counter>,
    handled: Family<Labels, Counter>,
    duration: HistogramFamily,
    panics: Family<Labels, Counter>,
    pending: Family<Labels, Gauge>,
    synced: Family<Labels, Gauge>,
    handlers: Family<Labels, Gauge>,
}

impl PrometheusInformerMetrics {
    /// Registers the informer metric families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            queued: Family::default(),
            handled: Family::default(),
            duration: Family::new_with_constructor(handler_histogram),
            panics: Family::default(),
            pending: Family::default(),
            synced: Family::default(),
            handlers: Family::default(),
        };
        let r = registry.sub_registry_with_prefix("informer");
        r.register(
            "notifications",
            "Notifications queued for a handler, by kind",
            m.queued.clone(),
        );
        r.register(
            "handled",
            "Notifications a handler has handled, by kind",
            m.handled.clone(),
        );
        r.register(
            "handler_duration_seconds",
            "How long a handler took per notification",
            m.duration.clone(),
        );
        r.register(
            "handler_panics",
            "Handler calls that panicked",
            m.panics.clone(),
        );
        r.register(
            "pending_notifications",
            "Notifications waiting in a handler's buffer",
            m.pending.clone(),
        );
        r.register(
            "handler_synced",
            "1 once the handler has handled its initial list",
            m.synced.clone(),
        );
        r.register("handlers", "Handlers registered", m.handlers.clone());
        m
    }

    /// The metrics of the informer called `name`.
    pub fn for_informer(&self, name: &str) -> Arc<dyn InformerMetrics> {
        Arc::new(Named {
            families: self.clone(),
            name: name.to_owned(),
        })
    }
}

/// One informer's handle on the families.
struct Named {
    families: PrometheusInformerMetrics,
    name: String,
}

impl Named {
    fn labels(&self, handler: &str) -> Labels {
        vec![
            ("name".to_owned(), self.name.clone()),
            ("handler".to_owned(), handler.to_owned()),
        ]
    }

    fn with_kind(&self, handler: &str, kind: NotificationKind) -> Labels {
        let mut labels = self.labels(handler);
        labels.push(("kind".to_owned(), kind.as_str().to_owned()));
        labels
    }
}

impl InformerMetrics for Named {
    fn notification_queued(&self, handler: &str, kind: NotificationKind) {
        self.families
            .queued
            .get_or_create(&self.with_kind(handler, kind))
            .inc();
    }

    fn notification_handled(
        &self,
        handler: &str,
        kind: NotificationKind,
        elapsed: Duration,
        panicked: bool,
    ) {
        self.families
            .handled
            .get_or_create(&self.with_kind(handler, kind))
            .inc();
        let labels = self.labels(handler);
        self.families
            .duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if panicked {
            self.families.panics.get_or_create(&labels).inc();
        }
    }

    fn pending(&self, handler: &str, depth: usize) {
        let depth = i64::try_from(depth).unwrap_or(i64::MAX);
        self.families
            .pending
            .get_or_create(&self.labels(handler))
            .set(depth);
    }

    fn handler_synced(&self, handler: &str) {
        self.families
            .synced
            .get_or_create(&self.labels(handler))
            .set(1);
    }

    fn handler_registered(&self, handler: &str, registered: bool) {
        let informer = vec![("name".to_owned(), self.name.clone())];
        let count = self.families.handlers.get_or_create(&informer);
        if registered {
            count.inc();
            self.families
                .synced
                .get_or_create(&self.labels(handler))
                .set(0);
        } else {
            count.dec();
        }
    }
}
