//! [`Sharder`]: run by the replica elected on the ring's sharder Lease, it
//! watches the ring's member Leases and the sharded kinds' metadata and
//! writes each object's assignment ([`decide`](super::decide)) as its
//! shard label, every write guarded by the object's `resourceVersion`.
//! Its caches keep only the objects that are not [`settled`]: each change
//! of the live members starts a new round that lists every kind again.

use kcontrol_informer::WatchConfig;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcontrol_client::{Api, Client, Patch, PatchParams};
use kcontrol_indexer::compact::{CompactMeta, CompactPartialObjectMetadata as Meta};
use kcontrol_indexer::{
    meta_namespace_key, split_meta_namespace_key, DynamicObject, KubeObject, KubeResource,
    StringMap, ThreadSafeStore,
};
use kcontrol_informer::{
    wait_for_cache_sync, CacheSyncError, InformerFactory, InformerFactoryBuilder, InformerScope,
    ResourceEventHandlerFuncs, SharedIndexInformer,
};
use kcontrol_workqueue::RateLimitingQueue;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::children::{kind_key, Children};
use super::decide::{decide, decide_child, owner_target, settled, Decision};
use super::members::Members;
use super::ring;
use super::{ShardingConfig, ShardingError, RING_LABEL};
use crate::handlers::EnqueueHandler;
use crate::workers::run_workers;

/// The index of owned objects by their controller owner's key.
const OWNER_INDEX: &str = "kcontrol.dev/sharding-owner";

/// What one sharded kind runs while the sharder runs.
type KindRun = Arc<dyn Fn(&Context) -> Result<BoxFuture<'static, ()>, ShardingError> + Send + Sync>;

/// The live members one round of the sharder decides over.
type Live = Arc<BTreeSet<String>>;

/// What one sharded kind sets on the sharder's informer factory for a
/// round over the live members: its metadata trim ([`trimmed`]) and which
/// objects its cache keeps ([`keep_unsettled`], [`keep_unsettled_children`]).
type KindSetup = Arc<
    dyn Fn(InformerFactoryBuilder, &ShardingConfig, &Live) -> InformerFactoryBuilder + Send + Sync,
>;

/// What every kind's run shares.
#[derive(Clone)]
struct Context {
    client: Client,
    config: ShardingConfig,
    factory: Arc<InformerFactory>,
    scope: InformerScope,
    live: Live,
    /// Owner queues and children checks of this run's kinds.
    children: Arc<Children>,
    stop: CancellationToken,
}

/// Assigns the objects of the sharded kinds to the ring's live members,
/// caching only those not where the ring names them
/// ([`settled`](super::decide::settled)). Cloning shares the kinds;
/// [`run`](Self::run) may run again after it returned (a sharder elected
/// again).
#[derive(Clone)]
pub struct Sharder {
    client: Client,
    config: ShardingConfig,
    namespace: Option<String>,
    kinds: Vec<KindRun>,
    setups: Vec<KindSetup>,
}

impl std::fmt::Debug for Sharder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharder")
            .field("ring", &self.config.ring)
            .field("kinds", &self.kinds.len())
            .finish_non_exhaustive()
    }
}

impl Sharder {
    /// A sharder of `config`'s ring with no kinds yet.
    pub fn new(client: Client, config: ShardingConfig) -> Self {
        Self {
            client,
            config,
            namespace: None,
            kinds: Vec::new(),
            setups: Vec::new(),
        }
    }

    /// Shards only the objects in `namespace` (default: all namespaces).
    #[must_use]
    pub fn namespace(mut self, namespace: Option<String>) -> Self {
        self.namespace = namespace;
        self
    }

    /// Whether no kind was added.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Shards the objects of `K` by their keys.
    #[must_use]
    pub fn shard<K>(mut self) -> Self
    where
        K: KubeResource,
    {
        self.kinds
            .push(Arc::new(|ctx: &Context| Ok(run_primary::<K>(ctx))));
        self.setups.push(Arc::new(keep_unsettled::<K>));
        self
    }

    /// Labels every `C` controlled by a `K` with the shard its owner is
    /// going to, ahead of the owner: an owner is assigned once its
    /// children carry its new shard (SH6).
    #[must_use]
    pub fn owns<K, C>(mut self) -> Self
    where
        K: KubeResource,
        C: KubeResource,
    {
        self.kinds
            .push(Arc::new(|ctx: &Context| run_owned::<K, C>(ctx)));
        self.setups.push(Arc::new(keep_unsettled::<K>));
        self.setups.push(Arc::new(keep_unsettled_children::<C>));
        self
    }

