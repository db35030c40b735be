//! The controller: informers for Foos and Deployments (one factory),
//! handlers that put Foo keys in a rate-limited work queue, and workers
//! that drain it through the sync handler; with graceful shutdown.
//!
//! ```text
//! Foo / Deployment informers ──handlers──▶ RateLimitingQueue<"ns/name">
//!   ──get().await──▶ N workers ──▶ SyncHandler (listers + API + events)
//!   success: forget(key)   error: add_rate_limited(key)   always: done(key)
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::events::Recorder;
use kcontrol_client::Client;
use kcontrol_controller::{Health, LeaderElectionConfig, LeaderElector};
use kcontrol_indexer::Lister;
use kcontrol_informer::{BackoffConfig, HandlerRegistration, HasSynced};
use kcontrol_workqueue::metrics::prometheus::PrometheusMetricsProvider;
use kcontrol_workqueue::{default_controller_rate_limiter, QueueConfig, RateLimitingQueue};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::backend::ClusterBackend;
use crate::foo::Foo;
use crate::handlers::{DeploymentHandler, Enqueue, FooHandler, FooLookup};
use crate::informers::Informers;
use crate::metrics::{ControllerCollector, SharedRegistry};
use crate::stats::ControllerStats;
use crate::sync::SyncHandler;

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
    /// `run` was called again: a controller runs once (its informers and
    /// queue are stopped after the first run).
    #[error("the controller has run already; build a new one to run again")]
    AlreadyRun,
}

