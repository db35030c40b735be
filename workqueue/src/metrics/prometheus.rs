//! Prometheus metrics for queues (feature `prometheus`), through the
//! `prometheus-client` crate, named as client-go names them: every metric
//! is a family labelled `name="<queue name>"` under the `workqueue_` prefix.
//!
//! | metric | type |
//! |---|---|
//! | `workqueue_depth` | gauge |
//! | `workqueue_adds_total` | counter |
//! | `workqueue_queue_duration_seconds` | histogram |
//! | `workqueue_work_duration_seconds` | histogram |
//! | `workqueue_unfinished_work_seconds` | gauge |
//! | `workqueue_longest_running_processor_seconds` | gauge |
//! | `workqueue_retries_total` | counter |

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::{CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric};

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;
type SecondsGauge = Gauge<f64, AtomicU64>;

/// Buckets of the duration histograms: 10 ns to 1000 s, ×10 (client-go's).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

/// Makes the metrics of named queues in a Prometheus registry. Register it
/// once per registry and share it (`Arc`) between queues.
///
/// ```
/// use std::sync::Arc;
/// use kcontrol_workqueue::metrics::prometheus::PrometheusMetricsProvider;
/// use kcontrol_workqueue::{Queue, QueueConfig};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
/// let queue: Queue<String> =
///     Queue::with_config(QueueConfig::new().name("foos").metrics_provider(provider));
/// queue.add("default/a".to_owned());
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_adds_total{name="foos"} 1"#));
/// # queue.shut_down();
/// ```
#[derive(Clone, Debug)]
pub struct PrometheusMetricsProvider {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: HistogramFamily,
    work_duration: HistogramFamily,
    unfinished: Family<Labels, SecondsGauge>,
    longest: Family<Labels, SecondsGauge>,
    retries: Family<Labels, Counter>,
}

impl PrometheusMetricsProvider {
    /// Registers the workqueue metric families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let provider = Self {
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
        };
        let r = registry.sub_registry_with_prefix("workqueue");
        r.register(
            "depth",
            "Current depth of workqueue",
            provider.depth.clone(),
        );
        r.register(
            "adds",
            "Total number of adds handled by workqueue",
            provider.adds.clone(),
        );
        r.register(
            "queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            provider.latency.clone(),
        );
        r.register(
            "work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            provider.work_duration.clone(),
        );
        r.register(
            "unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads.",
            provider.unfinished.clone(),
        );
        r.register(
            "longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            provider.longest.clone(),
        );
        r.register(
            "retries",
            "Total number of retries handled by workqueue",
            provider.retries.clone(),
        );
        provider
    }
}

fn labels(name: &str) -> Labels {
    vec![("name".to_owned(), name.to_owned())]
}

struct PromGauge(Gauge);
struct PromSecondsGauge(SecondsGauge);
struct PromCounter(Counter);
struct PromHistogram(Histogram);

impl GaugeMetric for PromGauge {
    fn inc(&self) {
        self.0.inc();
    }
    fn dec(&self) {
        self.0.dec();
    }
}

impl SettableGaugeMetric for PromSecondsGauge {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}

impl CounterMetric for PromCounter {
    fn inc(&self) {
        self.0.inc();
    }
}

impl HistogramMetric for PromHistogram {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        Box::new(PromGauge(self.depth.get_or_create_owned(&labels(name))))
    }
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(self.adds.get_or_create_owned(&labels(name))))
    }
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(PromHistogram(
            self.latency.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(PromHistogram(
            self.work_duration.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(PromSecondsGauge(
            self.unfinished.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(PromSecondsGauge(
            self.longest.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(self.retries.get_or_create_owned(&labels(name))))
    }
}
