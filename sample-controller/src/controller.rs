//! The controller, shaped as kubernetes/sample-controller's `controller.go`
//! and built from kcontrol-controller's parts: Foo and Deployment
//! informers from one factory, their listers, a rate-limited work queue
//! fed by [`EnqueueHandler`]s, and workers ([`run_workers_with`]: get →
//! sync → forget or `add_rate_limited` → done) running the
//! [`SyncHandler`]; with graceful shutdown.
//!
//! ```text
//! Foo informer ──EnqueueHandler::for_object──────────────▶ RateLimitingQueue<"ns/name">
//! Deployment informer ──EnqueueHandler::for_cached_owner──▶   (the owning Foo's key)
//!   ──▶ N workers ──▶ SyncHandler (listers + API + events)
//! ```
//!
//! Shutdown order: `/readyz` 503, informers stopped, the queue drained
//! (syncs in flight finish, 30 s at most), the last events flushed, the
//! Lease released.

use kcontrol_informer::WatchConfig;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::events::Recorder;
use kcontrol_client::Client;
use kcontrol_controller::handlers::EnqueueHandler;
use kcontrol_controller::predicate::{Change, Predicate};
use kcontrol_controller::workers::{run_workers_with, ShutdownReport, WorkerError, WorkerOptions};
use kcontrol_controller::{
    Health, LeaderElectionConfig, LeaderElector, ShardGate, Sharder, ShardingConfig, ShardingError,
};
use kcontrol_indexer::Lister;
use kcontrol_informer::{
    BackoffConfig, HandlerRegistration, HasSynced, InformerFactory, SharedIndexInformer,
};
use kcontrol_workqueue::metrics::prometheus::PrometheusMetricsProvider;
use kcontrol_workqueue::{default_controller_rate_limiter, QueueConfig, RateLimitingQueue};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::backend::ClusterBackend;
use crate::deployment::LeanDeployment;
use crate::foo::Foo;
use crate::metrics::{ControllerCollector, SharedRegistry};
use crate::reconcile_log::ReconcileLog;
use crate::stats::ControllerStats;
use crate::sync::SyncHandler;
use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_indexer::{KubeObject, TypedResource};

/// The name the controller reports events and metrics as.
pub const CONTROLLER_NAME: &str = "sample-controller";

/// How long shutdown waits for workers to finish what they hold.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long shutdown waits for the last events to be written.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Options of a [`Controller`].
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// Workers draining the queue (at least 1; default 2).
    pub workers: usize,
    /// Informer resync period; `None` turns resyncs off (default 30 s).
    pub resync_period: Option<Duration>,
    /// Watch one namespace only; `None` watches all (default).
    pub namespace: Option<String>,
    /// A registry to put the queue's, the informers' and the controller's
    /// metrics in.
    pub registry: Option<SharedRegistry>,
    /// How the informers back off after list and watch failures (default:
    /// client-go's 800 ms doubling to 30 s, with jitter).
    pub reflector_backoff: BackoffConfig,
    /// Readiness: the informers and handlers are added as checks, and
    /// shutdown marks it as shutting down (`/readyz`).
    pub health: Option<Health>,
    /// Run the workers only while holding this Lease (`None`: always).
    pub leader_election: Option<LeaderElectionConfig>,
    /// Reconcile only this replica's share of the Foos (`None`: all).
    pub sharding: Option<ShardingConfig>,
    /// Append a line per reconcile to this file (`--reconcile-log`).
    pub reconcile_log: Option<PathBuf>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            resync_period: Some(Duration::from_secs(30)),
            namespace: None,
            registry: None,
            reflector_backoff: BackoffConfig::default(),
            health: None,
            leader_election: None,
            sharding: None,
            reconcile_log: None,
        }
    }
}