/// The Foo controller. Build it with [`Controller::new`], run it with
/// [`Controller::run`]; read its caches and counters while it runs.
pub struct Controller {
    informers: Informers,
    registrations: Vec<HandlerRegistration>,
    queue: RateLimitingQueue<String>,
    handler: Arc<SyncHandler<ClusterBackend>>,
    workers: usize,
    synced: watch::Sender<bool>,
    health: Option<Health>,
    elector: Option<Arc<LeaderElector>>,
    leading: watch::Receiver<Option<CancellationToken>>,
    lost_leadership: AtomicBool,
    ran: AtomicBool,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("workers", &self.workers)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// Sets up informers, handlers, the queue and the event recorder. Must
    /// be called inside a tokio runtime.
    pub fn new(client: Client, options: ControllerOptions) -> Result<Self, ControllerError> {
        if let Some(registry) = &options.registry {
            // rest_client_* for every request of this client and its clones
            kcontrol_controller::metrics::register_client_metrics(&client, &mut registry.lock());
        }
        let recorder = Recorder::new(client.clone(), CONTROLLER_NAME)?;
        let mut config = QueueConfig::new().name("foos");
        if let Some(registry) = &options.registry {
            let provider = PrometheusMetricsProvider::new(&mut registry.lock());
            config = config.metrics_provider(Arc::new(provider));
        }
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        let informers = Informers::new(&client, &options);
        let elector_client = client.clone();
        let backend = ClusterBackend::new(
            informers.foos().lister(),
            informers.deployments().lister(),
            client,
            recorder.clone(),
        );
        let handler = Arc::new(SyncHandler::new(backend));
        if let Some(registry) = &options.registry {
            registry
                .lock()
                .register_collector(Box::new(ControllerCollector {
                    counters: Arc::clone(handler.counters()),
                    recorder,
                }));
        }
        let registrations = register_handlers(&informers, &queue)?;
        if let Some(health) = &options.health {
            health.add_synced("informer-foos", Arc::clone(informers.foos()) as _);
            health.add_synced(
                "informer-deployments",
                Arc::clone(informers.deployments()) as _,
            );
            for (name, registration) in ["handler-foos", "handler-deployments"]
                .into_iter()
                .zip(&registrations)
            {
                health.add_synced(name, Arc::new(registration.clone()));
            }
        }
        let (leading_tx, leading) = watch::channel(None);
        let elector = match options.leader_election.clone() {
            None => None,
            Some(config) => {
                let mut elector =
                    LeaderElector::new(elector_client, config)?.on_started_leading(move |token| {
                        leading_tx.send_replace(Some(token));
                    });
                if let Some(registry) = &options.registry {
                    elector = elector.with_registry(&mut registry.lock());
                }
                Some(Arc::new(elector))
            }
        };
        Ok(Self {
            informers,
            registrations,
            queue,
            handler,
            workers: options.workers.max(1),
            synced: watch::Sender::new(false),
            health: options.health,
            elector,
            leading,
            lost_leadership: AtomicBool::new(false),
            ran: AtomicBool::new(false),
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

    /// The Deployment cache.
    pub fn deployments(&self) -> Lister<Deployment> {
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

    /// The leader elector, with `--leader-elect`.
    pub fn leader_elector(&self) -> Option<&Arc<LeaderElector>> {
        self.elector.as_ref()
    }

    fn start_workers(&self, workers: &mut JoinSet<()>) {
        tracing::info!(workers = self.workers, "starting workers");
        for _ in 0..self.workers {
            let queue = self.queue.clone();
            let handler = Arc::clone(&self.handler);
            workers.spawn(run_worker(queue, handler));
        }
        self.synced.send_replace(true);
    }

    /// Runs until `shutdown` is cancelled: starts the informers, waits for
    /// their caches, runs the workers (with leader election: only once
    /// this replica leads, and until it stops leading); then stops the
    /// informers, drains the queue (`shut_down_with_drain`: items in
    /// process finish), flushes the last events, and releases the Lease.
    ///
    /// # Errors
    /// [`ControllerError::AlreadyRun`] at once when called a second time.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), ControllerError> {
        if self.ran.swap(true, Ordering::SeqCst) {
            return Err(ControllerError::AlreadyRun);
        }
        let informers_stop = CancellationToken::new();
        let synced = match self.informers.start(&informers_stop) {
            Ok(()) => self.wait_for_caches(&shutdown).await,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the informers");
                false
            }
        };
        let mut workers = JoinSet::new();
        let elector_stop = CancellationToken::new();
        let mut election = None;
        if synced {
            tracing::info!("caches synced");
            match &self.elector {
                None => {
                    self.start_workers(&mut workers);
                    shutdown.cancelled().await;
                }
                Some(elector) => {
                    let elector = Arc::clone(elector);
                    let stop = elector_stop.clone();
                    election = Some(tokio::spawn(async move { elector.run(stop).await }));
                    let mut leading = self.leading.clone();
                    let token = tokio::select! {
                        () = shutdown.cancelled() => None,
                        token = leading.wait_for(Option::is_some) => {
                            token.ok().and_then(|t| (*t).clone())
                        }
                    };
                    if let Some(token) = token {
                        self.start_workers(&mut workers);
                        tokio::select! {
                            () = shutdown.cancelled() => {}
                            () = token.cancelled() => {
                                tracing::error!("leader election lost: stopping the workers");
                                self.lost_leadership.store(true, Ordering::SeqCst);
                                // no new key is taken; a sync in flight finishes
                                self.queue.shut_down();
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
        self.informers.shutdown().await;
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, self.queue.shut_down_with_drain_async())
            .await
            .is_ok();
        if !drained {
            tracing::warn!(timeout = ?DRAIN_TIMEOUT, "workers did not finish in time");
            self.queue.shut_down();
        }
        while workers.join_next().await.is_some() {}
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
        Ok(())
    }

    /// Waits for both caches and both handlers' initial lists; false when
    /// shutdown came first. Says so while it waits long (an unreachable
    /// server, a missing CRD).
    async fn wait_for_caches(&self, shutdown: &CancellationToken) -> bool {
        let foos = self.informers.foos();
        let deployments = self.informers.deployments();
        let mut synced: Vec<&dyn HasSynced> = vec![foos.as_ref(), deployments.as_ref()];
        synced.extend(self.registrations.iter().map(|r| r as &dyn HasSynced));
        let mut waited = Duration::ZERO;
        let step = Duration::from_secs(10);
        loop {
            match kcontrol_informer::wait_for_cache_sync(shutdown, Some(step), &synced).await {
                Ok(()) => return true,
                Err(_) if shutdown.is_cancelled() => return false,
                Err(e) => {
                    waited += step;
                    tracing::warn!(waited = ?waited, error = %e, "still waiting for caches to sync: is the API server reachable and the Foo CRD installed?");
                }
            }
        }
    }
}

/// Registers the Foo and Deployment handlers, feeding `queue`.
fn register_handlers(
    informers: &Informers,
    queue: &RateLimitingQueue<String>,
) -> Result<Vec<HandlerRegistration>, ControllerError> {
    let q = queue.clone();
    let enqueue: Enqueue = Arc::new(move |key| q.add(key));
    let foo_lister = informers.foos().lister();
    let lookup: FooLookup = Arc::new(move |ns, name| foo_lister.get(ns, name));
    let foo_registration = informers
        .foos()
        .add_event_handler(FooHandler::new(Arc::clone(&enqueue)))?;
    let deployment_registration = informers
        .deployments()
        .add_event_handler(DeploymentHandler::new(enqueue, lookup))?;
    Ok(vec![foo_registration, deployment_registration])
}

/// Takes keys from the queue until it shuts down.
async fn run_worker(queue: RateLimitingQueue<String>, handler: Arc<SyncHandler<ClusterBackend>>) {
    while let Some(key) = queue.get_async().await {
        process(&queue, &handler, key).await;
    }
}

/// One key: sync; forget on success, re-queue with backoff on error; done.
async fn process(
    queue: &RateLimitingQueue<String>,
    handler: &SyncHandler<ClusterBackend>,
    key: String,
) {
    let span = tracing::info_span!("sync", key = %key);
    match tracing::Instrument::instrument(handler.sync(&key), span).await {
        Ok(outcome) => {
            tracing::trace!(%key, ?outcome, "synced");
            queue.forget(&key);
        }
        Err(e) => {
            tracing::warn!(%key, error = %e, requeues = queue.num_requeues(&key), "sync failed: re-queued with backoff");
            queue.add_rate_limited(key.clone());
        }
    }
    queue.done(&key);
}
