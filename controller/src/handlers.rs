//! Event handlers that turn informer events into work-queue keys
//! (`namespace/name`, or `name` for cluster-scoped objects), as
//! hand-written client-go controllers and controller-runtime's
//! `handler` package do. One type, [`EnqueueHandler`], three mappings:
//!
//! - [`for_object`](EnqueueHandler::for_object): the object's own key
//!   (a tombstone's key on a missed deletion); resyncs are enqueued (the
//!   level-triggered repair path), CT2;
//! - [`for_owner`](EnqueueHandler::for_owner): the key of the object's
//!   *controller* owner when that owner reference's kind and API group are
//!   the owner type's; deletions use the last known state, tombstones
//!   included; resyncs (an update with an unchanged resourceVersion) are
//!   skipped as kubernetes/sample-controller skips them, CT3;
//! - [`for_cached_owner`](EnqueueHandler::for_cached_owner): as
//!   `for_owner`, but only when the owner is in a lister's cache (as
//!   kubernetes/sample-controller's `handleObject` looks the Foo up before
//!   enqueuing it); an orphan enqueues nothing, CT3;
//! - [`from_map`](EnqueueHandler::from_map): the keys a function gives
//!   (resyncs skipped).
//!
//! [`observe_expectations`](EnqueueHandler::observe_expectations) lowers
//! the [`Expectations`] of the keys an add or a deletion maps to (CT18);
//! [`skip_resyncs`](EnqueueHandler::skip_resyncs) changes the resync rule;
//! [`with_predicate`](EnqueueHandler::with_predicate) filters events first.
//! An update enqueues the keys of both states (an owner reference or a
//! mapped field may have changed), once each.
//!
//! ```no_run
//! # fn demo(factory: kcontrol_informer::InformerFactory) -> Result<(), kcontrol_informer::InformerError> {
//! use kcontrol_controller::handlers::EnqueueHandler;
//! use kcontrol_indexer::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
//! use kcontrol_workqueue::RateLimitingQueue;
//!
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
//! factory.informer::<Deployment>().add_event_handler(EnqueueHandler::for_object(queue.clone()))?;
//! factory
//!     .informer::<ReplicaSet>()
//!     .add_event_handler(EnqueueHandler::for_owner::<Deployment>(queue.clone()))?;
//! # Ok(()) }
//! ```

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use kcontrol_indexer::{meta_namespace_key, KubeObject, KubeResource, Lister, ObjectOrTombstone};
use kcontrol_informer::ResourceEventHandler;
use kcontrol_workqueue::RateLimitingQueue;

use crate::expectations::Expectations;
use crate::owner::group_of;
use crate::predicate::{Change, Predicate};

type MapFn<K> = dyn Fn(&K) -> Vec<String> + Send + Sync;
/// Whether the owner `namespace`, `name` is known (in a cache).
type ExistsFn = dyn Fn(&str, &str) -> bool + Send + Sync;

enum Mapping<K> {
    Object,
    Owner {
        kind: Cow<'static, str>,
        group: Cow<'static, str>,
        namespaced: bool,
        exists: Option<Arc<ExistsFn>>,
    },
    Func(Arc<MapFn<K>>),
}

/// A [`ResourceEventHandler`] that enqueues keys on a rate-limited work
/// queue; see the [module docs](self).
pub struct EnqueueHandler<K> {
    queue: RateLimitingQueue<String>,
    mapping: Mapping<K>,
    predicate: Option<Predicate<K>>,
    skip_resyncs: bool,
    expectations: Option<Expectations>,
}

impl<K> fmt::Debug for EnqueueHandler<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mapping = match &self.mapping {
            Mapping::Object => "object".to_owned(),
            Mapping::Owner {
                kind,
                group,
                exists,
                ..
            } => format!(
                "{}owner {kind}.{group}",
                if exists.is_some() { "cached " } else { "" }
            ),
            Mapping::Func(_) => "function".to_owned(),
        };
        f.debug_struct("EnqueueHandler")
            .field("queue", &self.queue.name())
            .field("mapping", &mapping)
            .field("predicate", &self.predicate.is_some())
            .field("skip_resyncs", &self.skip_resyncs)
            .field("expectations", &self.expectations.is_some())
            .finish()
    }
}