    /// Runs until `stop` with a member watch of its own (see
    /// [`run_with`](Self::run_with)).
    ///
    /// # Errors
    /// [`ShardingError::Sharder`] when the informers cannot start.
    pub async fn run(&self, stop: CancellationToken) -> Result<(), ShardingError> {
        let members = self.watch_members()?;
        let result = self.run_with(&members, stop).await;
        members.shutdown().await;
        result
    }

    /// Starts watching the ring's member Leases: replicas that are not the
    /// sharder keep it warm, so that an elected sharder judges expiries
    /// from when its replica first saw each record change (LE2), not from
    /// its election.
    ///
    /// # Errors
    /// [`ShardingError::Sharder`] when the informer cannot start.
    pub fn watch_members(&self) -> Result<MemberWatch, ShardingError> {
        let factory = InformerFactory::builder(self.client.clone())
            .watch_config(WatchConfig::default().strip_managed_fields(true))
            .build();
        let leases = factory.scoped_informer::<Lease>(
            InformerScope::all()
                .namespace(self.config.namespace.clone())
                .label_selector(format!("{RING_LABEL}={}", self.config.ring)),
        );
        let (live, _) = watch::channel(BTreeSet::new());
        let tracker = Arc::new(Tracker {
            members: Mutex::new(Members::default()),
            live,
            changed: Notify::new(),
        });
        let err = |e: String| ShardingError::Sharder(e);
        leases
            .add_event_handler(tracker.handler())
            .map_err(|e| err(e.to_string()))?;
        let stop = CancellationToken::new();
        factory.start(&stop).map_err(|e| err(e.to_string()))?;
        tokio::spawn(Arc::clone(&tracker).expire(stop.clone()));
        Ok(MemberWatch {
            factory,
            leases,
            tracker,
            stop,
            started: Instant::now(),
        })
    }

    /// Runs until `stop` over `members`: waits for the ring's Leases to be
    /// listed (a member not yet seen must not count as dead) and until
    /// `members` has watched for one retry period (replicas started
    /// together join; a sharder taking over from a dead one, its replica
    /// long up, starts at once), then runs one round per live set: the
    /// kinds' informers, caching only the objects not settled over that
    /// set, and their loops. A change of the live members ends the round
    /// and starts the next, which lists every kind again.
    ///
    /// # Errors
    /// [`ShardingError::Sharder`] when the informers cannot start.
    pub async fn run_with(
        &self,
        members: &MemberWatch,
        stop: CancellationToken,
    ) -> Result<(), ShardingError> {
        if wait_for_cache_sync(&stop, None, &[members.leases.as_ref()])
            .await
            .is_err()
        {
            return Ok(());
        }
        // replicas started together join within a retry period: wait until
        // the members have been watched for one before the first
        // assignment, so that they share it instead of the first member
        // taking everything and draining it again
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = tokio::time::sleep_until(members.started + self.config.retry_period) => {}
        }
        members.tracker.refresh();
        let mut live = members.tracker.live.subscribe();
        loop {
            if !members
                .tracker
                .await_imminent_expiry(self.config.retry_period, &stop)
                .await
            {
                return Ok(());
            }
            let members: Live = Arc::new(live.borrow_and_update().clone());
            tracing::info!(ring = %self.config.ring, members = ?members, "sharder running");
            let round_stop = stop.child_token();
            let round = self.round(members, round_stop.clone());
            tokio::pin!(round);
            let changed = tokio::select! {
                result = &mut round => return result,
                changed = live.changed() => changed.is_ok(),
            };
            round_stop.cancel();
            round.await?;
            if !changed || stop.is_cancelled() {
                return Ok(());
            }
        }
    }

    /// One round over the `live` members, until `stop`: builds the
    /// informers of every kind, caching only the objects that are not
    /// settled over `live` ([`settled`]), waits for those caches, then
    /// evaluates each cached object at every change of it, and again after
    /// each failed write with the queue's backoff. It has no periodic
    /// resync: its caches follow the server by watch.
    async fn round(&self, live: Live, stop: CancellationToken) -> Result<(), ShardingError> {
        let mut builder = InformerFactory::builder(self.client.clone())
            .watch_config(WatchConfig::default().strip_managed_fields(true));
        if let Some(ns) = &self.namespace {
            builder = builder.namespace(ns.clone());
        }
        for setup in &self.setups {
            builder = setup(builder, &self.config, &live);
        }
        let factory = Arc::new(builder.build());
        let ctx = Context {
            client: self.client.clone(),
            config: self.config.clone(),
            factory: Arc::clone(&factory),
            scope: factory.scope(),
            live,
            children: Arc::default(),
            stop: stop.clone(),
        };
        // every kind's informers exist before the factory starts them, and
        // the factory starts before any kind waits for its caches
        let runs: Result<Vec<_>, _> = self.kinds.iter().map(|kind| kind(&ctx)).collect();
        let result = runs.and_then(|runs| {
            factory
                .start(&stop)
                .map_err(|e| ShardingError::Sharder(e.to_string()))?;
            Ok(runs.into_iter().map(tokio::spawn).collect::<Vec<_>>())
        });
        let result = match result {
            Ok(runs) => {
                for run in runs {
                    let _ = run.await;
                }
                Ok(())
            }
            Err(e) => {
                stop.cancel();
                Err(e)
            }
        };
        factory.shutdown().await;
        result
    }
}

