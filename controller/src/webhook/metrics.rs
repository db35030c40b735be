//! The webhook server's Prometheus metrics, under controller-runtime's
//! names: `controller_runtime_webhook_requests_total{webhook,code}` (HTTP
//! code), `controller_runtime_webhook_latency_seconds{webhook}`,
//! `controller_runtime_webhook_requests_in_flight{webhook}`; and
//! `kcontrol_webhook_responses_total{webhook,allowed,code}`, what the
//! answers said (the code in the review: 200 when allowed, the denial's or
//! the error's otherwise). `webhook` is the handler's path: bounded labels.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // prometheus.DefBuckets' range, 5 ms to 10 s
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

/// The metric families of one webhook server (cheap to clone; clones
/// count into the same families).
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    requests: Family<Labels, Counter>,
    latency: HistogramFamily,
    in_flight: Family<Labels, Gauge>,
    responses: Family<Labels, Counter>,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            in_flight: Family::default(),
            responses: Family::default(),
        }
    }
}

impl WebhookMetrics {
    /// Families registered in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        m.register(registry);
        m
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code.",
            self.requests.clone(),
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            self.latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            self.in_flight.clone(),
        );
        registry.register(
            "kcontrol_webhook_responses",
            "Answers by whether they allowed and the code they carried.",
            self.responses.clone(),
        );
    }

    pub(crate) fn started(&self, webhook: &str) {
        self.in_flight
            .get_or_create(&vec![("webhook", webhook.to_owned())])
            .inc();
    }

    pub(crate) fn finished(&self, webhook: &str, http_code: u16, elapsed: Duration) {
        let hook = vec![("webhook", webhook.to_owned())];
        self.in_flight.get_or_create(&hook).dec();
        self.latency
            .get_or_create(&hook)
            .observe(elapsed.as_secs_f64());
        self.requests
            .get_or_create(&vec![
                ("webhook", webhook.to_owned()),
                ("code", http_code.to_string()),
            ])
            .inc();
    }

    pub(crate) fn answered(&self, webhook: &str, allowed: bool, code: u16) {
        self.responses
            .get_or_create(&vec![
                ("webhook", webhook.to_owned()),
                ("allowed", allowed.to_string()),
                ("code", code.to_string()),
            ])
            .inc();
    }
}
