//! What a [`Controller`](crate::Controller) calls: a [`Reconciler`] (a
//! trait, or any async closure `Fn(Arc<K>, Context<K>) -> Result<Action, E>`)
//! receiving the object from the cache and a [`Context`], and answering
//! with an [`Action`]: done, requeue now, requeue after a delay, or
//! requeue with the rate limiter's backoff.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::events::Recorder;
use kcontrol_client::{Api, Client, Error as ClientError, Patch, PatchParams};
use kcontrol_indexer::{KubeObject, KubeResource, Lister, TypedResource};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::converge::{apply_owned_if_changed, Operation};

/// What becomes of a key after a reconcile (or, through the error policy,
/// after a failed one). CT8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Finished: the key's failure count is reset (`forget`); the next
    /// event on the object enqueues it again.
    Done,
    /// Reconcile again as soon as a worker is free: the key goes to the back
    /// of the queue (behind keys already waiting, so it starves none);
    /// failure count reset.
    Requeue,
    /// Reconcile again after this delay (polling a long-running task);
    /// failure count reset. An event before then reconciles it earlier.
    RequeueAfter(Duration),
    /// Reconcile again after the queue's rate limiter's backoff (per key,
    /// exponential from 5 ms to 1000 s, and overall 10 qps): the default
    /// after an error.
    RequeueRateLimited,
}

/// The shared part of every [`Context`] of one controller run.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) name: String,
    /// A lister per watched type, by `TypeId` of the object type.
    pub(crate) listers: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// The controller's expectations, when it has them.
    pub(crate) expectations: Option<crate::Expectations>,
    /// The controller's event recorder.
    pub(crate) recorder: Recorder,
}

/// What a reconcile gets beside the object: the client, the key, how often
/// it failed before, and listers of every type the controller watches.
/// Cheap to clone.
pub struct Context<K> {
    shared: Arc<Shared>,
    key: String,
    requeues: u32,
    _object: std::marker::PhantomData<fn() -> K>,
}

impl<K> Clone for Context<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            key: self.key.clone(),
            requeues: self.requeues,
            _object: std::marker::PhantomData,
        }
    }
}

impl<K> fmt::Debug for Context<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.shared.name)
            .field("key", &self.key)
            .field("requeues", &self.requeues)
            .finish_non_exhaustive()
    }
}

impl<K> Context<K> {
    pub(crate) fn new(shared: Arc<Shared>, key: String, requeues: u32) -> Self {
        Self {
            shared,
            key,
            requeues,
            _object: std::marker::PhantomData,
        }
    }

    /// The controller's client.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// The key reconciled (`namespace/name`, or `name`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How many times in a row this key failed (or panicked) before.
    pub fn num_requeues(&self) -> u32 {
        self.requeues
    }

    /// The controller's name.
    pub fn controller_name(&self) -> &str {
        &self.shared.name
    }

    /// The controller's event recorder (reporting as the controller's
    /// name): [`Recorder::event`] for events that may be written later,
    /// [`Recorder::publish`] for one that must be written before the
    /// reconcile goes on (before removing a finalizer).
    pub fn recorder(&self) -> &Recorder {
        &self.shared.recorder
    }

    /// The controller's expectations
    /// ([`Controller::with_expectations`](crate::Controller::with_expectations)):
    /// creations and deletions of owned objects not yet in the cache, by
    /// key (CT18). `None` when the controller was built without them.
    pub fn expectations(&self) -> Option<&crate::Expectations> {
        self.shared.expectations.as_ref()
    }

    /// The cached `T` named `name` in the reconciled object's namespace
    /// (by name alone when `T` is cluster-scoped), from the controller's
    /// cache of `T` — an owned object named as its owner, say. `None` when
    /// it is not in the cache, or `T` is not cached by this controller.
    pub fn cached<T: KubeResource>(&self, name: &str) -> Option<Arc<T>> {
        let namespace = if T::api_resource().namespaced {
            self.key.split_once('/').map_or("", |(ns, _)| ns)
        } else {
            ""
        };
        self.lister::<T>()?.get(namespace, name)
    }