/// The ring's member Leases, watched ([`Sharder::watch_members`]).
pub struct MemberWatch {
    factory: InformerFactory,
    leases: Arc<kcontrol_informer::SharedIndexInformer<Lease>>,
    tracker: Arc<Tracker>,
    stop: CancellationToken,
    /// When the watch started.
    started: Instant,
}

impl std::fmt::Debug for MemberWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberWatch")
            .field("live", &*self.tracker.live.borrow())
            .finish_non_exhaustive()
    }
}

impl MemberWatch {
    /// Stops watching.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.factory.shutdown().await;
    }
}

/// The member Leases and the live set computed from them.
struct Tracker {
    members: Mutex<Members>,
    live: watch::Sender<BTreeSet<String>>,
    changed: Notify,
}

impl Tracker {
    fn handler(self: &Arc<Self>) -> ResourceEventHandlerFuncs<Lease> {
        let (add, update, delete) = (Arc::clone(self), Arc::clone(self), Arc::clone(self));
        ResourceEventHandlerFuncs::new()
            .add_func(move |lease: &Arc<Lease>, _| add.observe(lease))
            .update_func(move |_, lease: &Arc<Lease>| update.observe(lease))
            .delete_func(move |gone| {
                if let Some(name) = gone.object().name() {
                    delete.members.lock().remove(name);
                }
                delete.refresh();
                delete.changed.notify_one();
            })
    }

    /// Records a Lease event; wakes the expiry timer (the next expiry may
    /// have moved).
    fn observe(&self, lease: &Lease) {
        self.members.lock().observe(lease, Instant::now());
        self.refresh();
        self.changed.notify_one();
    }

    /// Recomputes the live set.
    fn refresh(&self) {
        let live = self.members.lock().live(Instant::now());
        self.live.send_if_modified(|old| {
            if *old == live {
                false
            } else {
                tracing::info!(members = ?live, "ring members changed");
                *old = live;
                true
            }
        });
    }

    /// Waits for a Lease expiry due within `within` (one retry period: a
    /// member that renews does so every retry period, so one whose Lease
    /// runs out that soon has stopped renewing), then recomputes the live
    /// set: a round started before it would list every kind only to end at
    /// the expiry. `false` when `stop` came first.
    async fn await_imminent_expiry(&self, within: Duration, stop: &CancellationToken) -> bool {
        let now = Instant::now();
        let Some(at) = self.members.lock().next_expiry(now) else {
            return true;
        };
        if at > now + within {
            return true;
        }
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep_until(at + Duration::from_millis(1)) => {}
        }
        self.refresh();
        true
    }

    /// Recomputes the live set at each Lease expiry, until `stop`.
    async fn expire(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let next = self.members.lock().next_expiry(Instant::now());
            let wake = next.map_or_else(
                || Instant::now() + Duration::from_secs(3600),
                |at| at + Duration::from_millis(1),
            );
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.changed.notified() => {}
                () = tokio::time::sleep_until(wake) => {}
            }
            self.refresh();
        }
    }
}

/// The API handle that writes the object `key` of `resource`.
fn api_for(
    client: &Client,
    resource: &kcontrol_indexer::ApiResource,
    key: &str,
) -> Option<(Api<DynamicObject>, String)> {
    let (ns, name) = split_meta_namespace_key(key).ok()?;
    let api = match ns {
        Some(ns) if resource.namespaced => Api::namespaced_with(client.clone(), ns, resource),
        _ => Api::all_with(client.clone(), resource),
    };
    Some((api, name.to_owned()))
}

