//! Event handlers: the [`ResourceEventHandler`] trait, the closure-based
//! [`ResourceEventHandlerFuncs`], and [`FilteringResourceEventHandler`]
//! (client-go's handler types, typed: no handler ever needs a runtime type
//! check, deletions arrive as [`ObjectOrTombstone`]).

use std::fmt;
use std::sync::Arc;

use kcontrol_indexer::ObjectOrTombstone;

/// Receives an informer's notifications, one at a time, in order, on the
/// handler's own tokio task (its own thread if registered with
/// `HandlerOptions::blocking` or outside a runtime).
///
/// Every method has a no-op default. Methods are plain (not `async`):
/// each handler has its own buffer and task, so a slow handler delays no
/// other handler and not the informer (IN1). A handler that may block (as
/// Go handlers may) asks for a thread of its own with
/// `HandlerOptions::blocking(true)`. Objects are the
/// store's shared `Arc`s; never mutate them through interior mutability.
///
/// The informer calls:
/// - [`on_add`](Self::on_add) when an object appears, with
///   `is_in_initial_list` when it belongs to the informer's initial list, or
///   to the store contents a handler added after start receives first (IN2);
/// - [`on_update`](Self::on_update) when it changes, and on resync (then
///   `old` and `new` have the same resourceVersion, often the same `Arc`);
/// - [`on_delete`](Self::on_delete) when it goes away, with the final state,
///   or a tombstone holding the last known state when the deletion itself
///   was missed (IN3).
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object was added.
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object was updated, or resynced.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object was deleted.
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        let _ = obj;
    }
}

impl<K, H> ResourceEventHandler<K> for Arc<H>
where
    H: ResourceEventHandler<K> + ?Sized,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        (**self).on_update(old, new);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        (**self).on_delete(obj);
    }
}

impl<K, H> ResourceEventHandler<K> for Box<H>
where
    H: ResourceEventHandler<K> + ?Sized,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        (**self).on_update(old, new);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        (**self).on_delete(obj);
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&ObjectOrTombstone<K>) + Send + Sync>;