impl<K: KubeObject> EnqueueHandler<K> {
    /// Enqueues the object's own key, resyncs included.
    pub fn for_object(queue: RateLimitingQueue<String>) -> Self {
        Self {
            queue,
            mapping: Mapping::Object,
            predicate: None,
            skip_resyncs: false,
            expectations: None,
        }
    }

    /// Enqueues the key of the object's controller owner when that owner
    /// is an `O` (kind and API group compared; the version may differ).
    /// A namespaced owner is looked for in the object's namespace. The
    /// owner is not looked up: a reconcile of a key that is not in the
    /// cache is skipped. Resyncs are skipped.
    pub fn for_owner<O: KubeResource>(queue: RateLimitingQueue<String>) -> Self {
        let resource = O::api_resource();
        Self {
            queue,
            mapping: Mapping::Owner {
                kind: resource.kind,
                group: resource.group,
                namespaced: resource.namespaced,
                exists: None,
            },
            predicate: None,
            skip_resyncs: true,
            expectations: None,
        }
    }

    /// As [`for_owner`](Self::for_owner), but the owner's key is enqueued
    /// only when `owners` (the owner informer's lister) holds it, as
    /// kubernetes/sample-controller's `handleObject` checks: events of an
    /// object whose owner is gone or not yet seen enqueue nothing (logged
    /// at debug). Resyncs are skipped.
    pub fn for_cached_owner<O: KubeResource>(
        queue: RateLimitingQueue<String>,
        owners: Lister<O>,
    ) -> Self {
        let mut handler = Self::for_owner::<O>(queue);
        if let Mapping::Owner { exists, .. } = &mut handler.mapping {
            *exists = Some(Arc::new(move |namespace: &str, name: &str| {
                owners.get(namespace, name).is_some()
            }));
        }
        handler
    }

