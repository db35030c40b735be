//! Prometheus families of a [`Client`]'s requests, with
//! client-go's names: `rest_client_requests_total{code,method,host}`,
//! `rest_client_request_duration_seconds{verb,host}` and
//! `rest_client_rate_limiter_duration_seconds{verb,host}`. Labels are
//! bounded: no object names, no paths.
//!
//! ```
//! use kcontrol_client::metrics::prometheus::register_client_metrics;
//! use prometheus_client::registry::Registry;
//! let client = kcontrol_client::Client::new(kcontrol_client::Config::new(
//!     "http://127.0.0.1:1".parse().unwrap(),
//! )).unwrap();
//! let mut registry = Registry::default();
//! assert!(register_client_metrics(&client, &mut registry));
//! // a client reports to one registry only
//! assert!(!register_client_metrics(&client, &mut registry));
//! ```

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::ClientMetrics;
use crate::Client;

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
    use crate::{Api, Config, ListParams, RateLimit};
    use k8s_openapi::api::core::v1::ConfigMap;
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
