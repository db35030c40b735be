//! [`Lister`]: typed, read-only access to a shared [`ThreadSafeStore`], the
//! way controllers read their cache (client-go's generated listers).

use std::fmt;
use std::sync::Arc;

use crate::labels::Selector;
use crate::object::KubeObject;
use crate::store::{ThreadSafeStore, NAMESPACE_INDEX};

/// Reads objects of one kind from a shared store: all of them, those of a
/// namespace, those matching a label selector, or one by namespace and name.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcontrol_indexer::{labels::Selector, Lister, Object, ThreadSafeStore};
///
/// let store = Arc::new(ThreadSafeStore::new());
/// for (ns, name, app) in [("prod", "a", "web"), ("prod", "b", "db"), ("dev", "a", "web")] {
///     let mut cm = ConfigMap::default();
///     cm.meta_mut().namespace = Some(ns.into());
///     cm.meta_mut().name = Some(name.into());
///     cm.meta_mut().labels = Some([("app".to_owned(), app.to_owned())].into());
///     store.add(Arc::new(cm))?;
/// }
/// let lister = Lister::new(Arc::clone(&store));
/// let web = Selector::parse("app=web")?;
/// assert_eq!(lister.list_by_selector(&web).len(), 2);
/// assert_eq!(lister.namespaced("prod").list_by_selector(&web).len(), 1);
/// assert!(lister.get("dev", "a").is_some());
/// assert!(lister.namespaced("dev").get("b").is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Lister<K> {
    store: Arc<ThreadSafeStore<K>>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
        }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister")
            .field("store", &self.store)
            .finish()
    }
}

impl<K: KubeObject> Lister<K> {
    /// A lister reading `store`.
    pub fn new(store: Arc<ThreadSafeStore<K>>) -> Self {
        Self { store }
    }

    /// The store it reads.
    pub fn store(&self) -> &Arc<ThreadSafeStore<K>> {
        &self.store
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    /// Every object whose labels match `selector`.
    pub fn list_by_selector(&self, selector: &Selector) -> Vec<Arc<K>> {
        if selector.is_empty() {
            return self.store.list();
        }
        self.store
            .list_filtered(|obj| selector.matches(obj.labels()))
    }

    /// Every object in `namespace` (`""`: cluster-scoped objects), through
    /// the namespace index when the store has one.
    pub fn list_namespaced(&self, namespace: &str) -> Vec<Arc<K>> {
        self.list_namespaced_by_selector(namespace, &Selector::everything())
    }

    /// Every object in `namespace` whose labels match `selector`.
    pub fn list_namespaced_by_selector(&self, namespace: &str, selector: &Selector) -> Vec<Arc<K>> {
        let keep = |obj: &K| selector.is_empty() || selector.matches(obj.labels());
        match self
            .store
            .by_index_filtered(NAMESPACE_INDEX, namespace, keep)
        {
            Ok(objects) => objects,
            // The only error: this store has no namespace index, so scan.
            Err(_) => self
                .store
                .list_filtered(|obj| obj.namespace().unwrap_or_default() == namespace && keep(obj)),
        }
    }

    /// The object `namespace/name`, or the cluster-scoped object `name`
    /// when `namespace` is empty.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        if namespace.is_empty() {
            return self.store.get_by_key(name);
        }
        let mut key = String::with_capacity(namespace.len() + 1 + name.len());
        key.push_str(namespace);
        key.push('/');
        key.push_str(name);
        self.store.get_by_key(&key)
    }

    /// A view of one namespace (client-go's `Lister(ns)`).
    pub fn namespaced(&self, namespace: impl Into<String>) -> NamespaceLister<K> {
        NamespaceLister {
            lister: self.clone(),
            namespace: namespace.into(),
        }
    }
}

/// A [`Lister`] limited to one namespace.
pub struct NamespaceLister<K> {
    lister: Lister<K>,
    namespace: String,
}

impl<K> Clone for NamespaceLister<K> {
    fn clone(&self) -> Self {
        Self {
            lister: self.lister.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

impl<K> fmt::Debug for NamespaceLister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<K: KubeObject> NamespaceLister<K> {
    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Every object in the namespace.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.lister.list_namespaced(&self.namespace)
    }

    /// Every object in the namespace whose labels match `selector`.
    pub fn list_by_selector(&self, selector: &Selector) -> Vec<Arc<K>> {
        self.lister
            .list_namespaced_by_selector(&self.namespace, selector)
    }

    /// The object with this name in the namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.lister.get(&self.namespace, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Indexers;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(ns: &str, name: &str, app: &str) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some(ns.into());
        cm.metadata.name = Some(name.into());
        cm.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        Arc::new(cm)
    }

    fn keys(objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
        let mut keys: Vec<String> = objs
            .iter()
            .filter_map(|o| crate::meta_namespace_key(o.as_ref()).ok())
            .collect();
        keys.sort();
        keys
    }

    fn fill(store: &ThreadSafeStore<ConfigMap>) {
        for (ns, name, app) in [
            ("p", "a", "web"),
            ("p", "b", "db"),
            ("d", "a", "web"),
            ("d", "c", ""),
        ] {
            store.add(cm(ns, name, app)).unwrap();
        }
    }

    #[test]
    fn lists_gets_and_selects() {
        for store in [
            ThreadSafeStore::new(),
            ThreadSafeStore::with_indexers(Indexers::new()),
        ] {
            fill(&store);
            let lister = Lister::new(Arc::new(store));
            let web = Selector::parse("app=web").unwrap();
            assert_eq!(keys(lister.list()), ["d/a", "d/c", "p/a", "p/b"]);
            assert_eq!(keys(lister.list_by_selector(&web)), ["d/a", "p/a"]);
            assert_eq!(
                keys(lister.list_by_selector(&Selector::everything())).len(),
                4
            );
            assert_eq!(keys(lister.list_namespaced("p")), ["p/a", "p/b"]);
            assert!(lister.list_namespaced("nope").is_empty());
            let not_web = Selector::parse("app!=web").unwrap();
            assert_eq!(
                keys(lister.namespaced("d").list_by_selector(&not_web)),
                ["d/c"]
            );
            assert_eq!(keys(lister.namespaced("d").list()), ["d/a", "d/c"]);
            assert_eq!(lister.get("p", "b").unwrap().labels()["app"], "db");
            assert!(lister.get("p", "c").is_none());
            assert!(lister.get("", "a").is_none());
            let ns = lister.namespaced("p");
            assert_eq!(ns.namespace(), "p");
            assert!(ns.get("a").is_some());
            assert!(ns.clone().get("zzz").is_none());
        }
    }

    #[test]
    fn sees_later_changes_of_the_shared_store() {
        let store = Arc::new(ThreadSafeStore::new());
        let lister = Lister::new(Arc::clone(&store));
        assert!(lister.list().is_empty());
        store.add(cm("p", "a", "web")).unwrap();
        assert!(lister.namespaced("p").get("a").is_some());
        assert!(Arc::ptr_eq(lister.store(), &store));
    }
}