    /// Enqueues the keys `map` gives for the object. Resyncs are skipped.
    pub fn from_map<I>(
        queue: RateLimitingQueue<String>,
        map: impl Fn(&K) -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = String>,
    {
        Self {
            queue,
            mapping: Mapping::Func(Arc::new(move |obj| map(obj).into_iter().collect())),
            predicate: None,
            skip_resyncs: true,
            expectations: None,
        }
    }

    /// Whether updates with an unchanged resourceVersion (periodic
    /// resyncs) are skipped.
    #[must_use]
    pub fn skip_resyncs(mut self, skip: bool) -> Self {
        self.skip_resyncs = skip;
        self
    }

    /// Each add lowers the creations `expectations` expect for the keys
    /// it maps to ([`Expectations::creation_observed`]), each deletion the
    /// deletions ([`Expectations::deletion_observed`]), before the keys are
    /// enqueued: with [`for_owner`](Self::for_owner), a controller's
    /// creates and deletes of owned objects are seen for its key (CT18).
    #[must_use]
    pub fn observe_expectations(mut self, expectations: Expectations) -> Self {
        self.expectations = Some(expectations);
        self
    }

    /// Only events `predicate` accepts enqueue anything.
    #[must_use]
    pub fn with_predicate(mut self, predicate: Predicate<K>) -> Self {
        self.predicate = Some(predicate);
        self
    }

    fn passes(&self, change: &Change<'_, K>) -> bool {
        self.predicate.as_ref().is_none_or(|p| p.matches(change))
    }

    /// The keys `obj` maps to, added to `keys` unless already there.
    fn keys_of(&self, obj: &K, keys: &mut Vec<String>) {
        let mut push = |key: String| {
            if !keys.contains(&key) {
                keys.push(key);
            }
        };
        match &self.mapping {
            Mapping::Object => match meta_namespace_key(obj) {
                Ok(key) => push(key),
                Err(e) => tracing::error!(error = %e, "cannot enqueue an object without a key"),
            },
            Mapping::Owner {
                kind,
                group,
                namespaced,
                exists,
            } => {
                let Some(owner) = obj.controller_ref() else {
                    return;
                };
                if owner.kind != *kind || group_of(&owner.api_version) != *group {
                    return;
                }
                let namespace = match (namespaced, obj.namespace()) {
                    (false, _) => Some(""),
                    (true, Some(ns)) if !ns.is_empty() => Some(ns),
                    (true, _) => None,
                };
                let cached = |ns: &str| exists.as_ref().is_none_or(|e| e(ns, &owner.name));
                match namespace {
                    Some(ns) if !cached(ns) => tracing::debug!(
                        namespace = ns,
                        owner = %owner.name,
                        object = obj.name().unwrap_or_default(),
                        "ignoring an object whose owner is not in the cache"
                    ),
                    Some("") => push(owner.name.clone()),
                    Some(ns) => push(format!("{ns}/{}", owner.name)),
                    None => tracing::debug!(
                        owner = %owner.name,
                        "a cluster-scoped object names a namespaced owner: ignored"
                    ),
                }
            }
            Mapping::Func(map) => map(obj).into_iter().for_each(push),
        }
    }

    fn enqueue(&self, keys: Vec<String>) {
        for key in keys {
            tracing::trace!(queue = self.queue.name(), %key, "enqueue");
            self.queue.add(key);
        }
    }
}

impl<K: KubeObject> ResourceEventHandler<K> for EnqueueHandler<K> {
    fn on_add(&self, obj: &Arc<K>, _is_in_initial_list: bool) {
        if self.passes(&Change::Added(obj)) {
            let mut keys = Vec::with_capacity(1);
            self.keys_of(obj, &mut keys);
            if let Some(expectations) = &self.expectations {
                keys.iter().for_each(|k| expectations.creation_observed(k));
            }
            self.enqueue(keys);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if self.skip_resyncs && old.resource_version() == new.resource_version() {
            return;
        }
        if !self.passes(&Change::Updated { old, new }) {
            return;
        }
        let mut keys = Vec::with_capacity(2);
        self.keys_of(new, &mut keys);
        if !matches!(self.mapping, Mapping::Object) {
            self.keys_of(old, &mut keys);
        }
        self.enqueue(keys);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if !self.passes(&Change::Deleted(obj.object())) {
            return;
        }
        let mut keys = Vec::with_capacity(1);
        match (&self.mapping, obj) {
            // the tombstone's key is the one the store used
            (Mapping::Object, ObjectOrTombstone::Tombstone(t)) => keys.push(t.key.clone()),
            _ => self.keys_of(obj.object(), &mut keys),
        }
        if let Some(expectations) = &self.expectations {
            keys.iter().for_each(|k| expectations.deletion_observed(k));
        }
        self.enqueue(keys);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owner::new_controller_ref;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kcontrol_indexer::DeletedFinalStateUnknown;

    fn obj<K: kcontrol_indexer::Object + Default>(
        ns: Option<&str>,
        name: &str,
        rv: &str,
    ) -> Arc<K> {
        let mut o = K::default();
        o.meta_mut().namespace = ns.map(str::to_owned);
        o.meta_mut().name = Some(name.into());
        o.meta_mut().uid = Some(format!("uid-{name}"));
        o.meta_mut().resource_version = Some(rv.into());
        Arc::new(o)
    }

    fn owned_rs(owner: &Deployment, name: &str, rv: &str) -> Arc<ReplicaSet> {
        let mut rs = ReplicaSet::clone(&obj(Some("ns"), name, rv));
        rs.metadata.owner_references = Some(vec![new_controller_ref(owner)]);
        Arc::new(rs)
    }

    fn drain(queue: &RateLimitingQueue<String>) -> Vec<String> {
        let mut keys = Vec::new();
        while let kcontrol_workqueue::TryGet::Item(k) = queue.try_get() {
            queue.done(&k);
            keys.push(k);
        }
        keys
    }

    #[test]
    fn ct2_object_keys_resyncs_and_tombstones() {
        let queue = RateLimitingQueue::new();
        let h = EnqueueHandler::<ConfigMap>::for_object(queue.clone());
        let a = obj(Some("ns"), "a", "1");
        h.on_add(&a, true);
        assert_eq!(drain(&queue), ["ns/a"]);
        h.on_update(&a, &a); // resync: enqueued by default
        assert_eq!(drain(&queue), ["ns/a"]);
        h.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/a".into(),
            obj: Arc::clone(&a),
        }));
        assert_eq!(drain(&queue), ["ns/a"]);
        let cluster = obj::<Namespace>(None, "team", "1");
        EnqueueHandler::for_object(queue.clone()).on_add(&cluster, false);
        assert_eq!(drain(&queue), ["team"]);
        let h = h.skip_resyncs(true);
        h.on_update(&a, &a);
        assert!(drain(&queue).is_empty());
    }

