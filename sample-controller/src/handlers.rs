//! What the informers' event handlers put in the work queue.
//!
//! - Foos: every add and update enqueues the Foo's key. Updates with an
//!   unchanged resourceVersion (periodic resyncs) are enqueued too, as
//!   sample-controller does: the resync is the level-triggered repair path,
//!   and a sync with nothing to do writes nothing. Deletions enqueue
//!   nothing: the server's garbage collector removes the Deployment.
//! - Deployments: each event enqueues the Foo that controls the Deployment
//!   (found through its controller owner reference, kind Foo, and confirmed
//!   in the Foo cache); deletions use the last known state, tombstones
//!   included; resync updates (unchanged resourceVersion) are skipped.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_indexer::{meta_namespace_key, Object, ObjectOrTombstone};
use kcontrol_informer::ResourceEventHandler;

use crate::deployment::owning_foo;
use crate::foo::Foo;

/// Where keys go (the work queue's `add`).
pub type Enqueue = Arc<dyn Fn(String) + Send + Sync>;

/// Looks a Foo up in the cache by namespace and name.
pub type FooLookup = Arc<dyn Fn(&str, &str) -> Option<Arc<Foo>> + Send + Sync>;

/// Enqueues Foos on their own events.
#[derive(Clone)]
pub struct FooHandler {
    enqueue: Enqueue,
}

impl std::fmt::Debug for FooHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FooHandler").finish_non_exhaustive()
    }
}

impl FooHandler {
    /// A handler putting keys into `enqueue`.
    pub fn new(enqueue: Enqueue) -> Self {
        Self { enqueue }
    }

    fn enqueue(&self, foo: &Foo) {
        match meta_namespace_key(foo) {
            Ok(key) => (self.enqueue)(key),
            Err(e) => tracing::error!(error = %e, "cannot enqueue a Foo"),
        }
    }

    /// A Foo appeared.
    pub fn added(&self, foo: &Arc<Foo>) {
        self.enqueue(foo);
    }

    /// A Foo changed or was resynced.
    pub fn updated(&self, _old: &Arc<Foo>, new: &Arc<Foo>) {
        self.enqueue(new);
    }
}

/// Maps Deployment events to the Foo that owns the Deployment.
#[derive(Clone)]
pub struct DeploymentHandler {
    enqueue: Enqueue,
    foos: FooLookup,
}

impl std::fmt::Debug for DeploymentHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentHandler").finish_non_exhaustive()
    }
}

impl DeploymentHandler {
    /// A handler looking owners up with `foos` and putting their keys into `enqueue`.
    pub fn new(enqueue: Enqueue, foos: FooLookup) -> Self {
        Self { enqueue, foos }
    }

    /// Enqueues the Foo controlling `deployment`, if there is one in the
    /// cache (sample-controller's `handleObject`).
    pub fn handle_object(&self, deployment: &Deployment) {
        let Some(owner) = owning_foo(deployment) else {
            return;
        };
        let namespace = deployment.namespace().unwrap_or_default();
        match (self.foos)(namespace, owner) {
            Some(foo) => match meta_namespace_key(foo.as_ref()) {
                Ok(key) => (self.enqueue)(key),
                Err(e) => tracing::error!(error = %e, "cannot enqueue a Foo"),
            },
            None => tracing::debug!(
                namespace,
                foo = owner,
                deployment = deployment.name().unwrap_or_default(),
                "ignoring orphaned Deployment"
            ),
        }
    }

    /// A Deployment appeared.
    pub fn added(&self, deployment: &Arc<Deployment>) {
        self.handle_object(deployment);
    }

    /// A Deployment changed; resyncs (same resourceVersion) are skipped.
    pub fn updated(&self, old: &Arc<Deployment>, new: &Arc<Deployment>) {
        if old.resource_version() == new.resource_version() {
            return;
        }
        self.handle_object(new);
    }

    /// A Deployment went away (its last known state when the deletion was missed).
    pub fn deleted(&self, gone: &ObjectOrTombstone<Deployment>) {
        if let ObjectOrTombstone::Tombstone(t) = gone {
            tracing::debug!(key = %t.key, "recovered a deleted Deployment from a tombstone");
        }
        self.handle_object(gone.object());
    }
}