/// A handler made of closures; an unset one does nothing (client-go's
/// `ResourceEventHandlerFuncs`, with `is_in_initial_list` as in its
/// detailed variant).
///
/// ```
/// use std::sync::Arc;
/// use kcontrol_indexer::{k8s_openapi::api::core::v1::ConfigMap, Object};
/// use kcontrol_informer::{ResourceEventHandler, ResourceEventHandlerFuncs};
///
/// let handler = ResourceEventHandlerFuncs::<ConfigMap>::new()
///     .add_func(|cm, initial| println!("added {:?} (initial: {initial})", cm.name()))
///     .update_func(|old, new| {
///         if old.resource_version() != new.resource_version() {
///             println!("changed {:?}", new.name());
///         }
///     })
///     .delete_func(|gone| println!("deleted {:?}", gone.object().name()));
/// handler.on_add(&Arc::new(ConfigMap::default()), true);
/// ```
pub struct ResourceEventHandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for ResourceEventHandlerFuncs<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> fmt::Debug for ResourceEventHandlerFuncs<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceEventHandlerFuncs")
            .field("add", &self.add.is_some())
            .field("update", &self.update.is_some())
            .field("delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> ResourceEventHandlerFuncs<K> {
    /// A handler that does nothing until closures are set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called for adds: the object and `is_in_initial_list`.
    #[must_use]
    pub fn add_func(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Called for updates and resyncs: the old and the new object.
    #[must_use]
    pub fn update_func(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Called for deletions: the final state or a tombstone.
    #[must_use]
    pub fn delete_func(
        mut self,
        f: impl Fn(&ObjectOrTombstone<K>) + Send + Sync + 'static,
    ) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for ResourceEventHandlerFuncs<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}

type FilterFn<K> = Box<dyn Fn(&K) -> bool + Send + Sync>;

/// Passes on only the objects a filter accepts, turning transitions across
/// the filter into adds and deletes (client-go's
/// `FilteringResourceEventHandler`):
///
/// - an add or delete reaches the inner handler when the filter accepts the
///   object (for a tombstone: its last known state);
/// - an update where both states pass is an update; where only the new one
///   passes, an add (`is_in_initial_list = false`); where only the old one
///   passes, a delete of the old state; where neither, nothing.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kcontrol_indexer::{k8s_openapi::api::core::v1::ConfigMap, Object};
/// use kcontrol_informer::{FilteringResourceEventHandler, ResourceEventHandler, ResourceEventHandlerFuncs};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = Arc::clone(&seen);
/// let inner = ResourceEventHandlerFuncs::new()
///     .add_func(move |cm: &Arc<ConfigMap>, _| log.lock().unwrap().push(cm.name().unwrap_or("").to_owned()));
/// let handler = FilteringResourceEventHandler::new(
///     |cm: &ConfigMap| cm.labels().get("app").is_some_and(|app| app == "web"),
///     inner,
/// );
/// let mut web = ConfigMap::default();
/// web.meta_mut().name = Some("web".into());
/// web.meta_mut().labels = Some([("app".to_owned(), "web".to_owned())].into());
/// let mut db = ConfigMap::default();
/// db.meta_mut().name = Some("db".into());
/// handler.on_add(&Arc::new(web), false);
/// handler.on_add(&Arc::new(db), false);
/// assert_eq!(*seen.lock().unwrap(), ["web"]);
/// ```
pub struct FilteringResourceEventHandler<K, H> {
    filter: FilterFn<K>,
    handler: H,
}

impl<K, H: fmt::Debug> fmt::Debug for FilteringResourceEventHandler<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringResourceEventHandler")
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl<K, H> FilteringResourceEventHandler<K, H> {
    /// Wraps `handler`, passing on what `filter` accepts.
    pub fn new(filter: impl Fn(&K) -> bool + Send + Sync + 'static, handler: H) -> Self {
        Self {
            filter: Box::new(filter),
            handler,
        }
    }

    /// The wrapped handler.
    pub fn inner(&self) -> &H {
        &self.handler
    }
}

impl<K, H> ResourceEventHandler<K> for FilteringResourceEventHandler<K, H>
where
    K: Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(obj) {
            self.handler.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.handler.on_update(old, new),
            (false, true) => self.handler.on_add(new, false),
            (true, false) => self
                .handler
                .on_delete(&ObjectOrTombstone::Object(Arc::clone(old))),
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if (self.filter)(obj.object()) {
            self.handler.on_delete(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcontrol_indexer::DeletedFinalStateUnknown;
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl ResourceEventHandler<i32> for Log {
        fn on_add(&self, obj: &Arc<i32>, initial: bool) {
            self.0.lock().push(format!("add {obj} {initial}"));
        }
        fn on_update(&self, old: &Arc<i32>, new: &Arc<i32>) {
            self.0.lock().push(format!("update {old}->{new}"));
        }
        fn on_delete(&self, obj: &ObjectOrTombstone<i32>) {
            let tomb = if obj.is_tombstone() { " tombstone" } else { "" };
            self.0.lock().push(format!("delete {}{tomb}", obj.object()));
        }
    }

    #[test]
    fn filtering_turns_transitions_into_adds_and_deletes() {
        let log = Arc::new(Log::default());
        let h = FilteringResourceEventHandler::new(|v: &i32| *v % 2 == 0, Arc::clone(&log));
        h.on_add(&Arc::new(1), true);
        h.on_add(&Arc::new(2), true);
        h.on_update(&Arc::new(2), &Arc::new(4)); // both pass
        h.on_update(&Arc::new(4), &Arc::new(5)); // leaves
        h.on_update(&Arc::new(5), &Arc::new(6)); // enters
        h.on_update(&Arc::new(7), &Arc::new(9)); // neither
        h.on_delete(&ObjectOrTombstone::Object(Arc::new(3)));
        h.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "k".into(),
            obj: Arc::new(8),
        }));
        assert_eq!(
            *log.0.lock(),
            [
                "add 2 true",
                "update 2->4",
                "delete 4",
                "add 6 false",
                "delete 8 tombstone"
            ]
        );
        assert!(Arc::ptr_eq(h.inner(), &log));
    }

    #[test]
    fn funcs_call_only_what_is_set() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = Arc::clone(&log);
        let h = ResourceEventHandlerFuncs::new().update_func(move |o: &Arc<i32>, n| {
            l.lock().push((**o, **n));
        });
        h.on_add(&Arc::new(1), false);
        h.on_update(&Arc::new(1), &Arc::new(2));
        h.on_delete(&ObjectOrTombstone::Object(Arc::new(2)));
        assert_eq!(*log.lock(), [(1, 2)]);
        assert!(format!("{h:?}").contains("update: true"));
        // a boxed trait object is a handler too
        let boxed: Box<dyn ResourceEventHandler<i32>> = Box::new(h);
        boxed.on_update(&Arc::new(3), &Arc::new(4));
        assert_eq!(log.lock().len(), 2);
    }
}