    #[test]
    fn ct3_owner_keys_check_kind_and_group_and_skip_resyncs() {
        let queue = RateLimitingQueue::new();
        let h = EnqueueHandler::<ReplicaSet>::for_owner::<Deployment>(queue.clone());
        let web = obj::<Deployment>(Some("ns"), "web", "1");
        let rs = owned_rs(&web, "web-1", "5");
        h.on_add(&rs, false);
        let newer = owned_rs(&web, "web-1", "6");
        h.on_update(&rs, &newer);
        assert_eq!(drain(&queue), ["ns/web"]);
        h.on_update(&newer, &newer); // resync: skipped
        assert!(drain(&queue).is_empty());
        h.on_delete(&ObjectOrTombstone::Object(Arc::clone(&rs)));
        assert_eq!(drain(&queue), ["ns/web"]);
        h.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/web-1".into(),
            obj: Arc::clone(&rs),
        }));
        assert_eq!(drain(&queue), ["ns/web"]);

        // the same kind in another group, another kind, a non-controller
        // owner, no owner: nothing
        let mut other_group = ReplicaSet::clone(&rs);
        other_group.metadata.owner_references.as_mut().unwrap()[0].api_version =
            "example.com/v1".into();
        let mut other_kind = ReplicaSet::clone(&rs);
        other_kind.metadata.owner_references.as_mut().unwrap()[0].kind = "StatefulSet".into();
        let mut not_controller = ReplicaSet::clone(&rs);
        not_controller.metadata.owner_references.as_mut().unwrap()[0].controller = None;
        let orphan = obj::<ReplicaSet>(Some("ns"), "orphan", "1");
        for rs in [other_group, other_kind, not_controller] {
            h.on_add(&Arc::new(rs), false);
        }
        h.on_add(&orphan, false);
        assert!(drain(&queue).is_empty());
    }

    #[test]
    fn ct3_a_cluster_scoped_owner_keys_by_name() {
        let queue = RateLimitingQueue::new();
        let h = EnqueueHandler::<ConfigMap>::for_owner::<Namespace>(queue.clone());
        let team = obj::<Namespace>(None, "team", "1");
        let mut cm = ConfigMap::clone(&obj(Some("team"), "settings", "1"));
        cm.metadata.owner_references = Some(vec![new_controller_ref(team.as_ref())]);
        h.on_add(&Arc::new(cm), false);
        assert_eq!(drain(&queue), ["team"]);
        // a namespaced owner named by a cluster-scoped object: no key
        let h = EnqueueHandler::<Namespace>::for_owner::<Deployment>(queue.clone());
        let mut ns = Namespace::clone(&obj(None, "odd", "1"));
        let web = obj::<Deployment>(Some("ns"), "web", "1");
        ns.metadata.owner_references = Some(vec![new_controller_ref(web.as_ref())]);
        h.on_add(&Arc::new(ns), false);
        assert!(drain(&queue).is_empty());
    }

    #[test]
    fn ct3_an_owner_change_enqueues_both_owners() {
        let queue = RateLimitingQueue::new();
        let h = EnqueueHandler::<ReplicaSet>::for_owner::<Deployment>(queue.clone());
        let a = obj::<Deployment>(Some("ns"), "a", "1");
        let b = obj::<Deployment>(Some("ns"), "b", "1");
        h.on_update(&owned_rs(&a, "x", "1"), &owned_rs(&b, "x", "2"));
        assert_eq!(drain(&queue), ["ns/b", "ns/a"]);
    }

    #[test]
    fn mapped_keys_and_predicates() {
        let queue = RateLimitingQueue::new();
        let h = EnqueueHandler::<ConfigMap>::from_map(queue.clone(), |cm: &ConfigMap| {
            cm.labels().get("target").map(|t| format!("ns/{t}"))
        })
        .with_predicate(Predicate::labels_changed());
        let mut cm = ConfigMap::clone(&obj(Some("ns"), "a", "1"));
        cm.metadata.labels = Some([("target".to_owned(), "x".to_owned())].into());
        let old = Arc::new(cm.clone());
        h.on_add(&old, false);
        assert_eq!(drain(&queue), ["ns/x"]);
        cm.metadata.resource_version = Some("2".into());
        h.on_update(&old, &Arc::new(cm.clone())); // labels unchanged: filtered
        assert!(drain(&queue).is_empty());
        cm.metadata.labels = Some([("target".to_owned(), "y".to_owned())].into());
        h.on_update(&old, &Arc::new(cm));
        assert_eq!(drain(&queue), ["ns/y", "ns/x"]);
        assert!(format!("{h:?}").contains("function"));
    }

    #[test]
    fn ct3_cached_owner_keys_only_owners_in_the_cache() {
        let queue = RateLimitingQueue::new();
        let store = Arc::new(kcontrol_indexer::ThreadSafeStore::<Deployment>::new());
        let h = EnqueueHandler::<ReplicaSet>::for_cached_owner::<Deployment>(
            queue.clone(),
            Lister::new(Arc::clone(&store)),
        );
        let web = obj::<Deployment>(Some("ns"), "web", "1");
        let rs = owned_rs(&web, "web-1", "5");
        // the owner is not cached yet: an orphan, nothing enqueued
        h.on_add(&rs, false);
        assert!(drain(&queue).is_empty());
        store.add(Arc::clone(&web)).unwrap();
        h.on_add(&rs, false);
        assert_eq!(drain(&queue), ["ns/web"]);
        h.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/web-1".into(),
            obj: Arc::clone(&rs),
        }));
        assert_eq!(drain(&queue), ["ns/web"]);
        // a Deployment of the same name in another namespace is another owner
        let mut elsewhere = ReplicaSet::clone(&rs);
        elsewhere.metadata.namespace = Some("other".into());
        h.on_add(&Arc::new(elsewhere), false);
        // resyncs stay skipped
        h.on_update(&rs, &rs);
        assert!(drain(&queue).is_empty());
        assert!(format!("{h:?}").contains("cached owner Deployment.apps"));

        // a cluster-scoped owner is looked up by name
        let ns_store = Arc::new(kcontrol_indexer::ThreadSafeStore::<Namespace>::new());
        let h = EnqueueHandler::<ConfigMap>::for_cached_owner::<Namespace>(
            queue.clone(),
            Lister::new(Arc::clone(&ns_store)),
        );
        let team = obj::<Namespace>(None, "team", "1");
        let mut cm = ConfigMap::clone(&obj(Some("team"), "settings", "1"));
        cm.metadata.owner_references = Some(vec![new_controller_ref(team.as_ref())]);
        let cm = Arc::new(cm);
        h.on_add(&cm, false);
        assert!(drain(&queue).is_empty());
        ns_store.add(team).unwrap();
        h.on_add(&cm, false);
        assert_eq!(drain(&queue), ["team"]);
    }

    #[test]
    fn ct18_adds_and_deletions_lower_the_owners_expectations() {
        let queue = RateLimitingQueue::new();
        let expectations = Expectations::new();
        let h = EnqueueHandler::<ReplicaSet>::for_owner::<Deployment>(queue.clone())
            .observe_expectations(expectations.clone());
        let web = obj::<Deployment>(Some("ns"), "web", "1");
        expectations.expect_creations("ns/web", 2);
        h.on_add(&owned_rs(&web, "web-1", "1"), false);
        assert!(!expectations.satisfied("ns/web"));
        // an update is neither a creation nor a deletion
        h.on_update(&owned_rs(&web, "web-1", "1"), &owned_rs(&web, "web-1", "2"));
        assert!(!expectations.satisfied("ns/web"));
        h.on_add(&owned_rs(&web, "web-2", "3"), false);
        assert!(expectations.satisfied("ns/web"));
        assert_eq!(drain(&queue), ["ns/web"]);

        expectations.expect_deletions("ns/web", 1);
        h.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/web-1".into(),
            obj: owned_rs(&web, "web-1", "2"),
        }));
        assert!(expectations.satisfied("ns/web"));
        // an object owned by something else lowers nothing
        expectations.expect_creations("ns/web", 1);
        h.on_add(&obj::<ReplicaSet>(Some("ns"), "orphan", "1"), false);
        assert!(!expectations.satisfied("ns/web"));
    }
}