/// Why the controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The event recorder could not start (no tokio runtime).
    #[error(transparent)]
    Recorder(#[from] kcontrol_client::events::RecorderError),
    /// An informer refused a handler (it had stopped).
    #[error(transparent)]
    Informer(#[from] kcontrol_informer::InformerError),
    /// The leader election configuration is invalid.
    #[error(transparent)]
    LeaderElection(#[from] kcontrol_controller::LeaderElectionError),
    /// The workers could not start.
    #[error(transparent)]
    Workers(#[from] WorkerError),
    /// Sharding could not start (a bad configuration, or together with
    /// leader election).
    #[error(transparent)]
    Sharding(#[from] ShardingError),
    /// The reconcile log could not be opened.
    #[error("opening the reconcile log: {0}")]
    ReconcileLog(#[source] std::io::Error),
    /// `run` was called again: a controller runs once (its informers and
    /// queue are stopped after the first run).
    #[error("the controller has run already; build a new one to run again")]
    AlreadyRun,
}

/// The Foo controller. Build it with [`Controller::new`], run it with
/// [`Controller::run`]; read its caches and counters while it runs.
pub struct Controller {
    factory: InformerFactory,
    foos_informer: Arc<SharedIndexInformer<Foo>>,
    deployments_informer: Arc<SharedIndexInformer<LeanDeployment>>,
    registrations: Vec<HandlerRegistration>,
    queue: RateLimitingQueue<String>,
    handler: Arc<SyncHandler<ClusterBackend>>,
    workers: WorkerOptions,
    synced: watch::Sender<bool>,
    health: Option<Health>,
    elector: Option<Arc<LeaderElector>>,
    lost_leadership: AtomicBool,
    ran: AtomicBool,
    client: Client,
    sharding: Option<Sharded>,
    lost_membership: AtomicBool,
    log: Option<Arc<ReconcileLog>>,
}

/// A sharded controller's parts.
struct Sharded {
    config: ShardingConfig,
    gate: ShardGate,
    sharder: Sharder,
}

/// The queue of Foo keys, with its metrics in `registry`.
fn foos_queue(registry: Option<&SharedRegistry>) -> RateLimitingQueue<String> {
    let mut config = QueueConfig::new().name("foos");
    if let Some(registry) = registry {
        let provider = PrometheusMetricsProvider::new(&mut registry.lock());
        config = config.metrics_provider(Arc::new(provider));
    }
    RateLimitingQueue::with_config(default_controller_rate_limiter(), config)
}

/// The informer factory: managedFields dropped before objects are cached
/// (never read here, most of an object's size), in the namespace and (when
/// sharded) the member's share the options name; sharding refuses leader
/// election.
fn informer_factory(
    client: &Client,
    options: &ControllerOptions,
) -> Result<InformerFactory, ControllerError> {
    let registry = options.registry.as_ref();
    let mut factory = InformerFactory::builder(client.clone())
        .watch_config(
            WatchConfig::default()
                .strip_managed_fields(true)
                .backoff(options.reflector_backoff),
        )
        .default_resync(options.resync_period.unwrap_or(Duration::ZERO));
    if let Some(namespace) = &options.namespace {
        factory = factory.namespace(namespace.clone());
    }
    if let Some(sharding) = &options.sharding {
        if options.leader_election.is_some() {
            return Err(ShardingError::Config(
                "sharding elects its sharder itself: leave leader election off".into(),
            )
            .into());
        }
        sharding.validate()?;
        // this replica's share only: Foos and Deployments of its member
        factory = factory.label_selector(sharding.selector());
    }
    if let Some(registry) = registry {
        factory = factory.registry(&mut registry.lock());
    }
    Ok(factory.build())
}

impl Sharded {
    /// The gate and the sharder of Foos (and the Deployments they own) for
    /// the member `config` names.
    fn new(client: &Client, config: ShardingConfig, namespace: Option<String>) -> Self {
        let gate = ShardGate::new(&config);
        let sharder = Sharder::new(client.clone(), config.clone())
            .namespace(namespace)
            .shard::<Foo>()
            .owns::<Foo, Deployment>();
        Self {
            config,
            gate,
            sharder,
        }
    }
}

/// The reconcile log at `path`, if asked for, naming this replica (its
/// shard member, else its process id).
fn reconcile_log(
    path: Option<&std::path::Path>,
    sharding: Option<&Sharded>,
) -> Result<Option<Arc<ReconcileLog>>, ControllerError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let replica = sharding.map_or_else(
        || format!("pid-{}", std::process::id()),
        |s| s.config.member.clone(),
    );
    Ok(Some(Arc::new(
        ReconcileLog::open(path, replica).map_err(ControllerError::ReconcileLog)?,
    )))
}

/// The handlers that feed the queue: a Foo's adds and updates enqueue its
/// key (resyncs included: the repair path; its deletion nothing, the
/// garbage collector removes the Deployment); a Deployment's events enqueue
/// the Foo controlling it, when that Foo is in the cache (handleObject).
fn enqueue_handlers(
    queue: &RateLimitingQueue<String>,
    foos_informer: &Arc<SharedIndexInformer<Foo>>,
    deployments_informer: &Arc<SharedIndexInformer<LeanDeployment>>,
) -> Result<Vec<HandlerRegistration>, ControllerError> {
    let not_deleted = Predicate::new(|change| !matches!(change, Change::Deleted(_)));
    Ok(vec![
        foos_informer.add_event_handler(
            EnqueueHandler::for_object(queue.clone()).with_predicate(not_deleted),
        )?,
        deployments_informer.add_event_handler(EnqueueHandler::for_cached_owner::<Foo>(
            queue.clone(),
            foos_informer.lister(),
        ))?,
    ])
}

/// Readiness: both informers synced and both handlers caught up.
fn add_readiness(
    health: &Health,
    foos_informer: &Arc<SharedIndexInformer<Foo>>,
    deployments_informer: &Arc<SharedIndexInformer<LeanDeployment>>,
    registrations: &[HandlerRegistration],
) {
    health.add_synced("informer-foos", Arc::clone(foos_informer) as _);
    health.add_synced(
        "informer-deployments",
        Arc::clone(deployments_informer) as _,
    );
    for (name, registration) in ["handler-foos", "handler-deployments"]
        .into_iter()
        .zip(registrations)
    {
        health.add_synced(name, Arc::new(registration.clone()));
    }
}

/// The leader elector `config` describes, with its metrics in `registry`.
fn leader_elector(
    client: &Client,
    config: LeaderElectionConfig,
    registry: Option<&SharedRegistry>,
) -> Result<Arc<LeaderElector>, ControllerError> {
    let mut elector = LeaderElector::new(client.clone(), config)?;
    if let Some(registry) = registry {
        elector = elector.with_registry(&mut registry.lock());
    }
    Ok(Arc::new(elector))
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("workers", &self.workers.worker_count())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// Sets up informers, handlers, the queue and the event recorder
    /// (sample-controller's `NewController`). Must be called inside a
    /// tokio runtime.
    pub fn new(client: Client, options: ControllerOptions) -> Result<Self, ControllerError> {
        let registry = options.registry.as_ref();
        if let Some(registry) = registry {
            // rest_client_* for every request of this client and its clones
            registry.register_client(&client);
        }
        let recorder = Recorder::new(client.clone(), CONTROLLER_NAME)?;
        let queue = foos_queue(registry);
        let factory = informer_factory(&client, &options)?;
        let foos_informer = factory.informer::<Foo>();
        let deployments_informer = factory.informer::<LeanDeployment>();
        let registrations = enqueue_handlers(&queue, &foos_informer, &deployments_informer)?;
        let sharding = options
            .sharding
            .map(|config| Sharded::new(&client, config, options.namespace.clone()));
        if let Some(sharded) = &sharding {
            // drains of this member's Foos are acknowledged once no sync
            // of the key is in flight
            foos_informer.add_event_handler(
                sharded
                    .gate
                    .drain_handler::<Foo>(client.clone(), Foo::api_resource()),
            )?;
        }
        let log = reconcile_log(options.reconcile_log.as_deref(), sharding.as_ref())?;
        let backend = ClusterBackend::new(
            foos_informer.lister(),
            deployments_informer.lister(),
            client.clone(),
            recorder.clone(),
        );
        let handler = Arc::new(SyncHandler::new(backend));
        let workers = WorkerOptions::new()
            .workers(options.workers)
            .name(CONTROLLER_NAME)
            .drain_timeout(DRAIN_TIMEOUT);
        if let Some(registry) = registry {
            let mut registry = registry.lock();
            registry.register_collector(Box::new(ControllerCollector {
                counters: Arc::clone(handler.counters()),
                recorder,
            }));
            workers.stats().register(CONTROLLER_NAME, &mut registry);
        }
        if let Some(health) = &options.health {
            add_readiness(
                health,
                &foos_informer,
                &deployments_informer,
                &registrations,
            );
        }
        let elector = match options.leader_election {
            None => None,
            Some(config) => Some(leader_elector(&client, config, registry)?),
        };
        Ok(Self {
            factory,
            foos_informer,
            deployments_informer,
            registrations,
            queue,
            handler,
            workers,
            synced: watch::Sender::new(false),
            health: options.health,
            elector,
            lost_leadership: AtomicBool::new(false),
            ran: AtomicBool::new(false),
            client,
            sharding,
            lost_membership: AtomicBool::new(false),
            log,
        })
    }

    /// What the controller did so far.
    pub fn stats(&self) -> ControllerStats {
        self.handler.stats()
    }

    /// The event recorder.
    pub fn recorder(&self) -> &Recorder {
        self.handler.backend().recorder()
    }

    /// The Foo cache.
    pub fn foos(&self) -> Lister<Foo> {
        self.handler.backend().foos().clone()
    }

    /// The Deployment cache (lean Deployments: see [`LeanDeployment`]).
    pub fn deployments(&self) -> Lister<LeanDeployment> {
        self.handler.backend().deployments().clone()
    }

    /// The work queue.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits until the caches have synced and the workers started (returns
    /// at once if that already happened).
    pub async fn wait_until_running(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// Whether the caches have synced and the workers started.
    pub fn is_running(&self) -> bool {
        *self.synced.borrow()
    }

    /// Whether this replica led and lost its Lease (its workers stopped,
    /// and [`Controller::run`] returned).
    pub fn lost_leadership(&self) -> bool {
        self.lost_leadership.load(Ordering::SeqCst)
    }

    /// Whether this replica lost its ring membership (its member Lease was
    /// not renewed in time: it stopped reconciling and [`Controller::run`]
    /// returned).
    pub fn lost_membership(&self) -> bool {
        self.lost_membership.load(Ordering::SeqCst)
    }

    /// The shard gate, when sharded.
    pub fn shard_gate(&self) -> Option<&ShardGate> {
        self.sharding.as_ref().map(|s| &s.gate)
    }

    /// The leader elector, with `--leader-elect`.
    pub fn leader_elector(&self) -> Option<&Arc<LeaderElector>> {
        self.elector.as_ref()
    }

    /// Starts the workers until `stop`: each key goes through the sync
    /// handler in a `sync{key}` span.
    fn start_workers(
        &self,
        stop: &CancellationToken,
    ) -> JoinHandle<Result<ShutdownReport, WorkerError>> {
        let handler = Arc::clone(&self.handler);
        let gate = self.sharding.as_ref().map(|s| s.gate.clone());
        let log = self.log.clone();
        let foos = self.foos();
        let sync = move |key: String| {
            let handler = Arc::clone(&handler);
            // sharded: only while this replica owns the Foo, undrained
            let admitted = gate.as_ref().map(|gate| {
                let foo = foos.store().get_by_key(&key);
                gate.enter(&key, foo.as_ref().map(|f| f.labels()))
            });
            let log = log.clone();
            async move {
                let in_flight = match admitted {
                    Some(None) => return Ok(()),
                    Some(Some(in_flight)) => Some(in_flight),
                    None => None,
                };
                let start = crate::reconcile_log::now_nanos();
                let span = tracing::info_span!("sync", key = %key);
                let outcome = handler.sync(&key).instrument(span).await;
                if let Some(log) = &log {
                    log.record(&key, start, crate::reconcile_log::now_nanos());
                }
                drop(in_flight);
                let outcome = outcome?;
                tracing::trace!(%key, ?outcome, "synced");
                Ok::<(), crate::sync::SyncError>(())
            }
        };
        let workers = tokio::spawn(run_workers_with(
            self.queue.clone(),
            self.workers.clone(),
            stop.clone(),
            sync,
        ));
        self.synced.send_replace(true);
        workers
    }

    /// Runs until `shutdown` is cancelled: starts the informers, waits for
    /// their caches, runs the workers (with leader election: only once
    /// this replica leads, and until it stops leading); then stops the
    /// informers, drains the queue (items in process finish), flushes the
    /// last events, and releases the Lease.
    ///
    /// # Errors
    /// [`ControllerError::AlreadyRun`] at once when called a second time;
    /// [`ControllerError::Workers`] when the workers could not start.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), ControllerError> {
        if self.ran.swap(true, Ordering::SeqCst) {
            return Err(ControllerError::AlreadyRun);
        }
        let Some(sharded) = &self.sharding else {
            return self.run_replica(shutdown).await;
        };
        let ran = kcontrol_controller::sharding::run_sharded(
            self.client.clone(),
            sharded.config.clone(),
            sharded.sharder.clone(),
            sharded.gate.clone(),
            shutdown,
            |stop| self.run_replica(stop),
        )
        .await;
        match ran {
            Ok(Some(result)) => result,
            Ok(None) => Ok(()),
            Err(ShardingError::Membership(e)) => {
                tracing::error!(error = %e, "ring membership lost");
                self.lost_membership.store(true, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`run`](Self::run) of one replica (sharded or not).
    async fn run_replica(&self, shutdown: CancellationToken) -> Result<(), ControllerError> {
        let informers_stop = CancellationToken::new();
        let synced = match self.factory.start(&informers_stop) {
            Ok(()) => self.wait_for_cache_sync(&shutdown).await,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the informers");
                false
            }
        };
        let workers_stop = CancellationToken::new();
        let mut workers = None;
        let elector_stop = CancellationToken::new();
        let mut election = None;
        if synced {
            tracing::info!("caches synced");
            match &self.elector {
                None => {
                    workers = Some(self.start_workers(&workers_stop));
                    shutdown.cancelled().await;
                }
                Some(elector) => {
                    let mut leading = elector.subscribe();
                    election = Some(tokio::spawn({
                        let (elector, stop) = (Arc::clone(elector), elector_stop.clone());
                        async move { elector.run(stop).await }
                    }));
                    let won = tokio::select! {
                        () = shutdown.cancelled() => false,
                        changed = leading.wait_for(|l| *l) => changed.is_ok(),
                    };
                    if won {
                        workers = Some(self.start_workers(&workers_stop));
                        tokio::select! {
                            () = shutdown.cancelled() => {}
                            _ = leading.wait_for(|l| !*l) => {
                                tracing::error!("leader election lost: stopping the workers");
                                self.lost_leadership.store(true, Ordering::SeqCst);
                                // no new key is taken; a sync in flight finishes
                                workers_stop.cancel();
                            }
                        }
                    }
                }
            }
        }
        if let Some(health) = &self.health {
            health.shutting_down();
        }
        tracing::info!("shutting down: stopping informers, draining the queue");
        informers_stop.cancel();
        self.factory.shutdown().await;
        workers_stop.cancel();
        let started = match workers {
            Some(workers) => match workers.await {
                Ok(result) => result.map(|_report| ()),
                Err(e) => {
                    tracing::error!(error = %e, "the worker pool failed");
                    Ok(())
                }
            },
            None => {
                self.queue.shut_down();
                Ok(())
            }
        };
        if tokio::time::timeout(EVENT_FLUSH_TIMEOUT, self.recorder().flush())
            .await
            .is_err()
        {
            tracing::warn!("some events were not written before shutdown");
        }
        // the workers have stopped writing: release the Lease (a standby
        // takes over at its next try)
        elector_stop.cancel();
        if let Some(election) = election {
            let _ = election.await;
        }
        tracing::info!(stats = ?self.stats(), "controller stopped");
        Ok(started?)
    }

    /// Waits for both caches and both handlers' initial lists; false when
    /// shutdown came first (saying so every 10 s while it waits long: an
    /// unreachable server, a missing CRD).
    async fn wait_for_cache_sync(&self, shutdown: &CancellationToken) -> bool {
        let mut synced: Vec<&dyn HasSynced> = vec![
            self.foos_informer.as_ref(),
            self.deployments_informer.as_ref(),
        ];
        synced.extend(self.registrations.iter().map(|r| r as &dyn HasSynced));
        kcontrol_informer::wait_for_cache_sync(shutdown, None, &synced)
            .await
            .is_ok()
    }
}