impl ResourceEventHandler<Foo> for FooHandler {
    fn on_add(&self, obj: &Arc<Foo>, _is_in_initial_list: bool) {
        self.added(obj);
    }

    fn on_update(&self, old: &Arc<Foo>, new: &Arc<Foo>) {
        self.updated(old, new);
    }
}

impl ResourceEventHandler<Deployment> for DeploymentHandler {
    fn on_add(&self, obj: &Arc<Deployment>, _is_in_initial_list: bool) {
        self.added(obj);
    }

    fn on_update(&self, old: &Arc<Deployment>, new: &Arc<Deployment>) {
        self.updated(old, new);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<Deployment>) {
        self.deleted(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::new_deployment;
    use kcontrol_indexer::DeletedFinalStateUnknown;
    use std::sync::Mutex;

    fn sink() -> (Enqueue, Arc<Mutex<Vec<String>>>) {
        let keys = Arc::new(Mutex::new(Vec::new()));
        let k = Arc::clone(&keys);
        (Arc::new(move |key| k.lock().unwrap().push(key)), keys)
    }

    fn foo(name: &str) -> Arc<Foo> {
        let mut foo = Foo::with_deployment("ns", name, &format!("{name}-d"), 1);
        foo.metadata.uid = Some(format!("uid-{name}"));
        foo.metadata.resource_version = Some("1".into());
        Arc::new(foo)
    }

    fn deployment_handler(known: Vec<Arc<Foo>>) -> (DeploymentHandler, Arc<Mutex<Vec<String>>>) {
        let (enqueue, keys) = sink();
        let lookup: FooLookup = Arc::new(move |ns, name| {
            known
                .iter()
                .find(|f| f.namespace() == Some(ns) && f.name() == Some(name))
                .cloned()
        });
        (DeploymentHandler::new(enqueue, lookup), keys)
    }

    #[test]
    fn foo_events_enqueue_the_foo_resyncs_included() {
        let (enqueue, keys) = sink();
        let h = FooHandler::new(enqueue);
        let a = foo("a");
        h.added(&a);
        h.updated(&a, &a); // a resync: same resourceVersion
        assert_eq!(*keys.lock().unwrap(), ["ns/a", "ns/a"]);
    }

    #[test]
    fn deployment_events_enqueue_the_owning_foo() {
        let a = foo("a");
        let (h, keys) = deployment_handler(vec![Arc::clone(&a)]);
        let d = Arc::new(new_deployment(&a));
        h.added(&d);
        let mut newer = Deployment::clone(&d);
        newer.metadata.resource_version = Some("2".into());
        h.updated(&d, &Arc::new(newer));
        h.updated(&d, &d); // resync: skipped
        h.deleted(&ObjectOrTombstone::Object(Arc::clone(&d)));
        h.deleted(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/a-d".into(),
            obj: Arc::clone(&d),
        }));
        assert_eq!(*keys.lock().unwrap(), ["ns/a"; 4]);
    }

    #[test]
    fn orphans_and_foreign_deployments_enqueue_nothing() {
        let (h, keys) = deployment_handler(vec![foo("a")]);
        // owned by a Foo the cache does not know
        h.added(&Arc::new(new_deployment(&foo("gone"))));
        // no owner
        let mut plain = Deployment::default();
        plain.metadata.name = Some("x".into());
        plain.metadata.namespace = Some("ns".into());
        h.added(&Arc::new(plain.clone()));
        // owned by something else that is called "a"
        let mut other = new_deployment(&foo("a"));
        other.metadata.owner_references.as_mut().unwrap()[0].kind = "ReplicaSet".into();
        h.added(&Arc::new(other));
        // a Foo of the same name in another namespace
        let mut elsewhere = new_deployment(&foo("a"));
        elsewhere.metadata.namespace = Some("other".into());
        h.added(&Arc::new(elsewhere));
        assert!(keys.lock().unwrap().is_empty());
    }
}