    /// A lister of the controller's cache of `T`: the reconciled type, or
    /// one it [`owns`](crate::Controller::owns) or
    /// [`watches`](crate::Controller::watches). `None` for other types.
    pub fn lister<T: KubeObject>(&self) -> Option<Lister<T>> {
        self.shared
            .listers
            .get(&TypeId::of::<T>())
            .and_then(|l| l.downcast_ref::<Lister<T>>())
            .cloned()
    }
}

impl<K: TypedResource> Context<K> {
    /// Server-side apply of `object`, controlled by `owner`, as the
    /// controller's field manager (its name) — sent only when the object
    /// as it is now does not already hold what the apply sets (CT20,
    /// [`apply_owned_if_changed`]): at steady state, no write. The object
    /// as it is now comes from the controller's cache of `T` when it has
    /// one ([`owns`](crate::Controller::owns) or
    /// [`watches`](crate::Controller::watches)), else from a GET. Without
    /// a namespace, a namespaced `object` goes to `owner`'s.
    ///
    /// # Errors
    /// When `object` has no name, or the API server refuses the read or
    /// the apply.
    pub async fn apply_owned<T>(&self, owner: &K, mut object: T) -> Result<Operation, ClientError>
    where
        T: TypedResource + Serialize + DeserializeOwned,
    {
        let resource = T::api_resource();
        if resource.namespaced && object.meta().namespace.is_none() {
            object.meta_mut().namespace = owner.meta().namespace.clone();
        }
        let namespace = object.meta().namespace.clone().unwrap_or_default();
        let name = object.meta().name.clone().unwrap_or_default();
        let api: Api<T> = if resource.namespaced {
            Api::namespaced(self.client().clone(), &namespace)
        } else {
            Api::all(self.client().clone())
        };
        let live = match self.lister::<T>() {
            Some(lister) => lister.get(&namespace, &name),
            None if name.is_empty() => None,
            None => api.get_opt(&name).await?.map(Arc::new),
        };
        let manager = self.controller_name();
        apply_owned_if_changed(&api, owner, object, manager, live.as_deref()).await
    }

    /// Writes `status` as `object`'s status — a JSON merge patch of the
    /// status subresource, `{"status": status}` (a field the status type
    /// writes as `null` is removed) — unless `object` (from the cache)
    /// already has it: [`Operation::Unchanged`] and no write, so a
    /// reconcile that finds nothing new writes nothing (CT20). Unlike
    /// [`Api::patch_status`], which always writes.
    ///
    /// # Errors
    /// When `object` has no name, or the API server refuses the patch.
    pub async fn write_status<S>(&self, object: &K, status: &S) -> Result<Operation, ClientError>
    where
        K: Serialize + DeserializeOwned,
        S: Serialize,
    {
        let json = |v: serde_json::Result<serde_json::Value>| {
            v.map_err(|e| ClientError::InvalidRequest(format!("cannot serialize: {e}")))
        };
        let status = json(serde_json::to_value(status))?;
        let current = json(serde_json::to_value(object))?;
        if current.get("status") == Some(&status) {
            return Ok(Operation::Unchanged);
        }
        let name = object.meta().name.as_deref().ok_or_else(|| {
            ClientError::InvalidRequest("write_status: the object has no name".to_owned())
        })?;
        let api: Api<K> = match object.meta().namespace.as_deref() {
            Some(namespace) => Api::namespaced(self.client().clone(), namespace),
            None => Api::all(self.client().clone()),
        };
        let patch = Patch::Merge(serde_json::json!({ "status": status }));
        api.patch_status(name, &PatchParams::default(), &patch)
            .await?;
        Ok(Operation::Updated)
    }
}

