//! The controller's [`Backend`]: reads from the informers' caches (listers;
//! Deployments cached as [`LeanDeployment`]s), writes through the API,
//! records events with the event recorder.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::events::{EventType, Recorder};
use kcontrol_client::{Api, Client, Error, Patch, PatchParams, PostParams};
use kcontrol_indexer::{KubeObject, Lister};

use crate::deployment::LeanDeployment;
use crate::foo::Foo;
use crate::sync::Backend;

/// Listers, the API and the event recorder.
#[derive(Clone, Debug)]
pub struct ClusterBackend {
    foos: Lister<Foo>,
    deployments: Lister<LeanDeployment>,
    client: Client,
    recorder: Recorder,
}

impl ClusterBackend {
    /// A backend reading the caches behind `foos` and `deployments`.
    pub fn new(
        foos: Lister<Foo>,
        deployments: Lister<LeanDeployment>,
        client: Client,
        recorder: Recorder,
    ) -> Self {
        Self {
            foos,
            deployments,
            client,
            recorder,
        }
    }

    /// The Foo cache.
    pub fn foos(&self) -> &Lister<Foo> {
        &self.foos
    }

    /// The Deployment cache.
    pub fn deployments(&self) -> &Lister<LeanDeployment> {
        &self.deployments
    }

    /// The event recorder.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    fn api<K: kcontrol_indexer::TypedResource>(&self, obj: &impl KubeObject) -> Api<K> {
        Api::namespaced(self.client.clone(), obj.namespace().unwrap_or_default())
    }
}

fn name(obj: &impl KubeObject) -> &str {
    obj.name().unwrap_or_default()
}

impl Backend for ClusterBackend {
    fn get_foo(&self, namespace: &str, name: &str) -> Option<Arc<Foo>> {
        self.foos.get(namespace, name)
    }

    fn get_deployment(&self, namespace: &str, name: &str) -> Option<Arc<LeanDeployment>> {
        self.deployments.get(namespace, name)
    }

    async fn create_deployment(&self, deployment: &Deployment) -> Result<Deployment, Error> {
        self.api::<Deployment>(deployment)
            .create(&PostParams::default(), deployment)
            .await
    }

    async fn scale_deployment(
        &self,
        deployment: &LeanDeployment,
        replicas: i32,
    ) -> Result<Deployment, Error> {
        // the cached resourceVersion in the patch is a precondition: a
        // Deployment changed since is a 409, retried with the newer one
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": deployment.resource_version()},
            "spec": {"replicas": replicas},
        });
        self.api::<Deployment>(deployment)
            .patch(
                name(deployment),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
    }

    async fn replace_foo_status(&self, foo: &Foo) -> Result<Foo, Error> {
        self.api::<Foo>(foo)
            .replace_status(name(foo), &PostParams::default(), foo)
            .await
    }

    fn record(&self, foo: &Foo, event_type: EventType, reason: &str, message: String) {
        self.recorder.event(foo, event_type, reason, message);
    }
}
