//! [`Manager`]: several controllers run as one process, as
//! controller-runtime's manager runs them — one client, one informer
//! factory (each resource listed and watched once whatever the number of
//! controllers), one `/healthz` `/readyz` `/metrics` server, optional
//! leader election, and one graceful shutdown for all (CT17).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use kcontrol_client::Client;
use kcontrol_indexer::KubeResource;
use kcontrol_informer::{InformerFactory, InformerScope, WatchConfig};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::builder::{Controller, ControllerError};
use crate::health::Health;
use crate::leader_election::{LeaderElectionConfig, LeaderElectionError, LeaderElector};
use crate::metrics::SharedRegistry;
use crate::reconciler::Reconciler;
use crate::sharding::{run_sharded, ShardGate, Sharder, ShardingConfig, ShardingError};
use crate::webhook::{WebhookError, WebhookMetrics, WebhookServer};

/// Why a [`Manager`] stopped other than by its shutdown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// A controller failed (the others were shut down).
    #[error("controller {name}: {source}")]
    Controller {
        /// The controller's name.
        name: String,
        /// What failed.
        #[source]
        source: ControllerError,
    },
    /// Leader election failed or, after leading, leadership was lost: the
    /// controllers were stopped (a process should exit and start over, as
    /// client-go's controllers do).
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionError),
    /// A controller's task panicked or was aborted.
    #[error("a controller task ended abnormally: {0}")]
    Panicked(String),
    /// The webhook server could not start.
    #[error("serving webhooks: {0}")]
    Webhook(#[from] WebhookError),
    /// Sharding could not start, or the ring membership was lost (the
    /// controllers were stopped first).
    #[error(transparent)]
    Sharding(#[from] ShardingError),
    /// The health server could not bind its address.
    #[error("serving health on {addr}: {source}")]
    Health {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

type Run =
    Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), ControllerError>> + Send>;

/// Several controllers over one client, one informer factory, one health
/// server and (optionally) one leader election.
///
/// ```no_run
/// # async fn demo(client: kcontrol_client::Client) -> Result<(), kcontrol_controller::ManagerError> {
/// use std::sync::Arc;
/// use kcontrol_controller::{Action, Context, Manager};
/// use kcontrol_indexer::k8s_openapi::api::core::v1::{ConfigMap, Secret};
///
/// let mut manager = Manager::new(client);
/// let configmaps = manager.controller::<ConfigMap>().owns::<Secret>();
/// manager.add(configmaps, |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| async move {
///     Ok::<_, std::io::Error>(Action::Done)
/// });
/// manager.serve_health("127.0.0.1:8080".parse().unwrap()).await?;
/// manager.run(kcontrol_controller::signals::shutdown_on_signal().unwrap()).await
/// # }
/// ```
pub struct Manager {
    client: Client,
    factory: Arc<InformerFactory>,
    health: Health,
    registry: SharedRegistry,
    workers: Option<usize>,
    leader_election: Option<LeaderElectionConfig>,
    sharding: Option<Sharding>,
    controllers: Vec<(String, Run)>,
    synced: Vec<Arc<AtomicBool>>,
    health_stop: CancellationToken,
    health_address: parking_lot::Mutex<Option<SocketAddr>>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field(
                "controllers",
                &self.controllers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("leader_election", &self.leader_election)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager on `client`, with an informer factory of its own
    /// (managedFields stripped) and metrics on: one [`SharedRegistry`],
    /// served at `/metrics` by [`serve_health`](Self::serve_health), holds
    /// the client's (`rest_client_*`), the informers' (`reflector_*`,
    /// `informer_*`), each controller's queue (`workqueue_*`) and
    /// reconciles (`controller_reconcile_*`), and with leader election
    /// `leader_election_master_status`.
    pub fn new(client: Client) -> Self {
        Self::with_scope(client, None)
    }

    /// [`new`](Self::new), its informers watching only `namespace` when
    /// one is given.
    pub fn with_scope(client: Client, namespace: Option<String>) -> Self {
        let registry = SharedRegistry::new();
        registry.register_client(&client);
        let scope = InformerScope {
            namespace,
            ..InformerScope::default()
        };
        let watch_config = WatchConfig::default().strip_managed_fields(true);
        let factory = own_factory(&client, &registry, scope, watch_config);
        let health = Health::with_registry(registry);
        Self::with_factory(client, Arc::new(factory), health)
    }

    /// A manager over your factory (its scope, metrics) and health (its
    /// registry, where the controllers' metrics go too; none: they are
    /// kept but not served).
    pub fn with_factory(client: Client, factory: Arc<InformerFactory>, health: Health) -> Self {
        let registry = health.registry().cloned().unwrap_or_default();
        Self {
            client,
            factory,
            health,
            registry,
            workers: None,
            leader_election: None,
            sharding: None,
            controllers: Vec::new(),
            synced: Vec::new(),
            health_stop: CancellationToken::new(),
            health_address: parking_lot::Mutex::new(None),
        }
    }

    /// The shared informer factory.
    pub fn factory(&self) -> &Arc<InformerFactory> {
        &self.factory
    }

    /// The shared health state (`/readyz` turns 200 once every controller's
    /// caches have synced, 503 again once the manager shuts down).
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The registry every controller's metrics go to; register metrics of
    /// your own in it to have them served at `/metrics` too.
    pub fn registry(&self) -> &SharedRegistry {
        &self.registry
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// How many workers each controller from [`controller`](Self::controller)
    /// starts with (default 2; a controller's own
    /// [`workers`](Controller::workers) wins).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// Runs the controllers only while holding this Lease (informers start
    /// when leadership is won).
    #[must_use]
    pub fn leader_election(mut self, config: LeaderElectionConfig) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// How every informer of the manager lists and watches (default:
    /// client-go's, managedFields dropped): page size, WatchList, watch
    /// timeout, backoff, pacing. The manager's factory is built again with
    /// it, in the same scope, reporting to the manager's registry (a
    /// factory given to [`with_factory`](Self::with_factory) is replaced).
    /// Call it before [`controller`](Self::controller).
    #[must_use]
    pub fn watch_config(mut self, watch_config: WatchConfig) -> Self {
        let scope = self.factory.scope();
        let factory = own_factory(&self.client, &self.registry, scope, watch_config);
        self.factory = Arc::new(factory);
        self
    }

    /// Shards the controllers' objects across the replicas of a ring
    /// (see [`sharding`](crate::sharding)): this replica holds a member
    /// Lease, the replica elected on the ring's sharder Lease assigns
    /// objects, and every informer of the manager selects this member's
    /// objects only (`shard.kcontrol.dev/<ring>=<member>`: kinds from
    /// [`Controller::watches`] must carry the label too). Call it before
    /// [`controller`](Self::controller); without leader election (the
    /// sharder has its own).
    #[must_use]
    pub fn sharded(mut self, config: ShardingConfig) -> Self {
        let mut scope = self.factory.scope();
        scope.label_selector = Some(config.selector());
        let watch_config = self.factory.watch_config();
        let factory = own_factory(&self.client, &self.registry, scope.clone(), watch_config);
        self.factory = Arc::new(factory);
        let sharder = Sharder::new(self.client.clone(), config.clone()).namespace(scope.namespace);
        self.sharding = Some(Sharding {
            gate: ShardGate::new(&config),
            config,
            sharder,
            added_before: self.controllers.len(),
        });
        self
    }

    /// A controller of `K` on the manager's client and factory, to
    /// configure and [`add`](Self::add).
    pub fn controller<K: KubeResource + DeserializeOwned>(&self) -> Controller<K> {
        let mut controller = Controller::new(self.client.clone())
            .with_factory(Arc::clone(&self.factory))
            .for_resource::<K>()
            .registry(self.registry.clone());
        if let Some(sharding) = &self.sharding {
            // a reconcile in flight when the member Lease is lost must end
            // before the Lease can expire for the sharder (SH3)
            let margin = sharding
                .config
                .lease_duration
                .saturating_sub(sharding.config.renew_deadline);
            controller = controller
                .shard_gate(sharding.gate.clone())
                .drain_timeout(margin);
        }
        match self.workers {
            Some(n) => controller.workers(n),
            None => controller,
        }
    }

    /// Adds a controller with its reconciler; it runs with the others.
    pub fn add<K, R>(&mut self, mut controller: Controller<K>, reconciler: R) -> &mut Self
    where
        K: KubeResource + DeserializeOwned,
        R: Reconciler<K>,
    {
        if let Some(sharding) = self.sharding.take() {
            let mut sharder = sharding.sharder.shard::<K>();
            for owned in controller.take_shard_owned() {
                sharder = owned(sharder);
            }
            self.sharding = Some(Sharding {
                sharder,
                ..sharding
            });
        }
        let name = controller.name_value().to_owned();
        let synced = Arc::new(AtomicBool::new(false));
        let controller = controller.report_synced(Arc::clone(&synced));
        let flag = Arc::clone(&synced);
        self.health
            .add_check(format!("controller-{name}"), move || {
                flag.load(Ordering::SeqCst)
            });
        self.synced.push(synced);
        let run: Run = Box::new(move |shutdown| Box::pin(controller.run(reconciler, shutdown)));
        self.controllers.push((name, run));
        self
    }

    /// Serves `/healthz`, `/readyz` and `/metrics` on `addr` (port 0: any)
    /// from now until the manager's [`run`](Self::run) ends; the bound
    /// address.
    ///
    /// # Errors
    /// When `addr` cannot be bound.
    pub async fn serve_health(&self, addr: SocketAddr) -> Result<SocketAddr, ManagerError> {
        let bound = self
            .health
            .serve(addr, self.health_stop.clone())
            .await
            .map_err(|source| ManagerError::Health { addr, source })?;
        *self.health_address.lock() = Some(bound);
        Ok(bound)
    }

    /// Where [`serve_health`](Self::serve_health) serves (its last call),
    /// port chosen.
    pub fn health_address(&self) -> Option<SocketAddr> {
        *self.health_address.lock()
    }

    /// Serves `server`'s webhooks on `addr` (port 0: any) from now until
    /// the manager's [`run`](Self::run) ends, on every replica (leader or
    /// not: the API server calls whichever it reaches); the bound address.
    /// Their metrics go into the health registry when there is one and the
    /// server was given none; `/readyz` gets a `webhook-server` check.
    ///
    /// # Errors
    /// When the server cannot start ([`WebhookServer::serve`]).
    pub async fn serve_webhooks(
        &self,
        server: WebhookServer,
        addr: SocketAddr,
    ) -> Result<SocketAddr, ManagerError> {
        let server = match self.health.registry() {
            Some(registry) if !server.has_metrics() => {
                let metrics = WebhookMetrics::new(&mut registry.lock());
                server.metrics(metrics)
            }
            _ => server,
        };
        let bound = server.serve(addr, self.health_stop.clone()).await?;
        let stop = self.health_stop.clone();
        self.health
            .add_check("webhook-server", move || !stop.is_cancelled());
        Ok(bound)
    }

    /// Runs every controller until `shutdown` is cancelled (with leader
    /// election: from winning the Lease until shutdown or a lost Lease),
    /// then shuts down in order: `/readyz` 503, the controllers drained,
    /// the informers stopped, the Lease released, the health server closed.
    ///
    /// # Errors
    /// The first controller failure, or a leader-election failure (a lost
    /// Lease included); the other controllers are shut down first.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let Self {
            client,
            factory,
            health,
            registry,
            leader_election,
            sharding,
            controllers,
            health_stop,
            ..
        } = self;
        // `/readyz` says 503 from the moment shutdown starts
        let marker = tokio::spawn({
            let (health, shutdown) = (health.clone(), shutdown.clone());
            async move {
                shutdown.cancelled().await;
                health.shutting_down();
            }
        });
        let result = match (leader_election, sharding) {
            (None, None) => run_controllers(controllers, shutdown).await,
            (Some(config), None) => {
                run_leading(client, config, &registry, controllers, shutdown).await
            }
            (None, Some(sharding)) => {
                run_sharded_controllers(client, sharding, controllers, shutdown).await
            }
            (Some(_), Some(_)) => Err(ManagerError::Sharding(ShardingError::Config(
                "a sharded manager elects its sharder itself: leave leader election off".into(),
            ))),
        };
        marker.abort();
        health.shutting_down();
        factory.shutdown().await;
        health_stop.cancel();
        result
    }
}

/// Runs the controllers until `shutdown`, or until one fails (then stops
/// the others).
async fn run_controllers(
    controllers: Vec<(String, Run)>,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    let stop = shutdown.child_token();
    let mut running = JoinSet::new();
    for (name, run) in controllers {
        let token = stop.clone();
        running.spawn(async move { (name, run(token).await) });
    }
    let mut first_error = None;
    while let Some(joined) = running.join_next().await {
        let failure = match joined {
            Ok((_, Ok(()))) => continue,
            Ok((name, Err(source))) => ManagerError::Controller { name, source },
            Err(e) => ManagerError::Panicked(e.to_string()),
        };
        tracing::error!(error = %failure, "a controller failed: stopping the others");
        stop.cancel();
        first_error.get_or_insert(failure);
    }
    first_error.map_or(Ok(()), Err)
}

/// A sharded manager's settings.
struct Sharding {
    config: ShardingConfig,
    gate: ShardGate,
    sharder: Sharder,
    /// Controllers added before [`Manager::sharded`] (not sharded: an error).
    added_before: usize,
}

/// Runs the controllers as one replica of the ring ([`run_sharded`]).
async fn run_sharded_controllers(
    client: Client,
    sharding: Sharding,
    controllers: Vec<(String, Run)>,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    if sharding.added_before > 0 {
        return Err(ManagerError::Sharding(ShardingError::Config(
            "controllers were added before Manager::sharded: call it first".into(),
        )));
    }
    let Sharding {
        config,
        gate,
        sharder,
        ..
    } = sharding;
    let ran = run_sharded(client, config, sharder, gate, shutdown, |stop| {
        run_controllers(controllers, stop)
    })
    .await?;
    ran.unwrap_or(Ok(()))
}

/// Competes for the Lease; runs the controllers while leading.
async fn run_leading(
    client: Client,
    config: LeaderElectionConfig,
    registry: &SharedRegistry,
    controllers: Vec<(String, Run)>,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    let elector = LeaderElector::new(client, config)?.with_registry(&mut registry.lock());
    let elector = Arc::new(elector);
    let mut leading = elector.subscribe();
    let elector_stop = CancellationToken::new();
    let election = tokio::spawn({
        let (elector, stop) = (Arc::clone(&elector), elector_stop.clone());
        async move { elector.run(stop).await }
    });
    // standby until leading, shutdown, or the election ends
    let won = tokio::select! {
        () = shutdown.cancelled() => false,
        changed = leading.wait_for(|l| *l) => changed.is_ok(),
    };
    let controllers_stop = shutdown.child_token();
    let mut result = Ok(());
    if won {
        tracing::info!(identity = %elector.identity(), "leading: starting the controllers");
        let lost = controllers_stop.clone();
        let mut watch_lost = elector.subscribe();
        let lost_watch = tokio::spawn(async move {
            // leadership lost: the controllers stop writing at once
            if watch_lost.wait_for(|l| !*l).await.is_ok() {
                lost.cancel();
            }
        });
        result = run_controllers(controllers, controllers_stop).await;
        lost_watch.abort();
    }
    // the controllers have stopped writing: now the Lease may go
    elector_stop.cancel();
    let elected = match election.await {
        Ok(r) => r,
        Err(e) => Err(LeaderElectionError::Config(format!(
            "leader election task: {e}"
        ))),
    };
    result.and(elected.map_err(ManagerError::from))
}

/// A factory of the manager's own: `scope`, `watch_config`, reporting to
/// `registry`.
fn own_factory(
    client: &Client,
    registry: &SharedRegistry,
    scope: InformerScope,
    watch_config: WatchConfig,
) -> InformerFactory {
    InformerFactory::builder(client.clone())
        .scope(scope)
        .watch_config(watch_config)
        .metrics(registry.factory_metrics())
        .build()
}