/// Why [`Context::wait_until_cached`] gave up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotCachedError {
    /// The controller has no cache of that type (it neither reconciles,
    /// owns nor watches it).
    #[error("the controller does not cache objects of type {0}")]
    NotWatched(&'static str),
    /// The object written has no name or no resourceVersion (it was not
    /// returned by the API server).
    #[error("the object written has no {0}")]
    Missing(&'static str),
    /// The cache had not caught up when the time ran out; retry later
    /// (e.g. `Action::RequeueAfter`) rather than act on the stale cache.
    #[error("the cache did not see {key} at resourceVersion {resource_version} within {waited:?}")]
    Timeout {
        /// The object's key.
        key: String,
        /// The version written.
        resource_version: String,
        /// How long it waited.
        waited: Duration,
    },
}

/// Whether the cached version `cached` is at least `written` (decimal
/// versions compare as numbers, as every real server sends them; others
/// only by equality).
fn caught_up(cached: &str, written: &str) -> bool {
    match (cached.parse::<u64>(), written.parse::<u64>()) {
        (Ok(c), Ok(w)) => c >= w,
        _ => cached == written,
    }
}

impl<K> Context<K> {
    /// Read-your-writes (CT16): waits, at most `timeout`, until the
    /// controller's cache of `T` holds `written` (the object a create,
    /// update or patch returned) at its resourceVersion or newer — so the
    /// next read of the cache cannot miss that write and, say, create a
    /// second Deployment. Polls the cache (1 ms, doubling to 50 ms).
    ///
    /// # Errors
    /// When `T` is not cached by this controller, `written` has no name or
    /// version, or the cache has not caught up in time.
    pub async fn wait_until_cached<T: KubeObject>(
        &self,
        written: &T,
        timeout: Duration,
    ) -> Result<(), NotCachedError> {
        let lister = self
            .lister::<T>()
            .ok_or(NotCachedError::NotWatched(std::any::type_name::<T>()))?;
        let name = written.name().ok_or(NotCachedError::Missing("name"))?;
        let rv = written
            .resource_version()
            .ok_or(NotCachedError::Missing("resourceVersion"))?;
        let namespace = written.namespace().unwrap_or_default();
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let cached = lister.get(namespace, name);
            if cached.is_some_and(|c| c.resource_version().is_some_and(|v| caught_up(v, rv))) {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(NotCachedError::Timeout {
                    key: if namespace.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{namespace}/{name}")
                    },
                    resource_version: rv.to_owned(),
                    waited,
                });
            }
            tokio::time::sleep(pause.min(timeout - waited)).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

/// The logic of a controller: brings the world in line with one object.
///
/// Implemented for every async closure
/// `Fn(Arc<K>, Context<K>) -> impl Future<Output = Result<Action, E>>`.
/// The object is the cache's shared `Arc` (never mutate it through
/// interior mutability). A reconcile should be idempotent: it runs after
/// every change, after resyncs and restarts, and may see a cache a little
/// behind its own last write.
///
/// A type of its own carries the controller's state:
///
/// ```no_run
/// # async fn demo(client: kcontrol_client::Client) -> Result<(), kcontrol_controller::ControllerError> {
/// use std::sync::Arc;
/// use kcontrol_controller::{Action, Context, Controller, Reconciler};
/// use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
///
/// struct Annotate {
///     key: String,
/// }
///
/// impl Reconciler<ConfigMap> for Annotate {
///     type Error = kcontrol_client::Error;
///
///     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: Context<ConfigMap>) -> Result<Action, Self::Error> {
///         if cm.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(&self.key)) {
///             return Ok(Action::Done);
///         }
///         // ... write through ctx.client()
///         Ok(Action::RequeueAfter(std::time::Duration::from_secs(60)))
///     }
/// }
///
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// let reconciler = Annotate { key: "example.com/seen".into() };
/// Controller::new(client).for_resource::<ConfigMap>().run(reconciler, shutdown).await
/// # }
/// ```
pub trait Reconciler<K>: Send + Sync + 'static {
    /// What a failed reconcile returns (logged, then handed to the error
    /// policy).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Reconciles `object`.
    fn reconcile(
        &self,
        object: Arc<K>,
        ctx: Context<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

impl<K, F, Fut, E> Reconciler<K> for F
where
    F: Fn(Arc<K>, Context<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send,
    E: std::error::Error + Send + Sync + 'static,
{
    type Error = E;

    fn reconcile(
        &self,
        object: Arc<K>,
        ctx: Context<K>,
    ) -> impl Future<Output = Result<Action, E>> + Send {
        self(object, ctx)
    }
}

#[cfg(test)]
mod cache_wait_tests {
    use super::caught_up;

    #[test]
    fn versions_compare_as_numbers_else_by_equality() {
        assert!(caught_up("10", "9"));
        assert!(caught_up("10", "10"));
        assert!(!caught_up("9", "10"));
        assert!(caught_up("abc", "abc"));
        assert!(!caught_up("abd", "abc"));
    }
}
