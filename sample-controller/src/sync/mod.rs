//! The sync handler: brings one Foo's Deployment and status in line with
//! its spec, as kubernetes/sample-controller's `syncHandler` does.
//!
//! It reads through a [`Backend`] (the informers' listers and the API in
//! the controller, an in-memory fake in tests). Deployments are read as
//! [`LeanDeployment`]s (what the cache holds) and written as k8s-openapi
//! [`Deployment`]s:
//!
//! 1. the Foo is gone → done (its Deployment is garbage-collected);
//! 2. `spec.deploymentName` is empty → logged and dropped, not retried;
//! 3. the Deployment is missing → created (a Warning `FailedCreate` event
//!    and a retried error when that fails);
//! 4. the Deployment is controlled by something else → a Warning
//!    `ErrResourceExists` event and a retried error;
//! 5. its replicas differ from the Foo's → `spec.replicas` updated (a
//!    merge patch with the cached resourceVersion as precondition: the
//!    rest of the Deployment is kept, a stale cache is a 409 and a retry);
//! 6. `status.availableReplicas` is written through the status
//!    subresource when it differs from the Deployment's, or when the Foo
//!    has no status yet and the Deployment controller has reported on the
//!    Deployment (`observedGeneration` caught up) — so every Foo shows its
//!    status, `availableReplicas: 0` included (a cluster without nodes),
//!    as kubernetes/sample-controller's do;
//! 7. a Normal `Synced` event with every status write.
//!
//! Steps 6 and 7 differ from sample-controller, which writes the status and
//! records `Synced` after every successful sync (each repeat of the event
//! is a PATCH of its count): a sync with nothing to change writes nothing
//! here, and a status is not written before the Deployment controller has
//! looked at a new Deployment (its empty status is not yet "0 available").
//! Every Foo the controller has processed still shows its status and has a
//! `Synced` event, and the happy path stays at three writes per Foo
//! (Deployment, status, event).

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::events::EventType;
use kcontrol_client::Error;
use kcontrol_indexer::split_meta_namespace_key;

use crate::deployment::{
    available_replicas, is_converged, new_deployment, spec_replicas, status_observed,
    LeanDeployment,
};
use crate::foo::{Foo, FooStatus};
use crate::stats::{ControllerStats, Counters};
use kcontrol_controller::owner::is_controlled_by;

/// Reason of the Normal event of a Foo whose status was written.
pub const SUCCESS_SYNCED: &str = "Synced";
/// Message of that event.
pub const MESSAGE_RESOURCE_SYNCED: &str = "Foo synced successfully";
/// Reason of the Warning event of a Deployment owned by something else.
pub const ERR_RESOURCE_EXISTS: &str = "ErrResourceExists";
/// Reason of the Warning event of a Deployment that could not be created.
pub const FAILED_CREATE: &str = "FailedCreate";
/// Reason of the Warning event of a Deployment that could not be updated.
pub const FAILED_UPDATE: &str = "FailedUpdate";

/// The message of an `ErrResourceExists` event.
pub fn message_resource_exists(deployment_name: &str) -> String {
    format!("Resource {deployment_name:?} already exists and is not managed by Foo")
}

/// What the sync handler reads and writes.
pub trait Backend: Send + Sync {
    /// The Foo `namespace/name` from the cache.
    fn get_foo(&self, namespace: &str, name: &str) -> Option<Arc<Foo>>;

    /// The Deployment `namespace/name` from the cache.
    fn get_deployment(&self, namespace: &str, name: &str) -> Option<Arc<LeanDeployment>>;

    /// Creates a Deployment.
    fn create_deployment(
        &self,
        deployment: &Deployment,
    ) -> impl Future<Output = Result<Deployment, Error>> + Send;

    /// Sets a Deployment's `spec.replicas`, keeping the rest of it
    /// (optimistic concurrency on `deployment`'s resourceVersion: a 409
    /// when the Deployment changed since).
    fn scale_deployment(
        &self,
        deployment: &LeanDeployment,
        replicas: i32,
    ) -> impl Future<Output = Result<Deployment, Error>> + Send;

