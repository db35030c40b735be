//! The controller's informers: Foos and Deployments from one factory, in
//! the controller's namespace (or all), with its resync period;
//! `metadata.managedFields` is dropped before objects are stored (the
//! controller never reads it, and it is most of an object's size on a real
//! cluster).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::Client;
use kcontrol_informer::{FactoryError, InformerFactory, SharedIndexInformer};
use tokio_util::sync::CancellationToken;

use crate::controller::ControllerOptions;
use crate::foo::Foo;

/// The Foo and Deployment informers and the factory that made them.
pub(crate) struct Informers {
    factory: InformerFactory,
    foos: Arc<SharedIndexInformer<Foo>>,
    deployments: Arc<SharedIndexInformer<Deployment>>,
}

impl Informers {
    pub(crate) fn new(client: &Client, options: &ControllerOptions) -> Self {
        let mut builder = InformerFactory::builder(client.clone())
            .default_resync(options.resync_period.unwrap_or(Duration::ZERO))
            .strip_managed_fields(true)
            .backoff(options.reflector_backoff);
        if let Some(namespace) = &options.namespace {
            builder = builder.namespace(namespace.clone());
        }
        if let Some(registry) = &options.registry {
            builder = builder.registry(&mut registry.lock());
        }
        let factory = builder.build();
        let foos = factory.informer::<Foo>();
        let deployments = factory.informer::<Deployment>();
        Self {
            factory,
            foos,
            deployments,
        }
    }

    pub(crate) fn foos(&self) -> &Arc<SharedIndexInformer<Foo>> {
        &self.foos
    }

    pub(crate) fn deployments(&self) -> &Arc<SharedIndexInformer<Deployment>> {
        &self.deployments
    }

    /// Starts both informers on the current runtime until `stop`.
    pub(crate) fn start(&self, stop: &CancellationToken) -> Result<(), FactoryError> {
        self.factory.start(stop)
    }

    /// Stops both informers and waits until they (and their handler
    /// threads) have stopped.
    pub(crate) async fn shutdown(&self) {
        self.factory.shutdown().await;
    }
}
