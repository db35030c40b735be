//! The [`Controller`] builder (its docs hold the contracts CT9-CT12).

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::events::{Recorder, RecorderError};
use kcontrol_client::Client;
use kcontrol_indexer::{ApiResource, DynamicObject, KubeObject, KubeResource};
use kcontrol_informer::{
    wait_for_cache_sync, FactoryError, HandlerOptions, HasSynced, InformerError, InformerFactory,
    InformerScope, SharedIndexInformer, WatchConfig,
};
use kcontrol_workqueue::{
    default_controller_rate_limiter, QueueConfig, RateLimiter, RateLimitingQueue,
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::expectations::Expectations;
use crate::handlers::EnqueueHandler;
use crate::health::Health;
use crate::metrics::SharedRegistry;
use crate::predicate::Predicate;
use crate::reconciler::{Action, Context, Reconciler, Shared};
use crate::sharding::{ShardGate, Sharder};
use crate::watched::Watched;
use crate::workers::{Pool, WorkerError, WorkerOptions, WorkerStats};

/// Why a [`Controller`] stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// An informer refused a handler (it had stopped).
    #[error(transparent)]
    Informer(#[from] InformerError),
    /// The informer factory could not start its informers.
    #[error(transparent)]
    Factory(#[from] FactoryError),
    /// The workers could not start.
    #[error(transparent)]
    Workers(#[from] WorkerError),
    /// The event recorder could not start.
    #[error(transparent)]
    Recorder(#[from] RecorderError),
    /// The health server could not bind its address.
    #[error("serving health on {addr}: {source}")]
    Health {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Shutdown waited `timeout` for reconciles in flight; `unfinished`
    /// were still running (task workers were aborted).
    #[error("{unfinished} reconciles were still running after the drain timeout of {timeout:?}")]
    DrainTimeout {
        /// The drain timeout.
        timeout: Duration,
        /// Reconciles still running at the deadline.
        unfinished: usize,
    },
}

type ErrorPolicy<K> =
    Arc<dyn Fn(&Arc<K>, &(dyn std::error::Error + 'static), &Context<K>) -> Action + Send + Sync>;

/// What a watch registers while the controller starts.
type Register = Box<dyn FnOnce(&mut Setup<'_>) -> Result<(), InformerError> + Send>;

/// Makes the informer of the reconciled type in a scope: a typed `K`'s
/// ([`TypedInformer`]), or a [`DynamicObject`]'s of a resource known at
/// run time ([`DynamicInformer`]). Its bound is on the method, so that a
/// `Controller<K>` of any `K` can hold one.
trait MakeInformer<K>: Send + Sync {
    fn make(
        &self,
        factory: &InformerFactory,
        resource: &ApiResource,
        scope: InformerScope,
    ) -> Arc<SharedIndexInformer<K>>
    where
        K: KubeObject + DeserializeOwned;
}

/// How a controller makes the informer of the type it reconciles.
type PrimaryInformer<K> = Arc<dyn MakeInformer<K>>;

/// The informer of a typed `K` (the resource is `K`'s own).
struct TypedInformer;

impl<K: KubeResource + DeserializeOwned> MakeInformer<K> for TypedInformer {
    fn make(
        &self,
        factory: &InformerFactory,
        _resource: &ApiResource,
        scope: InformerScope,
    ) -> Arc<SharedIndexInformer<K>> {
        factory.scoped_informer::<K>(scope)
    }
}

/// The dynamic informer of a resource known at run time.
struct DynamicInformer;

impl MakeInformer<DynamicObject> for DynamicInformer {
    fn make(
        &self,
        factory: &InformerFactory,
        resource: &ApiResource,
        scope: InformerScope,
    ) -> Arc<SharedIndexInformer<DynamicObject>> {
        factory.scoped_dynamic_informer(resource, scope)
    }
}

/// The informers, handlers and listers of one run, as they are set up.
struct Setup<'a> {
    factory: &'a InformerFactory,
    scope: InformerScope,
    queue: RateLimitingQueue<String>,
    /// The controller's name (its handlers are named after it).
    name: &'a str,
    registrations: Vec<Watched>,
    removals: Vec<Box<dyn FnOnce() + Send>>,
    listers: HashMap<TypeId, Box<dyn std::any::Any + Send + Sync>>,
    expectations: Option<Expectations>,
}

impl<'a> Setup<'a> {
    /// Nothing set up yet: informers of `factory` in `scope`, feeding `queue`.
    fn new(
        factory: &'a InformerFactory,
        scope: InformerScope,
        queue: &RateLimitingQueue<String>,
        name: &'a str,
        expectations: Option<Expectations>,
    ) -> Self {
        Self {
            factory,
            scope,
            queue: queue.clone(),
            name,
            registrations: Vec::new(),
            removals: Vec::new(),
            listers: HashMap::new(),
            expectations,
        }
    }

    /// Adds `handler` to the informer of `T` in `scope`.
    fn watch<T: KubeResource + DeserializeOwned>(
        &mut self,
        scope: InformerScope,
        handler: EnqueueHandler<T>,
    ) -> Result<Arc<SharedIndexInformer<T>>, InformerError> {
        let what = Watched::describe(&T::api_resource(), &scope);
        let informer = self.factory.scoped_informer::<T>(scope);
        self.register(what, informer, handler)
    }

    /// Adds `handler` to `informer` (of `what`), keeps its lister and the
    /// way to remove it.
    fn register<T: KubeObject>(
        &mut self,
        what: String,
        informer: Arc<SharedIndexInformer<T>>,
        handler: EnqueueHandler<T>,
    ) -> Result<Arc<SharedIndexInformer<T>>, InformerError> {
        let options = HandlerOptions::new().name(format!("{} {what}", self.name));
        let registration = informer.add_event_handler_with_options(handler, options)?;
        self.listers
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(informer.lister()));
        self.registrations.push(Watched::new(
            what,
            registration.clone(),
            Arc::clone(&informer),
        ));
        let owner = Arc::clone(&informer);
        self.removals.push(Box::new(move || {
            if let Err(e) = owner.remove_event_handler(&registration) {
                tracing::debug!(error = %e, "handler not removed");
            }
        }));
        Ok(informer)
    }

    /// Registers the handlers of `K` and of every watch, then starts the
    /// factory's informers; the informer of `K`.
    fn start<K: KubeObject + DeserializeOwned>(
        &mut self,
        primary: &Primary<K>,
        handler: EnqueueHandler<K>,
        watches: Vec<Register>,
    ) -> Result<Arc<SharedIndexInformer<K>>, ControllerError> {
        let what = Watched::describe(&primary.resource, &primary.scope);
        let informer =
            primary
                .informer
                .make(self.factory, &primary.resource, primary.scope.clone());
        let primary = self.register(what, informer, handler)?;
        for register in watches {
            register(self)?;
        }
        // A shared factory's informers run until its owner shuts it down:
        // those this controller created start under a token it never
        // cancels. Its own factory stops with `shutdown()`.
        self.factory.start(&CancellationToken::new())?;
        Ok(primary)
    }

    /// [`start`](Self::start), then the cache-sync barrier: the primary
    /// informer once every handler has synced; `None` when shutdown came
    /// first. The caller stops the sources either way.
    async fn start_synced<K: KubeObject + DeserializeOwned>(
        &mut self,
        primary: &Primary<K>,
        handler: EnqueueHandler<K>,
        watches: Vec<Register>,
        shutdown: &CancellationToken,
    ) -> Result<Option<Arc<SharedIndexInformer<K>>>, ControllerError> {
        let primary = self.start(primary, handler, watches)?;
        let registrations: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let synced = wait_for_cache_sync(shutdown, None, &registrations)
            .instrument(tracing::info_span!("cache_sync", controller = %self.name))
            .await
            .is_ok();
        drop(registrations);
        Ok(synced.then_some(primary))
    }

    /// Stops what feeds the queue: the factory's informers when the
    /// controller owns it (waiting for their handlers to return), else its
    /// handlers.
    async fn stop_sources(&mut self, own_factory: bool) {
        if own_factory {
            self.factory.shutdown().await;
        } else {
            for remove in self.removals.drain(..) {
                remove();
            }
        }
    }
}

/// The reconciled type's resource, the scope of its informer and how that
/// informer is made.
struct Primary<K> {
    resource: ApiResource,
    scope: InformerScope,
    informer: PrimaryInformer<K>,
}

/// The first step of a [`Controller`]: the client and, optionally, a
/// shared informer factory; [`for_resource`](Self::for_resource) names
/// the type reconciled.
pub struct ControllerBuilder {
    client: Client,
    informers: Informers,
}

/// Where a controller's informers come from.
#[derive(Clone)]
enum Informers {
    /// A factory shared with other controllers (its owner stops it).
    Shared(Arc<InformerFactory>),
    /// A factory of the controller's own, listing and watching so.
    Own(WatchConfig),
}

impl Default for Informers {
    /// A factory of its own: client-go's watch, managedFields dropped.
    fn default() -> Self {
        Self::Own(WatchConfig::default().strip_managed_fields(true))
    }
}

impl fmt::Debug for ControllerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field(
                "shared_factory",
                &matches!(self.informers, Informers::Shared(_)),
            )
            .finish_non_exhaustive()
    }
}

impl ControllerBuilder {
    /// Takes informers from `factory` (shared with other controllers)
    /// instead of a factory of the controller's own. Its scope (namespace,
    /// selectors) is the controller's default scope; its owner stops its
    /// informers (`factory.shutdown()`), the controller only removes its
    /// handlers when it stops.
    #[must_use]
    pub fn with_factory(mut self, factory: Arc<InformerFactory>) -> Self {
        self.informers = Informers::Shared(factory);
        self
    }

    /// Builds the controller's informers in a factory of its own that
    /// lists and watches so (default: client-go's watch, managedFields
    /// dropped). It is the other choice to
    /// [`with_factory`](Self::with_factory), whose factory has its own
    /// watch configuration: of the two calls, the last one wins.
    #[must_use]
    pub fn watch_config(mut self, watch_config: WatchConfig) -> Self {
        self.informers = Informers::Own(watch_config);
        self
    }

    /// The type the controller reconciles: each of its objects' keys is
    /// reconciled after every change to the object (resyncs included).
    pub fn for_resource<K: KubeResource + DeserializeOwned>(self) -> Controller<K> {
        self.reconciling(K::api_resource(), Arc::new(TypedInformer))
    }

    /// Reconciles the objects of a resource known only at run time (a
    /// custom resource found by discovery, say) as [`DynamicObject`]s,
    /// as [`for_resource`](Self::for_resource) does a typed `K`. Its
    /// children are followed with [`Controller::watches`] (mapping each to
    /// its owner's key); `owns` and sharding need the owner's type.
    pub fn for_dynamic(self, resource: ApiResource) -> Controller<DynamicObject> {
        self.reconciling(resource, Arc::new(DynamicInformer))
    }

    fn reconciling<K>(self, resource: ApiResource, informer: PrimaryInformer<K>) -> Controller<K> {
        let name = resource.kind.to_lowercase();
        Controller {
            client: self.client,
            informers: self.informers,
            resource,
            primary_informer: informer,
            namespace: None,
            label_selector: None,
            predicate: None,
            watches: Vec::new(),
            options: WorkerOptions::new().name(name),
            error_policy: None,
            synced: None,
            expectations: None,
            rate_limiter: None,
            registry: None,
            health_addr: None,
            recorder: None,
            gate: None,
            shard_owned: Vec::new(),
        }
    }
}

/// A controller reconciling objects of `K` on client-go's parts (informers,
/// a rate-limited work queue, workers), built as kube-runtime and
/// controller-runtime users expect.
///
/// ```text
/// Controller::new(client)            one shared InformerFactory (or yours)
///     .for_resource::<K>()           informer of K ──EnqueueHandler::for_object──┐
///     .owns::<Child>()               informer of Child ──for_owner::<K>─────────┤
///     .watches::<T>(mapper)          informer of T ──from_map(mapper)───────────┤
///                                                                               ▼
///     .run(reconciler, shutdown)     RateLimitingQueue<"ns/name"> ──N workers──▶ reconcile(Arc<K>, Context)
/// ```
///
/// - CT9: every informer comes from one factory ([`ControllerBuilder::with_factory`]
///   shares yours); [`Controller::namespace`] scopes all of them,
///   [`Controller::label_selector`] the reconciled type's; predicates
///   ([`Controller::with_predicate`], [`Controller::owns_with`]) filter
///   events before they enqueue.
/// - CT10: the reconciler gets the object from the cache. When the key is
///   no longer in the cache (the object was deleted), the reconciler is
///   **not** called and the key is forgotten, as in kube-runtime: clean up
///   through owner references (the garbage collector deletes owned
///   objects) or a finalizer (the reconciler then sees the object with its
///   `deletionTimestamp` set).
/// - CT11: after an error the error policy chooses the [`Action`]
///   (default: [`Action::RequeueRateLimited`]); a panic is contained and
///   re-queued with backoff (CT4). One key is never reconciled by two
///   workers at once (the work queue's WQ3).
/// - CT12: [`Controller::run`] runs until `shutdown` is cancelled, then stops
///   the event sources (its own factory's informers; with a shared factory,
///   its handlers), drains the workers (CT7) and returns `Ok` — or
///   [`ControllerError::DrainTimeout`] when reconciles were still running
///   at the drain deadline.
///
/// ```no_run
/// # async fn demo(client: kcontrol_client::Client) -> Result<(), kcontrol_controller::ControllerError> {
/// use std::sync::Arc;
/// use kcontrol_controller::{Action, Context, Controller};
/// use kcontrol_indexer::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// use tokio_util::sync::CancellationToken;
///
/// let shutdown = CancellationToken::new();
/// Controller::new(client)
///     .for_resource::<Deployment>()
///     .owns::<ReplicaSet>()
///     .workers(4)
///     .run(
///         |d: Arc<Deployment>, ctx: Context<Deployment>| async move {
///             println!("reconciling {}", ctx.key());
///             Ok::<_, std::io::Error>(Action::Done)
///         },
///         shutdown,
///     )
///     .await
/// # }
/// ```
pub struct Controller<K = ()> {
    client: Client,
    informers: Informers,
    /// The reconciled resource.
    resource: ApiResource,
    primary_informer: PrimaryInformer<K>,
    namespace: Option<String>,
    label_selector: Option<String>,
    predicate: Option<Predicate<K>>,
    watches: Vec<Register>,
    options: WorkerOptions,
    error_policy: Option<ErrorPolicy<K>>,
    /// Set once the caches have synced (a [`Manager`](crate::Manager)'s
    /// readiness).
    synced: Option<Arc<AtomicBool>>,
    expectations: Option<Expectations>,
    rate_limiter: Option<Box<dyn RateLimiter<String>>>,
    registry: Option<SharedRegistry>,
    health_addr: Option<SocketAddr>,
    recorder: Option<Recorder>,
    /// Sharded: reconciles pass this gate (set by a sharded `Manager`).
    gate: Option<ShardGate>,
    /// Sharded: the owned kinds the sharder labels after their owner.
    shard_owned: Vec<ShardOwned>,
}

/// Adds an owned kind to a sharder.
pub(crate) type ShardOwned = Box<dyn FnOnce(Sharder) -> Sharder + Send>;

impl<K> fmt::Debug for Controller<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("namespace", &self.namespace)
            .field("label_selector", &self.label_selector)
            .field("watches", &self.watches.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// Starts building a controller on `client`.
    #[allow(clippy::new_ret_no_self)] // the builder's first step
    pub fn new(client: Client) -> ControllerBuilder {
        ControllerBuilder {
            client,
            informers: Informers::default(),
        }
    }
}

impl<K: KubeObject + DeserializeOwned> Controller<K> {
    /// Watches only this namespace (every informer of the controller;
    /// default: the factory's scope, all namespaces for its own).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Reconciles only objects of `K` matching this label selector (the
    /// server filters; owned and watched types are not filtered).
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only events on `K` that `predicate` accepts enqueue its key
    /// (combine several with [`Predicate::and`] / [`Predicate::or`]).
    #[must_use]
    pub fn with_predicate(mut self, predicate: Predicate<K>) -> Self {
        self.predicate = Some(predicate);
        self
    }

    /// Keeps `expectations` for this controller (CT18): every owned type's
    /// adds and deletions lower them for the owner's key
    /// ([`EnqueueHandler::observe_expectations`]), the reconciler reads and
    /// raises them through [`Context::expectations`], and a key whose
    /// object is gone has its expectations deleted.
    #[must_use]
    pub fn with_expectations(mut self, expectations: Expectations) -> Self {
        self.expectations = Some(expectations);
        self
    }

    /// Reconciles the keys (`namespace/name` of `K` objects, or `name` for
    /// cluster-scoped ones) that `mapper` gives for each changed `T`
    /// (resyncs skipped; an update maps both states).
    #[must_use]
    pub fn watches<T: KubeResource + DeserializeOwned>(
        self,
        mapper: impl Fn(&T) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.add_watch::<T>(move |queue| EnqueueHandler::from_map(queue, mapper))
    }

    fn add_watch<T: KubeResource + DeserializeOwned>(
        mut self,
        handler: impl FnOnce(RateLimitingQueue<String>) -> EnqueueHandler<T> + Send + 'static,
    ) -> Self {
        self.watches.push(Box::new(move |setup: &mut Setup<'_>| {
            let scope = setup.scope.clone();
            let handler = handler(setup.queue.clone());
            setup.watch::<T>(scope, handler).map(|_| ())
        }));
        self
    }

    /// How many workers reconcile (default 2).
    #[must_use]
    pub fn workers(mut self, n: usize) -> Self {
        self.options = self.options.workers(n);
        self
    }

    /// Workers on OS threads instead of tokio tasks (CT6).
    #[must_use]
    pub fn threads(mut self, on: bool) -> Self {
        self.options = self.options.threads(on);
        self
    }

    /// How long shutdown waits for reconciles in flight (default 30 s).
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.options = self.options.drain_timeout(timeout);
        self
    }

    /// The work queue's rate limiter: how long a key waits before it is
    /// reconciled again after [`Action::RequeueRateLimited`] (and after an
    /// error, by default). Default: client-go's controller limiter, the
    /// longest of a per-key exponential backoff (5 ms doubling to 1000 s)
    /// and an overall token bucket (10 qps, burst 100).
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<String> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Puts the controller's metrics in `registry` (shared with other
    /// controllers and your own metrics) instead of a registry of its own.
    /// Either way every family is there: `workqueue_*` (the queue, named
    /// as the controller), `controller_reconcile_*`, `reflector_*` and
    /// `informer_*` (when the controller builds its own factory),
    /// `rest_client_*` (when the client reports to no other registry).
    #[must_use]
    pub fn registry(mut self, registry: SharedRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Serves `/healthz`, `/readyz` (ready once the caches synced) and
    /// `/metrics` (the controller's registry) on `addr` while the
    /// controller runs. A [`Manager`](crate::Manager) serves these for all
    /// its controllers instead.
    #[must_use]
    pub fn serve_health(mut self, addr: SocketAddr) -> Self {
        self.health_addr = Some(addr);
        self
    }

    /// The recorder [`Context::recorder`] hands the reconciler (default:
    /// one of its own, reporting as the controller's name).
    #[must_use]
    pub fn recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Reports on `flag` when the caches have synced.
    pub(crate) fn report_synced(mut self, flag: Arc<AtomicBool>) -> Self {
        self.synced = Some(flag);
        self
    }

    /// The controller's name, as given or by default.
    pub(crate) fn name_value(&self) -> &str {
        self.options.name_value()
    }

    /// The name in logs, spans and metric labels (default: `K`'s kind in
    /// lower case).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.options = self.options.name(name);
        self
    }

    /// What to do after a failed reconcile, given the object, the error
    /// and the context (`ctx.num_requeues()` failures before this one).
    /// Default: [`Action::RequeueRateLimited`].
    #[must_use]
    pub fn error_policy(
        mut self,
        policy: impl Fn(&Arc<K>, &(dyn std::error::Error + 'static), &Context<K>) -> Action
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.error_policy = Some(Arc::new(policy));
        self
    }

    /// Sharded (a [`Manager`](crate::Manager)'s): reconciles pass `gate`,
    /// which acknowledges drains on the primary informer.
    pub(crate) fn shard_gate(mut self, gate: ShardGate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The owned kinds' sharder registrations (taken out).
    pub(crate) fn take_shard_owned(&mut self) -> Vec<ShardOwned> {
        std::mem::take(&mut self.shard_owned)
    }

    /// The reconcile counters (successes, errors, panics, running), live
    /// while the controller runs; [`WorkerStats::register`] exports them.
    pub fn stats(&self) -> WorkerStats {
        self.options.stats()
    }

    /// Runs the controller until `shutdown` is cancelled (see the
    /// [type's docs](Controller)): starts the informers, waits until their caches
    /// and the handlers have synced, reconciles with the workers, then
    /// shuts down gracefully.
    ///
    /// # Errors
    /// [`ControllerError::Informer`], [`ControllerError::Factory`] and
    /// [`ControllerError::Workers`] when it cannot start;
    /// [`ControllerError::DrainTimeout`] when reconciles outlived the drain
    /// timeout at shutdown.
    pub async fn run<R: Reconciler<K>>(
        self,
        reconciler: R,
        shutdown: CancellationToken,
    ) -> Result<(), ControllerError> {
        let parts = self.assemble()?;
        let health_stop = CancellationToken::new();
        let result = parts.run(reconciler, shutdown, &health_stop).await;
        health_stop.cancel();
        result
    }

    /// Everything a run needs, built from the builder's settings: the
    /// registry every family goes to, the factory, the named queue, the
    /// scopes, the recorder.
    fn assemble(self) -> Result<Parts<K>, ControllerError> {
        let name = self.options.name_value().to_owned();
        let registry = self.registry.unwrap_or_default();
        // false when the client already reports to a registry (a Manager's)
        registry.register_client(&self.client);
        let own_factory = matches!(self.informers, Informers::Own(_));
        let factory = match self.informers {
            Informers::Shared(factory) => factory,
            Informers::Own(watch_config) => Arc::new(
                InformerFactory::builder(self.client.clone())
                    .watch_config(watch_config)
                    .metrics(registry.factory_metrics())
                    .build(),
            ),
        };
        let limiter = self
            .rate_limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter()));
        let config = QueueConfig::new()
            .name(name.clone())
            .metrics_provider(registry.queue_metrics());
        let queue = RateLimitingQueue::with_config(limiter, config);
        self.options.stats().register(&name, &mut registry.lock());
        let recorder = match self.recorder {
            Some(recorder) => recorder,
            None => Recorder::new(self.client.clone(), name.clone())?,
        };
        let mut scope = factory.scope();
        if self.namespace.is_some() {
            scope.namespace = self.namespace;
        }
        let mut primary_scope = scope.clone();
        if self.label_selector.is_some() {
            primary_scope.label_selector = self.label_selector;
        }
        let mut handler = EnqueueHandler::<K>::for_object(queue.clone());
        if let Some(predicate) = self.predicate {
            handler = handler.with_predicate(predicate);
        }
        Ok(Parts {
            name,
            client: self.client,
            factory,
            own_factory,
            queue,
            registry,
            recorder,
            scope,
            primary: Primary {
                resource: self.resource,
                scope: primary_scope,
                informer: self.primary_informer,
            },
            handler,
            watches: self.watches,
            options: self.options,
            error_policy: self.error_policy,
            synced: self.synced,
            expectations: self.expectations,
            health_addr: self.health_addr,
            gate: self.gate,
        })
    }
}

/// What needs the reconciled type at compile time: its owned kinds
/// (matched by the owner's kind, followed by the sharder).
impl<K: KubeResource + DeserializeOwned> Controller<K> {
    /// Reconciles the controller owner of every `C` whose controller owner
    /// reference names a `K` (its kind and group), on each change of the
    /// `C` (resyncs skipped) and its deletion (CT3).
    #[must_use]
    pub fn owns<C: KubeResource + DeserializeOwned>(self) -> Self {
        self.add_owned::<C>(None)
    }

    /// [`owns`](Self::owns), with only the events `predicate` accepts.
    #[must_use]
    pub fn owns_with<C: KubeResource + DeserializeOwned>(self, predicate: Predicate<C>) -> Self {
        self.add_owned::<C>(Some(predicate))
    }

    fn add_owned<C: KubeResource + DeserializeOwned>(
        mut self,
        predicate: Option<Predicate<C>>,
    ) -> Self {
        self.shard_owned
            .push(Box::new(|sharder: Sharder| sharder.owns::<K, C>()));
        self.watches.push(Box::new(move |setup: &mut Setup<'_>| {
            let mut handler = EnqueueHandler::for_owner::<K>(setup.queue.clone());
            if let Some(predicate) = predicate {
                handler = handler.with_predicate(predicate);
            }
            if let Some(expectations) = &setup.expectations {
                handler = handler.observe_expectations(expectations.clone());
            }
            let scope = setup.scope.clone();
            setup.watch::<C>(scope, handler).map(|_| ())
        }));
        self
    }
}

/// A controller's run, assembled ([`Controller::run`]).
struct Parts<K> {
    name: String,
    client: Client,
    factory: Arc<InformerFactory>,
    own_factory: bool,
    queue: RateLimitingQueue<String>,
    registry: SharedRegistry,
    recorder: Recorder,
    scope: InformerScope,
    primary: Primary<K>,
    handler: EnqueueHandler<K>,
    watches: Vec<Register>,
    options: WorkerOptions,
    error_policy: Option<ErrorPolicy<K>>,
    synced: Option<Arc<AtomicBool>>,
    expectations: Option<Expectations>,
    health_addr: Option<SocketAddr>,
    gate: Option<ShardGate>,
}

impl<K: KubeObject + DeserializeOwned> Parts<K> {
    async fn run<R: Reconciler<K>>(
        self,
        reconciler: R,
        shutdown: CancellationToken,
        health_stop: &CancellationToken,
    ) -> Result<(), ControllerError> {
        let Self {
            name,
            client,
            factory,
            own_factory,
            queue,
            registry,
            recorder,
            scope,
            primary,
            handler,
            watches,
            options,
            error_policy,
            synced,
            expectations,
            health_addr,
            gate,
        } = self;
        let synced = synced.unwrap_or_default();
        if let Some(addr) = health_addr {
            let health = Health::with_registry(registry);
            serve_health(health, addr, &name, &synced, &shutdown, health_stop).await?;
        }
        let mut setup = Setup::new(&factory, scope, &queue, &name, expectations.clone());
        let watches = with_drain_watch(gate.as_ref(), &client, &primary, watches);
        let workers_stop = CancellationToken::new();
        let running: Result<Option<Pool>, ControllerError> = async {
            let Some(primary) = setup
                .start_synced(&primary, handler, watches, &shutdown)
                .await?
            else {
                return Ok(None);
            };
            tracing::info!(controller = %name, "caches synced");
            synced.store(true, Ordering::SeqCst);
            let shared = Arc::new(Shared {
                client,
                name: name.clone(),
                listers: std::mem::take(&mut setup.listers),
                expectations,
                recorder: recorder.clone(),
            });
            let step = reconcile_step(
                primary.store(),
                Arc::new(reconciler),
                shared,
                error_policy,
                queue.clone(),
                gate,
            );
            let pool = Pool::start(&queue, &options, workers_stop.clone(), step)?;
            shutdown.cancelled().await;
            tracing::info!(controller = %name, "shutting down: stopping the event sources");
            Ok::<_, ControllerError>(Some(pool))
        }
        .await;
        // the one way out: what feeds the queue stops first, whether the
        // run failed to start, shutdown came before the caches synced, or
        // the workers ran
        setup.stop_sources(own_factory).await;
        let pool = match running {
            Ok(Some(pool)) => pool,
            other => {
                queue.shut_down();
                return other.map(drop);
            }
        };
        workers_stop.cancel();
        drain(pool, &recorder, &options, &name).await
    }
}

/// `watches`, after the sharding drain watch of `K` when a shard gate is
/// set.
fn with_drain_watch<K: KubeObject + DeserializeOwned>(
    gate: Option<&ShardGate>,
    client: &Client,
    primary: &Primary<K>,
    watches: Vec<Register>,
) -> Vec<Register> {
    match gate {
        None => watches,
        Some(gate) => {
            let mut all = vec![drain_watch(gate, client, primary)];
            all.extend(watches);
            all
        }
    }
}

/// Waits for the stopped workers (within the drain timeout) and writes the
/// events the last reconciles recorded before run returns.
async fn drain(
    pool: Pool,
    recorder: &Recorder,
    options: &WorkerOptions,
    name: &str,
) -> Result<(), ControllerError> {
    let report = pool.wait().await;
    let drain = options.drain_timeout_value();
    if tokio::time::timeout(drain, recorder.flush()).await.is_err() {
        tracing::warn!(controller = %name, "events not all written within the drain timeout");
    }
    if report.drained {
        Ok(())
    } else {
        Err(ControllerError::DrainTimeout {
            timeout: drain,
            unfinished: report.unfinished,
        })
    }
}

/// Serves `health` on `addr` until `stop`: ready once `synced` is set,
/// 503 from the start of `shutdown`.
async fn serve_health(
    health: Health,
    addr: SocketAddr,
    name: &str,
    synced: &Arc<AtomicBool>,
    shutdown: &CancellationToken,
    stop: &CancellationToken,
) -> Result<(), ControllerError> {
    let flag = Arc::clone(synced);
    health.add_check(format!("controller-{name}"), move || {
        flag.load(Ordering::SeqCst)
    });
    health
        .serve(addr, stop.clone())
        .await
        .map_err(|source| ControllerError::Health { addr, source })?;
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        health.shutting_down();
    });
    Ok(())
}