    /// Replaces a Foo's status through the status subresource.
    fn replace_foo_status(&self, foo: &Foo) -> impl Future<Output = Result<Foo, Error>> + Send;

    /// Records an event about a Foo (never blocks).
    fn record(&self, foo: &Foo, event_type: EventType, reason: &str, message: String);
}

/// Why a key was dropped without a retry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The key is not `namespace/name`.
    MalformedKey,
    /// The Foo has no `spec.deploymentName`.
    NoDeploymentName,
}

/// What a successful sync did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// The Deployment was created.
    pub created: bool,
    /// The Deployment's replicas were updated.
    pub scaled: bool,
    /// The Foo's status was written.
    pub status_written: bool,
    /// The Foo is in sync (see [`is_converged`]).
    pub converged: bool,
}

/// How a sync ended, when it did not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncOutcome {
    /// The Foo no longer exists: nothing to do.
    FooGone,
    /// The key was dropped (logged, not retried).
    Dropped(DropReason),
    /// The Foo was synced.
    Synced(SyncReport),
}

/// A sync that failed; the key is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The Deployment exists and is controlled by something else.
    #[error("{}", message_resource_exists(.deployment))]
    ResourceExists {
        /// The Deployment's name.
        deployment: String,
    },
    /// Creating the Deployment failed.
    #[error("creating Deployment {deployment:?}: {source}")]
    CreateDeployment {
        /// The Deployment's name.
        deployment: String,
        /// Why.
        #[source]
        source: Error,
    },
    /// Updating the Deployment failed.
    #[error("updating Deployment {deployment:?}: {source}")]
    UpdateDeployment {
        /// The Deployment's name.
        deployment: String,
        /// Why.
        #[source]
        source: Error,
    },
    /// Writing the Foo's status failed.
    #[error("updating the status of Foo {foo:?}: {source}")]
    UpdateStatus {
        /// The Foo's key.
        foo: String,
        /// Why.
        #[source]
        source: Error,
    },
}

/// Runs syncs against a [`Backend`] and counts what they do.
#[derive(Debug)]
pub struct SyncHandler<B> {
    backend: B,
    counters: Arc<Counters>,
}

