//! Prometheus metrics: the controller's and its event recorder's counters
//! (a [`Collector`] read at each scrape) beside the work queue's and the
//! informers' families in one registry, served as text at `/metrics`
//! (`--metrics-addr`, with `/healthz` and `/readyz`, by
//! [`kcontrol_controller::Health`]).

use std::sync::Arc;

use kcontrol_client::events::Recorder;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;

use crate::stats::Counters;

/// The controller's counters and its recorder's, as Prometheus counters.
#[derive(Debug)]
pub(crate) struct ControllerCollector {
    pub counters: Arc<Counters>,
    pub recorder: Recorder,
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    let metric_encoder = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(metric_encoder)
}

impl Collector for ControllerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.counters.snapshot();
        let e = self.recorder.stats();
        let rows: [(&str, &str, u64); 12] = [
            (
                "sample_controller_syncs",
                "Keys synced by a worker.",
                s.syncs,
            ),
            (
                "sample_controller_sync_errors",
                "Syncs that failed and were re-queued.",
                s.sync_errors,
            ),
            (
                "sample_controller_dropped_keys",
                "Keys dropped without retry.",
                s.dropped,
            ),
            (
                "sample_controller_deployments_created",
                "Deployments created.",
                s.deployments_created,
            ),
            (
                "sample_controller_deployments_updated",
                "Deployments whose replicas were updated.",
                s.deployments_updated,
            ),
            (
                "sample_controller_status_updates",
                "Foo status writes.",
                s.status_updates,
            ),
            (
                "sample_controller_events_recorded",
                "Events accepted by the recorder.",
                e.recorded,
            ),
            (
                "sample_controller_events_dropped",
                "Events dropped because the recorder's buffer was full.",
                e.dropped,
            ),
            (
                "sample_controller_events_filtered",
                "Events dropped by the per-object spam filter.",
                e.filtered,
            ),
            (
                "sample_controller_events_created",
                "Events written as new Events.",
                e.created,
            ),
            (
                "sample_controller_events_patched",
                "Repeated events written as count patches.",
                e.patched,
            ),
            (
                "sample_controller_events_failed",
                "Events given up after failed writes.",
                e.failed,
            ),
        ];
        for (name, help, value) in rows {
            counter(&mut encoder, name, help, value)?;
        }
        Ok(())
    }
}

/// The registry served at `/metrics` (by [`kcontrol_controller::Health`]).
pub type SharedRegistry = kcontrol_controller::SharedRegistry;

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_util::sync::CancellationToken;

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_the_counters_in_prometheus_text() {
        let config = kcontrol_client::Config::new(http::Uri::from_static("http://127.0.0.1:9"));
        let client = kcontrol_client::Client::new(config).unwrap();
        let counters = Arc::new(Counters::default());
        Counters::bump(&counters.syncs);
        Counters::bump(&counters.syncs);
        Counters::bump(&counters.deployments_created);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ControllerCollector {
            counters,
            recorder: Recorder::new(client, "test").unwrap(),
        }));
        let registry = SharedRegistry::from(registry);
        let shutdown = CancellationToken::new();
        let addr = kcontrol_controller::Health::with_registry(registry)
            .serve("127.0.0.1:0".parse().unwrap(), shutdown.clone())
            .await
            .unwrap();
        let metrics = get(addr, "/metrics").await;
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(
            metrics.contains("sample_controller_syncs_total 2"),
            "{metrics}"
        );
        assert!(
            metrics.contains("sample_controller_deployments_created_total 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains("# TYPE sample_controller_events_dropped counter"),
            "{metrics}"
        );
        assert!(get(addr, "/healthz").await.ends_with("ok\n"));
        assert!(get(addr, "/nope").await.starts_with("HTTP/1.1 404"));
        shutdown.cancel();
    }
}