/// Sharded: the gate's drain handler on the informer of `K`.
fn drain_watch<K: KubeObject + DeserializeOwned>(
    gate: &ShardGate,
    client: &Client,
    primary: &Primary<K>,
) -> Register {
    let handler = gate.drain_handler::<K>(client.clone(), primary.resource.clone());
    let (resource, scope) = (primary.resource.clone(), primary.scope.clone());
    let make = Arc::clone(&primary.informer);
    Box::new(move |setup: &mut Setup<'_>| {
        let informer = make.make(setup.factory, &resource, scope);
        let options = HandlerOptions::new().name(format!("{} drains", setup.name));
        let registration = informer.add_event_handler_with_options(handler, options)?;
        let owner = Arc::clone(&informer);
        setup.removals.push(Box::new(move || {
            if let Err(e) = owner.remove_event_handler(&registration) {
                tracing::debug!(error = %e, "handler not removed");
            }
        }));
        Ok(())
    })
}

/// One key's reconcile: the object from the cache (skipped when gone,
/// CT10), the reconciler, the error policy on failure (CT11).
fn reconcile_step<K: KubeObject, R: Reconciler<K>>(
    store: Arc<kcontrol_indexer::ThreadSafeStore<K>>,
    reconciler: Arc<R>,
    shared: Arc<Shared>,
    policy: Option<ErrorPolicy<K>>,
    queue: RateLimitingQueue<String>,
    gate: Option<ShardGate>,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<Action, Action>> + Send + Sync + 'static
{
    move |key: String| {
        let store = Arc::clone(&store);
        let reconciler = Arc::clone(&reconciler);
        let shared = Arc::clone(&shared);
        let policy = policy.clone();
        let requeues = queue.num_requeues(&key);
        let gate = gate.clone();
        Box::pin(async move {
            let Some(object) = store.get_by_key(&key) else {
                tracing::debug!(%key, "not in the cache (deleted): nothing to reconcile");
                if let Some(expectations) = &shared.expectations {
                    expectations.delete(&key);
                }
                return Ok(Action::Done);
            };
            // sharded: only while this replica owns the key, undrained (SH2)
            let _in_flight = match &gate {
                None => None,
                Some(gate) => match gate.enter(&key, Some(object.labels())) {
                    Some(in_flight) => Some(in_flight),
                    None => {
                        tracing::debug!(%key, "not this replica's (moving or moved): skipped");
                        return Ok(Action::Done);
                    }
                },
            };
            let ctx = Context::new(shared, key, requeues);
            match reconciler.reconcile(Arc::clone(&object), ctx.clone()).await {
                Ok(action) => Ok(action),
                Err(e) => {
                    let action = policy
                        .as_ref()
                        .map_or(Action::RequeueRateLimited, |p| p(&object, &e, &ctx));
                    tracing::warn!(key = ctx.key(), error = %e, requeues, ?action, "reconcile failed");
                    Err(action)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcontrol_informer::{CacheSyncError, ResourceEventHandlerFuncs, SyncedFn};

    #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
    struct GizmoSpec {}

    kcontrol_indexer::custom_resource! {
        /// A resource no server serves.
        struct Gizmo {
            group: "nowhere.kcontrol.dev",
            version: "v1",
            plural: "gizmos",
            scope: Namespaced,
            spec: GizmoSpec,
        }
    }

    /// CT23: what has not synced names its kind and scope and the last
    /// list error — a 404 says the resource is not served — instead of a
    /// bare handler name.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ct23_an_unsynced_watch_names_its_kind_scope_and_last_error() {
        let server = kcontrol_testserver::TestServer::start()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let client =
            Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap_or_else(|e| panic!("{e}"));
        let factory = InformerFactory::new(client, Duration::ZERO);
        let scope = InformerScope {
            namespace: Some("team".into()),
            ..InformerScope::all()
        };
        let informer = factory.scoped_informer::<Gizmo>(scope.clone());
        let registration = informer
            .add_event_handler(ResourceEventHandlerFuncs::<Gizmo>::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let watched = Watched::new(
            Watched::describe(&Gizmo::api_resource(), &scope),
            registration,
            Arc::clone(&informer),
        );
        let shutdown = CancellationToken::new();
        factory.start(&shutdown).unwrap_or_else(|e| panic!("{e}"));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while informer.last_error().is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no list error reported"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let unsynced = watched.unsynced();
        assert_eq!(unsynced.len(), 1);
        let line = &unsynced[0];
        assert!(
            line.starts_with("Gizmo (nowhere.kcontrol.dev/v1) in namespace team: list failed"),
            "{line}"
        );
        assert!(
            line.contains("404: the API server does not serve this resource"),
            "{line}"
        );
        // the barrier's error carries the same line
        let err = wait_for_cache_sync(&shutdown, Some(Duration::from_millis(10)), &[&watched])
            .await
            .unwrap_err();
        assert_eq!(err.unsynced(), unsynced.as_slice());
        shutdown.cancel();
        factory.shutdown().await;
        server.shutdown().await;
    }

    #[tokio::test]
    async fn ct9_the_barrier_waits_for_every_source_or_shutdown() {
        let flag = Arc::new(AtomicBool::new(false));
        let later = Arc::clone(&flag);
        let informer = SyncedFn(move || flag.load(Ordering::SeqCst));
        let registration = SyncedFn(|| true);
        tokio::spawn(async move { later.store(true, Ordering::SeqCst) });
        let shutdown = CancellationToken::new();
        let all = [&informer as &dyn HasSynced, &registration];
        assert_eq!(wait_for_cache_sync(&shutdown, None, &all).await, Ok(()));

        let never = SyncedFn(|| false);
        let cancel = shutdown.clone();
        tokio::spawn(async move { cancel.cancel() });
        let err = wait_for_cache_sync(&shutdown, None, &[&registration, &never])
            .await
            .unwrap_err();
        assert!(matches!(err, CacheSyncError::Shutdown { .. }), "{err}");
    }
}
