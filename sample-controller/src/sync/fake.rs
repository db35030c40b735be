//! An in-memory [`Backend`] for the sync handler's tests: a store that
//! behaves like an API server whose cache is always current (resource
//! versions, 409 on stale writes, 409 AlreadyExists), with injectable
//! failures and a log of every write and event.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use kcontrol_client::events::EventType;
use kcontrol_client::{ApiError, Error};
use kcontrol_indexer::{meta_namespace_key, Object};

use super::Backend;
use crate::deployment::LeanDeployment;
use crate::foo::Foo;

/// A recorded event: Foo key, type, reason, message.
pub(crate) type Recorded = (String, EventType, String, String);

#[derive(Default)]
pub(crate) struct FakeBackend {
    foos: Mutex<HashMap<String, Arc<Foo>>>,
    deployments: Mutex<HashMap<String, Arc<Deployment>>>,
    /// HTTP codes the next deployment creates fail with, in order.
    create_failures: Mutex<Vec<u16>>,
    writes: Mutex<Vec<String>>,
    events: Mutex<Vec<Recorded>>,
    rv: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn api_error(code: u16, reason: &str) -> Error {
    let body =
        serde_json::json!({"kind": "Status", "code": code, "reason": reason, "message": reason});
    ApiError::from_response(code, None, body.to_string().as_bytes()).into()
}

fn key<K: Object>(obj: &K) -> String {
    meta_namespace_key(obj).unwrap_or_default()
}

impl FakeBackend {
    fn next_rv(&self) -> String {
        (self.rv.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    /// Stores a Foo as a create would (uid and resourceVersion set).
    pub(crate) fn put_foo(&self, mut foo: Foo) -> Arc<Foo> {
        let k = key(&foo);
        if foo.metadata.uid.is_none() {
            foo.metadata.uid = Some(format!("uid-{k}"));
        }
        foo.metadata.resource_version = Some(self.next_rv());
        let foo = Arc::new(foo);
        lock(&self.foos).insert(k, Arc::clone(&foo));
        foo
    }

    pub(crate) fn put_deployment(&self, mut d: Deployment) {
        d.metadata.resource_version = Some(self.next_rv());
        lock(&self.deployments).insert(key(&d), Arc::new(d));
    }

    pub(crate) fn foo(&self, key: &str) -> Option<Arc<Foo>> {
        lock(&self.foos).get(key).cloned()
    }

    pub(crate) fn deployment(&self, key: &str) -> Option<Arc<Deployment>> {
        lock(&self.deployments).get(key).cloned()
    }

    pub(crate) fn delete_deployment(&self, key: &str) {
        lock(&self.deployments).remove(key);
    }

    pub(crate) fn deployment_count(&self) -> usize {
        lock(&self.deployments).len()
    }

    /// What the Deployment simulator does: every replica becomes available.
    pub(crate) fn roll_out(&self, key: &str) {
        let Some(d) = self.deployment(key) else {
            return;
        };
        let mut d = Deployment::clone(&d);
        let replicas = crate::deployment::spec_replicas(&d);
        d.status = Some(DeploymentStatus {
            available_replicas: Some(replicas),
            replicas: Some(replicas),
            observed_generation: Some(d.metadata.generation.unwrap_or(0)),
            ..DeploymentStatus::default()
        });
        self.put_deployment(d);
    }

    /// What the Deployment controller does in a cluster without nodes: it
    /// reports on the Deployment, and no replica is available.
    pub(crate) fn observe_unavailable(&self, key: &str) {
        let Some(d) = self.deployment(key) else {
            return;
        };
        let mut d = Deployment::clone(&d);
        let replicas = crate::deployment::spec_replicas(&d);
        d.status = Some(DeploymentStatus {
            replicas: Some(replicas),
            unavailable_replicas: Some(replicas),
            observed_generation: Some(d.metadata.generation.unwrap_or(0)),
            ..DeploymentStatus::default()
        });
        self.put_deployment(d);
    }

    pub(crate) fn fail_next_creates(&self, codes: &[u16]) {
        lock(&self.create_failures).extend_from_slice(codes);
    }

    pub(crate) fn writes(&self) -> Vec<String> {
        lock(&self.writes).clone()
    }

    pub(crate) fn events(&self) -> Vec<Recorded> {
        lock(&self.events).clone()
    }

    fn log(&self, entry: String) {
        lock(&self.writes).push(entry);
    }
}

impl Backend for FakeBackend {
    fn get_foo(&self, namespace: &str, name: &str) -> Option<Arc<Foo>> {
        self.foo(&format!("{namespace}/{name}"))
    }

    fn get_deployment(&self, namespace: &str, name: &str) -> Option<Arc<LeanDeployment>> {
        // the informer's cache holds lean Deployments
        self.deployment(&format!("{namespace}/{name}"))
            .map(|d| Arc::new(LeanDeployment::from(d.as_ref())))
    }

    async fn create_deployment(&self, deployment: &Deployment) -> Result<Deployment, Error> {
        let k = key(deployment);
        self.log(format!("create {k}"));
        let failure = {
            let mut failures = lock(&self.create_failures);
            (!failures.is_empty()).then(|| failures.remove(0))
        };
        if let Some(code) = failure {
            let reason = match code {
                409 => "AlreadyExists",
                429 => "TooManyRequests",
                _ => "InternalError",
            };
            return Err(api_error(code, reason));
        }
        if self.deployment(&k).is_some() {
            return Err(api_error(409, "AlreadyExists"));
        }
        let mut stored = deployment.clone();
        stored.metadata.uid = Some(format!("uid-deploy-{k}"));
        stored.metadata.resource_version = Some(self.next_rv());
        lock(&self.deployments).insert(k, Arc::new(stored.clone()));
        Ok(stored)
    }

    async fn scale_deployment(
        &self,
        deployment: &LeanDeployment,
        replicas: i32,
    ) -> Result<Deployment, Error> {
        let k = meta_namespace_key(deployment).unwrap_or_default();
        self.log(format!("scale {k}"));
        let current = self
            .deployment(&k)
            .ok_or_else(|| api_error(404, "NotFound"))?;
        if current.resource_version() != deployment.metadata.resource_version() {
            return Err(api_error(409, "Conflict"));
        }
        let mut stored = Deployment::clone(&current);
        stored.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
        stored.metadata.resource_version = Some(self.next_rv());
        lock(&self.deployments).insert(k, Arc::new(stored.clone()));
        Ok(stored)
    }

    async fn replace_foo_status(&self, foo: &Foo) -> Result<Foo, Error> {
        let k = key(foo);
        self.log(format!("status {k}"));
        let current = self.foo(&k).ok_or_else(|| api_error(404, "NotFound"))?;
        if current.resource_version() != foo.resource_version() {
            return Err(api_error(409, "Conflict"));
        }
        let mut stored = Foo::clone(&current);
        stored.status = foo.status.clone();
        stored.metadata.resource_version = Some(self.next_rv());
        lock(&self.foos).insert(k, Arc::new(stored.clone()));
        Ok(stored)
    }

    fn record(&self, foo: &Foo, event_type: EventType, reason: &str, message: String) {
        lock(&self.events).push((key(foo), event_type, reason.to_owned(), message));
    }
}