/// Writes `labels` (a JSON object; null removes) on `key`, guarded by `rv`.
async fn write_labels(
    client: &Client,
    resource: &kcontrol_indexer::ApiResource,
    key: &str,
    rv: &str,
    labels: serde_json::Value,
) -> Result<(), kcontrol_client::Error> {
    let Some((api, name)) = api_for(client, resource, key) else {
        return Ok(());
    };
    let patch = serde_json::json!({"metadata": {"resourceVersion": rv, "labels": labels}});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Caches `K`'s metadata [`trimmed`] in the sharder's factory, and only
/// the objects that are not [`settled`] over `live` (unowned, draining,
/// owned by a member that is not live or not the one the ring names).
fn keep_unsettled<K>(
    builder: InformerFactoryBuilder,
    config: &ShardingConfig,
    live: &Live,
) -> InformerFactoryBuilder
where
    K: KubeResource,
{
    let (shard, drain, live) = (config.shard_label(), config.drain_label(), Arc::clone(live));
    let keep = move |o: &Meta<K>| unsettled(o, (&shard, &drain), &live);
    trim::<K>(builder, config).store_filter(keep)
}

/// Whether the sharder caches `o` ([`keep_unsettled`]; `labels`: the shard
/// and drain label names).
fn unsettled<K: KubeResource>(o: &Meta<K>, (shard, drain): (&str, &str), live: &Live) -> bool {
    let Ok(key) = meta_namespace_key(o) else {
        return true;
    };
    let labels = o.labels();
    !settled(
        &key,
        labels.value_of(shard),
        labels.value_of(drain).is_some(),
        live,
    )
}

/// Caches the children `C`'s metadata [`trimmed`], and only those not
/// where a settled owner is: with a controller owner, and a shard label
/// that is not the one the ring names for the owner's key over `live`.
/// (A settled child of a settled owner needs no write; the owner's
/// readiness check, that every child carries where the owner goes, holds
/// for the children left out.)
fn keep_unsettled_children<C>(
    builder: InformerFactoryBuilder,
    config: &ShardingConfig,
    live: &Live,
) -> InformerFactoryBuilder
where
    C: KubeResource,
{
    let (shard, live) = (config.shard_label(), Arc::clone(live));
    let keep = move |c: &Meta<C>| unsettled_child(c, &shard, &live);
    trim::<C>(builder, config).store_filter(keep)
}

/// Whether the sharder caches the child `c` ([`keep_unsettled_children`];
/// `shard`: the shard label's name).
fn unsettled_child<C: KubeResource>(c: &Meta<C>, shard: &str, live: &Live) -> bool {
    let Some(owner_key) = controller_key(c, |_| true) else {
        return false;
    };
    !settled(&owner_key, c.labels().value_of(shard), false, live)
}

/// Caches `K`'s metadata [`trimmed`] in the sharder's factory.
fn trim<K>(builder: InformerFactoryBuilder, config: &ShardingConfig) -> InformerFactoryBuilder
where
    K: KubeResource,
{
    let (shard, drain) = (config.shard_label(), config.drain_label());
    builder.transform(move |o: Meta<K>| trimmed(o, &shard, &drain))
}

/// What the sharder keeps of an object's metadata: its key, its
/// `resourceVersion` (every write is guarded by it), the ring's shard and
/// drain labels and its controller reference (owned objects follow their
/// owner), as a [`CompactMeta`]: what its decisions and its store filter
/// read. The rest of the metadata (other labels, annotations, finalizers,
/// UID, timestamps) and k8s-openapi's `ObjectMeta` (a `BTreeMap` node per
/// label map) would only make the objects on the move larger in its caches
/// (and a round's list pages while they are decoded).
fn trimmed<K>(o: Meta<K>, shard: &str, drain: &str) -> Meta<K> {
    let m = &o.metadata;
    let labels: std::collections::BTreeMap<String, String> = m
        .labels
        .iter()
        .filter(|(k, _)| *k == shard || *k == drain)
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let owners: Vec<_> = m
        .owner_references()
        .iter()
        .filter(|r| r.controller == Some(true))
        .cloned()
        .collect();
    Meta::new(CompactMeta::from(ObjectMeta {
        name: m.name().map(str::to_owned),
        namespace: m.namespace().map(str::to_owned),
        resource_version: m.resource_version().map(str::to_owned),
        labels: (!labels.is_empty()).then_some(labels),
        owner_references: (!owners.is_empty()).then_some(owners),
        ..ObjectMeta::default()
    }))
}

/// Waits until the sharder's caches have synced, so that it decides on
/// whole caches (an owner's children must be listed before it can wait for
/// them); a kind that cannot be listed (no RBAC, no CRD yet) holds the
/// others back at most `bound` (the member Lease's duration). `false` when
/// `stop` came first.
async fn caches_synced(
    factory: &InformerFactory,
    stop: &CancellationToken,
    kind: &str,
    bound: Duration,
) -> bool {
    match factory.wait_for_cache_sync(stop, Some(bound)).await {
        Ok(()) => true,
        Err(CacheSyncError::Timeout { unsynced, .. }) => {
            tracing::warn!(
                kind,
                ?unsynced,
                "sharder: caches not synced in time: deciding on what is cached"
            );
            true
        }
        Err(_) => false,
    }
}

/// The labels the sharder writes on the object `key` of `kind` for
/// `decision` (`labels`: the shard and drain label names), if any; an
/// assignment waits for the object's children (see `children`).
fn primary_labels(
    decision: Option<Decision>,
    children: &Children,
    (kind, key): (&str, &str),
    (shard, drain): (&str, &str),
) -> Option<serde_json::Value> {
    if !matches!(decision, Some(Decision::Assign(_))) {
        children.settled(kind, key);
    }
    match decision? {
        Decision::Keep => None,
        Decision::Assign(to) if !children.may_assign(kind, key, &to) => None,
        Decision::Assign(to) => Some(serde_json::json!({shard: to, drain: null})),
        Decision::Drain => Some(serde_json::json!({drain: "true"})),
        Decision::Undrain => Some(serde_json::json!({drain: null})),
    }
}

/// One kind's loop in the sharder's round: once the caches have synced,
/// it evaluates each queued key (every cached key is queued as the cache
/// fills) and writes the labels `labels_for` gives the key's object,
/// guarded by the object's `resourceVersion`. Shared by the owners' and
/// children's loops.
struct KindLoop {
    client: Client,
    resource: kcontrol_indexer::ApiResource,
    factory: Arc<InformerFactory>,
    stop: CancellationToken,
    /// The longest the caches may keep the loop from starting.
    bound: Duration,
    workers: usize,
}

impl KindLoop {
    fn new(ctx: &Context, resource: kcontrol_indexer::ApiResource) -> Self {
        Self {
            client: ctx.client.clone(),
            resource,
            factory: Arc::clone(&ctx.factory),
            stop: ctx.stop.clone(),
            bound: ctx.config.lease_duration,
            workers: ctx.config.sharder_workers,
        }
    }

    async fn run<T, F>(
        self,
        store: Arc<ThreadSafeStore<T>>,
        queue: RateLimitingQueue<String>,
        labels_for: F,
    ) where
        T: KubeObject,
        F: Fn(&str, Option<&T>) -> Option<serde_json::Value> + Send + Sync + 'static,
    {
        let Self {
            client,
            resource,
            factory,
            stop,
            bound,
            workers,
        } = self;
        let kind = kind_key(&resource);
        if !caches_synced(&factory, &stop, &kind, bound).await {
            return;
        }
        tracing::info!(kind = %kind, objects = store.len(), "sharder: caches synced");
        let sync = move |key: String| {
            let object = store.get_by_key(&key);
            let labels = labels_for(&key, object.as_deref());
            let rv = object
                .as_ref()
                .and_then(|o| o.resource_version())
                .unwrap_or_default()
                .to_owned();
            let (client, resource) = (client.clone(), resource.clone());
            async move {
                match labels {
                    Some(labels) => {
                        tracing::debug!(%key, %labels, "sharder writes");
                        write_labels(&client, &resource, &key, &rv, labels).await
                    }
                    None => Ok(()),
                }
            }
        };
        if let Err(e) = run_workers(queue, workers, stop, sync).await {
            tracing::error!(error = %e, "sharder workers failed");
        }
    }
}

/// The sharder's loop for a sharded kind `K`.
fn run_primary<K>(ctx: &Context) -> BoxFuture<'static, ()>
where
    K: KubeResource,
{
    let informer = ctx
        .factory
        .scoped_compact_metadata_informer::<K>(ctx.scope.clone());
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let registered = informer.add_event_handler(EnqueueHandler::for_object(queue.clone()));
    let (shard_label, drain_label) = (ctx.config.shard_label(), ctx.config.drain_label());
    let kind_loop = KindLoop::new(ctx, K::api_resource());
    let (live, children) = (ctx.live.clone(), Arc::clone(&ctx.children));
    let kind = kind_key(&kind_loop.resource);
    children.owner_queue(kind.clone(), queue.clone());
    let labels_for = move |key: &str, object: Option<&Meta<K>>| {
        let decision = object.map(|o| {
            let labels = o.labels();
            decide(
                key,
                labels.value_of(&shard_label),
                labels.value_of(&drain_label).is_some(),
                &live,
            )
        });
        primary_labels(
            decision,
            &children,
            (&kind, key),
            (&shard_label, &drain_label),
        )
    };
    Box::pin(async move {
        if let Err(e) = registered {
            tracing::error!(error = %e, "sharder: no handler on the informer");
            return;
        }
        kind_loop.run(informer.store(), queue, labels_for).await;
    })
}

/// Indexes the children by their owner's key (`OWNER_INDEX`), once: a
/// second kind owned by the same `K` shares the index.
fn add_owner_index<C>(
    children: &SharedIndexInformer<Meta<C>>,
    owner_key: impl Fn(&Meta<C>) -> Option<String> + Send + Sync + 'static,
) -> Result<(), ShardingError>
where
    C: KubeResource,
{
    let mut indexers = kcontrol_indexer::Indexers::new();
    indexers.insert(
        OWNER_INDEX.to_owned(),
        Arc::new(move |c: &Meta<C>| owner_key(c).into_iter().collect()),
    );
    if !children
        .store()
        .indexer_names()
        .iter()
        .any(|n| n == OWNER_INDEX)
    {
        children
            .add_indexers(indexers)
            .map_err(|e| ShardingError::Sharder(e.to_string()))?;
    }
    Ok(())
}

/// Queues an owner's children when the owner appears, its shard label
/// changes or it leaves the cache (settled: its children go where the ring
/// names; or deleted), so that they follow it.
fn follow_owners<K, C>(
    owners: &SharedIndexInformer<Meta<K>>,
    queue: &RateLimitingQueue<String>,
    child_store: &Arc<ThreadSafeStore<Meta<C>>>,
    shard_label: &str,
) -> Result<(), kcontrol_informer::InformerError>
where
    K: KubeResource,
    C: KubeResource,
{
    let follow = {
        let (queue, store, label) = (
            queue.clone(),
            Arc::clone(child_store),
            shard_label.to_owned(),
        );
        move |old: Option<&Meta<K>>, new: &Meta<K>| {
            let before = old.and_then(|o| o.labels().value_of(&label).map(str::to_owned));
            if before.as_deref() == new.labels().value_of(&label) && old.is_some() {
                return;
            }
            let Ok(key) = meta_namespace_key(new) else {
                return;
            };
            for child in store.index_keys(OWNER_INDEX, &key).unwrap_or_default() {
                queue.add(child);
            }
        }
    };
    let (follow_update, follow_delete) = (follow.clone(), follow.clone());
    owners
        .add_event_handler(
            ResourceEventHandlerFuncs::new()
                .add_func(move |o: &Arc<Meta<K>>, _| follow(None, o))
                .update_func(move |old, new| follow_update(Some(old.as_ref()), new))
                .delete_func(move |gone| follow_delete(None, gone.object())),
        )
        .map(|_| ())
}

/// The key of a child's controller owner of kind `owner_kind`.
fn owner_key_of<C>(owner_kind: &str, child: &Meta<C>) -> Option<String>
where
    C: KubeResource,
{
    controller_key(child, |r| r.kind == owner_kind)
}

/// The key of a child's controller owner, if `wanted` accepts the
/// reference (the owner is in the child's namespace).
fn controller_key<C>(child: &Meta<C>, wanted: impl Fn(&OwnerReference) -> bool) -> Option<String>
where
    C: KubeResource,
{
    let owner = child.controller_ref().filter(|r| wanted(r))?;
    Some(match child.namespace() {
        Some(ns) => format!("{ns}/{}", owner.name),
        None => owner.name.clone(),
    })
}

/// Links the children of `K`s in `children` to the owners' loop (see
/// `children`): whether every child of an owner carries a shard, and the
/// owner queued again whenever one of its children appears, changes shard
/// or goes.
fn link_children<K, C>(
    ctx: &Context,
    children: &SharedIndexInformer<Meta<C>>,
) -> Result<(), kcontrol_informer::InformerError>
where
    K: KubeResource,
    C: KubeResource,
{
    let owner = K::api_resource();
    let (kind, owner_kind) = (kind_key(&owner), owner.kind.into_owned());
    let (store, label) = (children.store(), ctx.config.shard_label());
    ctx.children.check(
        kind.clone(),
        Arc::new(move |key: &str, to: &str| {
            let children = store.by_index(OWNER_INDEX, key).unwrap_or_default();
            children
                .iter()
                .all(|c| c.labels().value_of(&label) == Some(to))
        }),
    );
    let (links, label) = (Arc::clone(&ctx.children), ctx.config.shard_label());
    let changed = move |old: Option<&Meta<C>>, new: &Meta<C>| {
        let shard = |c: &Meta<C>| c.labels().value_of(&label).map(str::to_owned);
        if old.is_some_and(|o| shard(o) == shard(new)) {
            return;
        }
        if let Some(key) = owner_key_of(&owner_kind, new) {
            links.owner_changed(&kind, key);
        }
    };
    let (on_update, on_delete) = (changed.clone(), changed.clone());
    children
        .add_event_handler(
            ResourceEventHandlerFuncs::new()
                .add_func(move |c: &Arc<Meta<C>>, _| changed(None, c))
                .update_func(move |old, new| on_update(Some(old.as_ref()), new))
                .delete_func(move |gone| on_delete(None, gone.object())),
        )
        .map(|_| ())
}

/// The sharder's loop for `C`s owned by `K`s: each follows where its owner
/// is going ([`owner_target`]), ahead of the owner.
fn run_owned<K, C>(ctx: &Context) -> Result<BoxFuture<'static, ()>, ShardingError>
where
    K: KubeResource,
    C: KubeResource,
{
    let owners = ctx
        .factory
        .scoped_compact_metadata_informer::<K>(ctx.scope.clone());
    let children = ctx
        .factory
        .scoped_compact_metadata_informer::<C>(ctx.scope.clone());
    let owner_kind = K::api_resource().kind.into_owned();
    let owner_key = move |child: &Meta<C>| owner_key_of(&owner_kind, child);
    add_owner_index(&children, owner_key.clone())?;
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let err = |e: kcontrol_informer::InformerError| ShardingError::Sharder(e.to_string());
    children
        .add_event_handler(EnqueueHandler::for_object(queue.clone()))
        .map_err(err)?;
    let (shard_label, drain_label) = (ctx.config.shard_label(), ctx.config.drain_label());
    let (child_store, owner_store) = (children.store(), owners.store());
    follow_owners(&owners, &queue, &child_store, &shard_label).map_err(err)?;
    link_children::<K, C>(ctx, &children).map_err(err)?;
    let live = Arc::clone(&ctx.live);
    let labels_for = move |_: &str, child: Option<&Meta<C>>| {
        let child = child?;
        let owner_key = owner_key(child)?;
        // an owner out of the cache is settled (or gone): where the ring
        // names, undrained
        let to = match owner_store.get_by_key(&owner_key) {
            Some(owner) => {
                let labels = owner.labels();
                owner_target(
                    &owner_key,
                    labels.value_of(&shard_label),
                    labels.value_of(&drain_label).is_some(),
                    &live,
                )
            }
            None => ring::assign(&owner_key, live.iter().map(String::as_str)).map(str::to_owned),
        };
        let target = decide_child(child.labels().value_of(&shard_label), to.as_deref())?;
        Some(serde_json::json!({shard_label.clone(): target}))
    };
    let kind_loop = KindLoop::new(ctx, C::api_resource());
    Ok(Box::pin(kind_loop.run(child_store, queue, labels_for)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;

    fn owner(name: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Foo".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller,
            ..OwnerReference::default()
        }
    }

    #[test]
    fn the_sharder_keeps_only_the_key_version_ring_labels_and_controller() {
        let labels = [
            ("app", "web"),
            ("shard.kcontrol.dev/r", "a"),
            ("drain.kcontrol.dev/r", "true"),
            ("shard.kcontrol.dev/other", "b"),
        ];
        let o = Meta::<ConfigMap>::new(CompactMeta::from(ObjectMeta {
            name: Some("x".into()),
            namespace: Some("ns".into()),
            resource_version: Some("7".into()),
            uid: Some("u".into()),
            generation: Some(3),
            annotations: Some([("a".to_owned(), "b".repeat(1000))].into()),
            finalizers: Some(vec!["f".into()]),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            owner_references: Some(vec![owner("p", None), owner("q", Some(true))]),
            ..ObjectMeta::default()
        }));
        let t = trimmed(o, "shard.kcontrol.dev/r", "drain.kcontrol.dev/r")
            .metadata
            .to_object_meta();
        let kept: Vec<_> = t.labels.clone().unwrap().into_iter().collect();
        assert_eq!(
            kept,
            [
                ("drain.kcontrol.dev/r".to_owned(), "true".to_owned()),
                ("shard.kcontrol.dev/r".to_owned(), "a".to_owned())
            ]
        );
        assert_eq!(t.owner_references, Some(vec![owner("q", Some(true))]));
        assert_eq!(
            ObjectMeta {
                labels: None,
                owner_references: None,
                ..t
            },
            ObjectMeta {
                name: Some("x".into()),
                namespace: Some("ns".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            }
        );
    }

    /// A ConfigMap `ns/<name>` with ring `r`'s labels and a controller.
    fn labelled(
        name: &str,
        shard: Option<&str>,
        drain: bool,
        owner: Option<&str>,
    ) -> Meta<ConfigMap> {
        let mut labels = std::collections::BTreeMap::new();
        if let Some(shard) = shard {
            labels.insert(SHARD.to_owned(), shard.to_owned());
        }
        if drain {
            labels.insert(DRAIN.to_owned(), "true".to_owned());
        }
        Meta::new(CompactMeta::from(ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(labels),
            owner_references: owner.map(|o| vec![super::tests::owner(o, Some(true))]),
            ..ObjectMeta::default()
        }))
    }

    const SHARD: &str = "shard.kcontrol.dev/r";
    const DRAIN: &str = "drain.kcontrol.dev/r";

    #[test]
    fn the_sharder_caches_only_what_is_not_settled() {
        let live: Live = Arc::new(["a".to_owned(), "b".to_owned()].into());
        let to = ring::assign("ns/x", ["a", "b"]).unwrap();
        let other = if to == "a" { "b" } else { "a" };
        let cached =
            |shard, drain| unsettled(&labelled("x", shard, drain, None), (SHARD, DRAIN), &live);
        assert!(!cached(Some(to), false), "owned where the ring names it");
        assert!(cached(Some(to), true), "draining");
        assert!(
            cached(Some(other), false),
            "owned by a live member the ring does not name"
        );
        assert!(cached(Some("dead"), false), "owned by a member not live");
        assert!(cached(None, false), "unowned");
        let nobody: Live = Arc::default();
        assert!(!unsettled(
            &labelled("x", None, false, None),
            (SHARD, DRAIN),
            &nobody
        ));
        // children: by their controller owner's key
        let child =
            |shard, owner| unsettled_child(&labelled("c", shard, false, owner), SHARD, &live);
        assert!(!child(Some(to), Some("x")), "where its settled owner is");
        assert!(child(Some(other), Some("x")));
        assert!(child(None, Some("x")));
        assert!(!child(None, None), "no controller: not the sharder's");
    }

    /// A round waits for a member Lease that runs out within a retry period
    /// (the member stopped renewing), so that a sharder taking over from a
    /// dead replica lists once, not once before the expiry and again after;
    /// a Lease further out does not hold it.
    #[tokio::test(start_paused = true)]
    async fn a_round_waits_for_an_imminent_expiry_but_not_for_a_distant_one() {
        let (live, _) = watch::channel(BTreeSet::new());
        let tracker = Tracker {
            members: Mutex::new(Members::default()),
            live,
            changed: Notify::new(),
        };
        let t0 = Instant::now();
        let lease = super::super::members::tests::lease;
        tracker
            .members
            .lock()
            .observe(&lease("a", Some("a"), 5, 1), t0);
        tracker
            .members
            .lock()
            .observe(&lease("b", Some("b"), 5, 1), t0);
        tracker.refresh();
        let stop = CancellationToken::new();
        let retry = Duration::from_secs(1);
        assert!(tracker.await_imminent_expiry(retry, &stop).await);
        assert_eq!(Instant::now(), t0, "5 s away: no wait");
        tokio::time::sleep(Duration::from_millis(4500)).await;
        // b renewed; a did not
        tracker
            .members
            .lock()
            .observe(&lease("b", Some("b"), 5, 2), Instant::now());
        assert!(tracker.await_imminent_expiry(retry, &stop).await);
        assert!(Instant::now() > t0 + Duration::from_secs(5));
        assert_eq!(*tracker.live.borrow(), BTreeSet::from(["b".to_owned()]));
        stop.cancel();
        assert!(
            tracker.await_imminent_expiry(retry, &stop).await,
            "b is 4.5 s away"
        );
    }

    #[test]
    fn an_object_without_ring_labels_or_owner_keeps_none() {
        let o = Meta::<ConfigMap>::new(CompactMeta::from(ObjectMeta {
            name: Some("x".into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            owner_references: Some(vec![owner("p", Some(false))]),
            ..ObjectMeta::default()
        }));
        let t = trimmed(o, "shard.kcontrol.dev/r", "drain.kcontrol.dev/r")
            .metadata
            .to_object_meta();
        assert_eq!((t.labels, t.owner_references), (None, None));
    }
}
