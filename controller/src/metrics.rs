//! Prometheus metrics: the [`SharedRegistry`] every family of a
//! controller goes to (a [`Manager`](crate::Manager) and the
//! [`Controller`](crate::Controller) builder fill one by default). The
//! families themselves live in the crates that count them: the work
//! queues' in kcontrol-workqueue, the informers' in kcontrol-informer and
//! kcontrol-reflector (behind their `prometheus` features), the client's
//! in kcontrol-client; the registry keeps one set per registry.
//!
//! ```
//! use kcontrol_controller::metrics::SharedRegistry;
//! let client = kcontrol_client::Client::new(kcontrol_client::Config::new(
//!     "http://127.0.0.1:1".parse().unwrap(),
//! )).unwrap();
//! let registry = SharedRegistry::new();
//! assert!(registry.register_client(&client));
//! // a client reports to one registry only
//! assert!(!registry.register_client(&client));
//! // the families are encoded once the client has sent requests
//! ```

use std::sync::{Arc, OnceLock};

use kcontrol_client::metrics::prometheus::register_client_metrics;
use kcontrol_client::Client;
use kcontrol_informer::{prometheus_factory_metrics, FactoryMetrics};
use kcontrol_workqueue::metrics::prometheus::PrometheusMetricsProvider;
use kcontrol_workqueue::metrics::MetricsProvider;
use parking_lot::{Mutex, MutexGuard};
/// The `prometheus-client` crate kcontrol's metrics are built with, so
/// metrics of your own go in the same registry without guessing its
/// version.
pub use prometheus_client;
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
