//! Prometheus metrics: the [`SharedRegistry`] every family of a
//! controller goes to (a [`Manager`](crate::Manager) and the
//! [`Controller`](crate::Controller) builder fill one by default), and the
//! metrics of a [`Client`], with client-go's names:
//! `rest_client_requests_total{code,method,host}`,
//! `rest_client_request_duration_seconds{verb,host}` and
//! `rest_client_rate_limiter_duration_seconds{verb,host}`. Labels are bounded:
//! no object names, no paths.
//!
//! ```
//! use kcontrol_controller::metrics::{register_client_metrics, SharedRegistry};
//! let client = kcontrol_client::Client::new(kcontrol_client::Config::new(
//!     "http://127.0.0.1:1".parse().unwrap(),
//! )).unwrap();
//! let registry = SharedRegistry::new();
//! assert!(register_client_metrics(&client, &mut registry.lock()));
//! // a client reports to one registry only
//! assert!(!register_client_metrics(&client, &mut registry.lock()));
//! // the families are encoded once the client has sent requests
//! ```

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kcontrol_client::{Client, ClientMetrics};
use kcontrol_informer::{prometheus_factory_metrics, FactoryMetrics};
use kcontrol_workqueue::metrics::prometheus::PrometheusMetricsProvider;
use kcontrol_workqueue::metrics::MetricsProvider;
use parking_lot::{Mutex, MutexGuard};
/// The `prometheus-client` crate kcontrol's metrics are built with, so
/// metrics of your own go in the same registry without guessing its
/// version.
pub use prometheus_client;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
pub use prometheus_client::registry::Registry;

/// A Prometheus [`Registry`] shared between the code that registers
/// metrics and the server that encodes them (`/metrics`, served by
/// [`Health`](crate::Health)). Cheap to clone; clones share the registry.
///
/// It also keeps, per registry, the families kcontrol registers for every
/// controller on it — the work queues' (`workqueue_*`), the informers'
/// (`reflector_*`, `informer_*`), the client's (`rest_client_*`) — so
/// several controllers and factories on one registry share them instead
/// of registering a family twice.
#[derive(Clone, Default)]
pub struct SharedRegistry {
    inner: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    registry: Mutex<Registry>,
    queues: OnceLock<Arc<PrometheusMetricsProvider>>,
    factories: OnceLock<Arc<dyn FactoryMetrics>>,
}

impl std::fmt::Debug for SharedRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRegistry").finish_non_exhaustive()
    }
}

impl From<Registry> for SharedRegistry {
    /// Shares a registry you filled.
    fn from(registry: Registry) -> Self {
        Self {
            inner: Arc::new(Shared {
                registry: Mutex::new(registry),
                ..Shared::default()
            }),
        }
    }
}

impl SharedRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The registry, locked: register metrics of your own with
    /// `registry.lock().register(name, help, metric)`. Do not hold it
    /// across an `.await`.
    pub fn lock(&self) -> MutexGuard<'_, Registry> {
        self.inner.registry.lock()
    }

    /// The registry in the Prometheus (OpenMetrics) text format, as
    /// `/metrics` serves it.
    ///
    /// # Errors
    /// When a collector fails to encode.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.lock())?;
        Ok(text)
    }

    /// The work queue metrics of this registry (`workqueue_*`, each queue
    /// labelled `name`), registered on first use.
    pub fn queue_metrics(&self) -> Arc<dyn MetricsProvider> {
        let provider = self
            .inner
            .queues
            .get_or_init(|| Arc::new(PrometheusMetricsProvider::new(&mut self.lock())));
        Arc::clone(provider) as Arc<dyn MetricsProvider>
    }

    /// The informer factory metrics of this registry (`reflector_*`,
    /// `informer_*`, `informer_objects`, each informer labelled `name`),
    /// registered on first use.
    pub fn factory_metrics(&self) -> Arc<dyn FactoryMetrics> {
        let metrics = self
            .inner
            .factories
            .get_or_init(|| prometheus_factory_metrics(&mut self.lock()));
        Arc::clone(metrics)
    }

    /// Reports `client`'s requests (and its clones') as `rest_client_*`
    /// in this registry; false (and nothing registered) when the client
    /// already reports to metrics, e.g. those of another registry.
    pub fn register_client(&self, client: &Client) -> bool {
        register_client_metrics(client, &mut self.lock())
    }
}

type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// client-go's request latency and rate limiter wait buckets (seconds).
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

fn wait_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The client metric families of one registry.
#[derive(Clone, Debug)]
pub struct PrometheusClientMetrics {
    requests: Family<Labels, Counter>,
    duration: HistogramFamily,
    waits: HistogramFamily,
}

impl PrometheusClientMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::unregistered();
        m.register(registry);
        m
    }

    fn unregistered() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            waits: Family::new_with_constructor(wait_histogram),
        }
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "rest_client_requests",
            "HTTP requests, by status code, method and host.",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency until the response head, by verb and host.",
            self.duration.clone(),
        );
        registry.register(
            "rest_client_rate_limiter_duration_seconds",
            "Time requests waited for the client-side rate limiter, by verb and host.",
            self.waits.clone(),
        );
    }
}

impl ClientMetrics for PrometheusClientMetrics {
    fn request(
        &self,
        method: &str,
        verb: &'static str,
        host: &str,
        code: Option<u16>,
        elapsed: Duration,
    ) {
        let code = code.map_or_else(|| "<error>".to_owned(), |c| c.to_string());
        self.requests
            .get_or_create(&vec![
                ("code", code),
                ("method", method.to_owned()),
                ("host", host.to_owned()),
            ])
            .inc();
        self.duration
            .get_or_create(&vec![("verb", verb.to_owned()), ("host", host.to_owned())])
            .observe(elapsed.as_secs_f64());
    }

    fn rate_limited(&self, verb: &'static str, host: &str, waited: Duration) {
        self.waits
            .get_or_create(&vec![("verb", verb.to_owned()), ("host", host.to_owned())])
            .observe(waited.as_secs_f64());
    }
}

/// Registers the client metric families in `registry` and reports
/// `client`'s requests (and its clones') to them. False when the client
/// already reported to other metrics (nothing is registered then).
pub fn register_client_metrics(client: &Client, registry: &mut Registry) -> bool {
    let metrics = PrometheusClientMetrics::unregistered();
    if !client.set_metrics(Arc::new(metrics.clone())) {
        return false;
    }
    metrics.register(registry);
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kcontrol_client::{Api, Config, ListParams, RateLimit};
    use prometheus_client::encoding::text::encode;

    #[tokio::test]
    async fn rate_limiter_waits_are_counted_by_verb_and_host() {
        let server = kcontrol_testserver::TestServer::start().await.unwrap();
        let mut config = Config::new(server.url().parse().unwrap());
        config.rate_limit = Some(RateLimit {
            qps: 1000.0,
            burst: 1,
        });
        let client = Client::new(config).unwrap();
        let mut registry = Registry::default();
        assert!(register_client_metrics(&client, &mut registry));
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        for _ in 0..3 {
            api.list(&ListParams::default()).await.unwrap();
        }
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        let want = format!(
            "rest_client_rate_limiter_duration_seconds_count{{verb=\"list\",host=\"{}\"}} 3",
            client.host()
        );
        assert!(text.contains(&want), "{want} not in\n{text}");
    }
}
