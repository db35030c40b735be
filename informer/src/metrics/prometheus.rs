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

use kcontrol_reflector::metrics::prometheus::{
    counters, gauges, histograms, with_label, HistogramFamily, Labels,
};

use super::InformerMetrics;
use crate::notification::NotificationKind;

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
        let r = registry.sub_registry_with_prefix("informer");
        Self {
            queued: counters(
                r,
                "notifications",
                "Notifications queued for a handler, by kind",
            ),
            handled: counters(r, "handled", "Notifications a handler has handled, by kind"),
            duration: histograms(
                r,
                "handler_duration_seconds",
                "How long a handler took per notification",
                handler_histogram,
            ),
            panics: counters(r, "handler_panics", "Handler calls that panicked"),
            pending: gauges(
                r,
                "pending_notifications",
                "Notifications waiting in a handler's buffer",
            ),
            synced: gauges(
                r,
                "handler_synced",
                "1 once the handler has handled its initial list",
            ),
            handlers: gauges(r, "handlers", "Handlers registered"),
        }
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
        with_label(&self.labels(handler), "kind", kind.as_str())
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