impl<B: Backend> SyncHandler<B> {
    /// A handler over `backend`.
    pub fn new(backend: B) -> Self {
        Self {
            backend,
            counters: Arc::new(Counters::default()),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// What the syncs did so far.
    pub fn stats(&self) -> ControllerStats {
        self.counters.snapshot()
    }

    pub(crate) fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// Syncs the Foo with key `namespace/name`.
    pub async fn sync(&self, key: &str) -> Result<SyncOutcome, SyncError> {
        Counters::bump(&self.counters.syncs);
        let result = self.sync_inner(key).await;
        match &result {
            Err(_) => Counters::bump(&self.counters.sync_errors),
            Ok(SyncOutcome::Dropped(_)) => Counters::bump(&self.counters.dropped),
            Ok(_) => {}
        }
        result
    }

    async fn sync_inner(&self, key: &str) -> Result<SyncOutcome, SyncError> {
        let Ok((Some(namespace), name)) = split_meta_namespace_key(key) else {
            tracing::error!(key, "invalid resource key: dropping it");
            return Ok(SyncOutcome::Dropped(DropReason::MalformedKey));
        };
        let Some(foo) = self.backend.get_foo(namespace, name) else {
            tracing::debug!(key, "Foo no longer exists");
            return Ok(SyncOutcome::FooGone);
        };
        let deployment_name = foo.spec.deployment_name.as_str();
        if deployment_name.is_empty() {
            tracing::error!(key, "deployment name must be specified: dropping the Foo");
            return Ok(SyncOutcome::Dropped(DropReason::NoDeploymentName));
        }
        let mut report = SyncReport::default();
        let deployment = match self.backend.get_deployment(namespace, deployment_name) {
            Some(existing) => existing,
            None => {
                let created = self.create(&foo).await?;
                report.created = true;
                Arc::new(LeanDeployment::from(&created))
            }
        };
        if !is_controlled_by(deployment.as_ref(), foo.as_ref()) {
            let message = message_resource_exists(deployment_name);
            self.backend
                .record(&foo, EventType::Warning, ERR_RESOURCE_EXISTS, message);
            return Err(SyncError::ResourceExists {
                deployment: deployment_name.to_owned(),
            });
        }
        let deployment = match foo.spec.replicas {
            Some(replicas) if replicas != spec_replicas(deployment.as_ref()) => {
                let scaled = self.scale(&foo, &deployment, replicas).await?;
                report.scaled = true;
                Arc::new(LeanDeployment::from(&scaled))
            }
            _ => deployment,
        };
        let foo = self
            .update_status(key, foo, &deployment, &mut report)
            .await?;
        report.converged = is_converged(&foo, deployment.as_ref());
        if report.status_written {
            self.backend.record(
                &foo,
                EventType::Normal,
                SUCCESS_SYNCED,
                MESSAGE_RESOURCE_SYNCED.to_owned(),
            );
        }
        Ok(SyncOutcome::Synced(report))
    }

    async fn create(&self, foo: &Foo) -> Result<Deployment, SyncError> {
        let deployment = new_deployment(foo);
        let name = &foo.spec.deployment_name;
        match self.backend.create_deployment(&deployment).await {
            Ok(created) => {
                Counters::bump(&self.counters.deployments_created);
                tracing::debug!(deployment = %name, "created Deployment");
                Ok(created)
            }
            Err(source) => {
                // AlreadyExists: the cache is behind; the retry will see it.
                if !source.is_already_exists() {
                    let message = format!("Error creating Deployment {name:?}: {source}");
                    self.backend
                        .record(foo, EventType::Warning, FAILED_CREATE, message);
                }
                Err(SyncError::CreateDeployment {
                    deployment: name.clone(),
                    source,
                })
            }
        }
    }

    async fn scale(
        &self,
        foo: &Foo,
        deployment: &LeanDeployment,
        replicas: i32,
    ) -> Result<Deployment, SyncError> {
        let name = &foo.spec.deployment_name;
        tracing::debug!(deployment = %name, replicas, "updating Deployment replicas");
        match self.backend.scale_deployment(deployment, replicas).await {
            Ok(updated) => {
                Counters::bump(&self.counters.deployments_updated);
                Ok(updated)
            }
            Err(source) => {
                // A conflict means a newer Deployment is on its way: retry quietly.
                if !source.is_conflict() {
                    let message = format!("Error updating Deployment {name:?}: {source}");
                    self.backend
                        .record(foo, EventType::Warning, FAILED_UPDATE, message);
                }
                Err(SyncError::UpdateDeployment {
                    deployment: name.clone(),
                    source,
                })
            }
        }
    }

    async fn update_status(
        &self,
        key: &str,
        foo: Arc<Foo>,
        deployment: &LeanDeployment,
        report: &mut SyncReport,
    ) -> Result<Arc<Foo>, SyncError> {
        let available = available_replicas(deployment);
        let write = match &foo.status {
            Some(status) => status.available_replicas != available,
            None => status_observed(deployment),
        };
        if !write {
            return Ok(foo);
        }
        let mut copy = Foo::clone(&foo);
        copy.status = Some(FooStatus {
            available_replicas: available,
        });
        let written = self
            .backend
            .replace_foo_status(&copy)
            .await
            .map_err(|source| SyncError::UpdateStatus {
                foo: key.to_owned(),
                source,
            })?;
        Counters::bump(&self.counters.status_updates);
        report.status_written = true;
        Ok(Arc::new(written))
    }
}

#[cfg(test)]
pub(crate) mod fake;

#[cfg(test)]
mod tests;
