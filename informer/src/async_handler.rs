//! Async event handlers: [`AsyncResourceEventHandler`], run on a tokio task
//! of their own instead of an OS thread (IN1 still holds: each handler has
//! its own buffer and its own task, so a handler that awaits for long holds
//! up neither the informer nor any other handler).
//!
//! A handler that blocks the thread (a blocking lock, blocking I/O, long
//! CPU work) belongs on a thread: register it with
//! [`add_event_handler`](crate::SharedIndexInformer::add_event_handler). One
//! that awaits belongs here, with
//! [`add_async_event_handler`](crate::SharedIndexInformer::add_async_event_handler):
//! fifty informers with three async handlers each cost 150 tasks, not 150
//! threads.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kcontrol_indexer::ObjectOrTombstone;

/// The future an [`AsyncResourceEventHandler`] method returns.
pub type HandlerFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Receives an informer's notifications one at a time, in order, on the
/// handler's own tokio task: the next call starts once the previous
/// future has completed. The same notifications, in the same order, as a
/// [`ResourceEventHandler`](crate::ResourceEventHandler) gets.
///
/// Every method has a no-op default. A panic (while building or polling
/// the future) is caught, logged and counted as handled, as for thread
/// handlers.
///
/// ```
/// use std::sync::Arc;
/// use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
/// use kcontrol_indexer::meta_namespace_key;
/// use kcontrol_informer::{AsyncResourceEventHandler, HandlerFuture};
/// use tokio::sync::mpsc;
///
/// /// Sends each added ConfigMap's key down a bounded channel, waiting
/// /// (without blocking a thread) while the channel is full.
/// struct Forward(mpsc::Sender<String>);
///
/// impl AsyncResourceEventHandler<ConfigMap> for Forward {
///     fn on_add(&self, obj: Arc<ConfigMap>, _initial: bool) -> HandlerFuture<'_> {
///         Box::pin(async move {
///             if let Ok(key) = meta_namespace_key(obj.as_ref()) {
///                 let _ = self.0.send(key).await;
///             }
///         })
///     }
/// }
/// ```
pub trait AsyncResourceEventHandler<K>: Send + Sync + 'static {
    /// An object appeared; `initial` is true for the objects of the
    /// initial list (and the store's contents for a handler added late).
    fn on_add(&self, obj: Arc<K>, initial: bool) -> HandlerFuture<'_> {
        let _ = (obj, initial);
        Box::pin(std::future::ready(()))
    }

    /// An object changed (or a resync delivered it again: then `old` and
    /// `new` are the same object).
    fn on_update(&self, old: Arc<K>, new: Arc<K>) -> HandlerFuture<'_> {
        let _ = (old, new);
        Box::pin(std::future::ready(()))
    }

    /// An object was deleted; a tombstone when the deletion was missed
    /// while the watch was down.
    fn on_delete(&self, obj: ObjectOrTombstone<K>) -> HandlerFuture<'_> {
        let _ = obj;
        Box::pin(std::future::ready(()))
    }
}
