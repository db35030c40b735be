//! [`InformerFactory`]: hands out one shared informer per resource (and
//! namespace and selectors), starts them all, waits for them all, and shuts
//! them down (client-go's `SharedInformerFactory`, IN6).

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::{Api, Client};
use kcontrol_indexer::{
    compact::CompactPartialObjectMetadata, ApiResource, DynamicObject, KubeObject, KubeResource,
    PartialObjectMetadata, TypedResource,
};
use kcontrol_reflector::{ListWatch, ListerWatcher, WatchConfig};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::builder::SharedIndexInformerBuilder;
use crate::informer::SharedIndexInformer;
use crate::metrics::InformerMetrics;
use crate::synced::{CacheSyncError, HasSynced};
use kcontrol_reflector::ReflectorMetrics;

/// What identifies one shared informer of a factory: the Rust type, the
/// resource, the namespace (none: all namespaces) and the selectors.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InformerKey {
    /// `plural.group/version` of the resource (`configmaps.v1`, `deployments.apps/v1`).
    pub resource: String,
    /// The namespace watched, `None` for all namespaces.
    pub namespace: Option<String>,
    /// The label selector, if any.
    pub label_selector: Option<String>,
    /// The field selector, if any.
    pub field_selector: Option<String>,
    /// The Rust type's name (a typed and a dynamic informer of the same
    /// resource are two informers).
    pub type_name: &'static str,
    /// The Rust type of the objects (what is compared; the name is for people).
    type_id: TypeId,
}

impl fmt::Display for InformerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.resource)?;
        if let Some(ns) = &self.namespace {
            write!(f, " in {ns}")?;
        }
        if let Some(l) = &self.label_selector {
            write!(f, " labels {l}")?;
        }
        if let Some(fs) = &self.field_selector {
            write!(f, " fields {fs}")?;
        }
        Ok(())
    }
}

/// Where a factory's informers look: namespace and selectors
/// (client-go's `WithNamespace` and `WithTweakListOptions`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct InformerScope {
    /// The namespace, `None` for all namespaces (cluster-scoped resources
    /// ignore it).
    pub namespace: Option<String>,
    /// A label selector (`app=web,tier!=db`).
    pub label_selector: Option<String>,
    /// A field selector (`metadata.name=x`).
    pub field_selector: Option<String>,
}

impl InformerScope {
    /// All namespaces, no selectors: nothing of the factory's own scope.
    /// To narrow the factory's scope instead, start from
    /// [`InformerFactory::scope`].
    pub fn all() -> Self {
        Self::default()
    }

    /// One namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// A label selector (the same name as the factory builder's).
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// A field selector (the same name as the factory builder's).
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }
}

/// An informer of any kind, as the factory keeps it.
trait ErasedInformer: Send + Sync {
    fn run_boxed(
        self: Arc<Self>,
        shutdown: CancellationToken,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    fn synced(&self) -> bool;
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<K: KubeObject> ErasedInformer for SharedIndexInformer<K> {
    fn run_boxed(
        self: Arc<Self>,
        shutdown: CancellationToken,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            if let Err(e) = self.run(shutdown).await {
                // The factory runs each of its informers once; the user ran
                // this one by hand before.
                tracing::error!(error = %e, "the factory did not start an informer");
            }
        })
    }

    fn synced(&self) -> bool {
        self.has_synced()
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

struct Entry {
    informer: Arc<dyn ErasedInformer>,
    started: bool,
}

/// A per-type option (a transform or a store filter), found by its type's
/// `TypeId` and downcast to its own type.
type PerType = Arc<dyn Any + Send + Sync>;

struct State {
    informers: BTreeMap<InformerKey, Entry>,
    tasks: Vec<JoinHandle<()>>,
    shutting_down: bool,
}

/// Hands each informer a factory builds its metrics: the reflector's and
/// the informer's, by the informer's name (the factory's key, e.g.
/// `deployments.apps/v1 in default`: one label value per informer).
/// With the `prometheus` feature, `InformerFactoryBuilder::registry`
/// sets one that exports to a `prometheus-client` registry.
pub trait FactoryMetrics: Send + Sync {
    /// The metrics of the reflector of informer `name`.
    fn reflector(&self, name: &str) -> Option<Arc<dyn ReflectorMetrics>> {
        let _ = name;
        None
    }

    /// The metrics of informer `name`.
    fn informer(&self, name: &str) -> Option<Arc<dyn InformerMetrics>> {
        let _ = name;
        None
    }

    /// Informer `name` was built; `objects` tells how many objects its
    /// cache holds now (0 once the informer is gone).
    fn informer_cache(&self, name: &str, objects: CacheSize) {
        let _ = (name, objects);
    }
}

/// How many objects one informer's cache holds, read when called.
pub type CacheSize = Box<dyn Fn() -> usize + Send + Sync>;

#[cfg(feature = "prometheus")]
struct PrometheusFactoryMetrics {
    reflectors: kcontrol_reflector::metrics::prometheus::PrometheusReflectorMetrics,
    informers: crate::metrics::prometheus::PrometheusInformerMetrics,
    caches: Arc<Mutex<Vec<(String, CacheSize)>>>,
}

/// `informer_objects{name}`: each informer's cache size, read at scrape time.
#[cfg(feature = "prometheus")]
struct CacheCollector {
    caches: Arc<Mutex<Vec<(String, CacheSize)>>>,
}

#[cfg(feature = "prometheus")]
impl fmt::Debug for CacheCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheCollector").finish_non_exhaustive()
    }
}

#[cfg(feature = "prometheus")]
impl prometheus_client::collector::Collector for CacheCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        let mut family = encoder.encode_descriptor(
            "informer_objects",
            "Objects held in an informer's cache",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (name, objects) in self.caches.lock().iter() {
            let gauge = prometheus_client::metrics::gauge::ConstGauge::new(
                i64::try_from(objects()).unwrap_or(i64::MAX),
            );
            let labels = [("name", name.as_str())];
            gauge.encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(feature = "prometheus")]
impl FactoryMetrics for PrometheusFactoryMetrics {
    fn reflector(&self, name: &str) -> Option<Arc<dyn ReflectorMetrics>> {
        Some(self.reflectors.for_reflector(name))
    }

    fn informer(&self, name: &str) -> Option<Arc<dyn InformerMetrics>> {
        Some(self.informers.for_informer(name))
    }

    fn informer_cache(&self, name: &str, objects: CacheSize) {
        self.caches.lock().push((name.to_owned(), objects));
    }
}

/// Factory metrics exporting to `registry` (feature `prometheus`): the
/// reflector (`reflector_*`), informer (`informer_*`) and
/// `informer_objects` families, registered now, labelled with each
/// informer's name. Register once per registry and hand the result to
/// every factory on it ([`InformerFactoryBuilder::metrics`]).
#[cfg(feature = "prometheus")]
pub fn prometheus_factory_metrics(
    registry: &mut prometheus_client::registry::Registry,
) -> Arc<dyn FactoryMetrics> {
    let caches = Arc::new(Mutex::new(Vec::new()));
    registry.register_collector(Box::new(CacheCollector {
        caches: Arc::clone(&caches),
    }));
    Arc::new(PrometheusFactoryMetrics {
        reflectors: kcontrol_reflector::metrics::prometheus::PrometheusReflectorMetrics::new(
            registry,
        ),
        informers: crate::metrics::prometheus::PrometheusInformerMetrics::new(registry),
        caches,
    })
}

/// Why a factory could not start its informers.
#[derive(Debug, thiserror::Error)]
pub enum FactoryError {
    /// `start` was called outside a tokio runtime.
    #[error("InformerFactory::start must be called within a tokio runtime")]
    NoRuntime,
    /// An informer's label selector does not parse: the API server would
    /// answer every list with 400, retried forever. No informer started.
    #[error("informer {informer}: invalid label selector {selector:?}: {source}")]
    InvalidLabelSelector {
        /// The informer (its key).
        informer: String,
        /// The selector as given.
        selector: String,
        /// What is wrong with it.
        #[source]
        source: Box<kcontrol_indexer::labels::SelectorError>,
    },
}

/// Rejects an informer whose label selector does not parse (client-go
/// checks selectors on the client too).
fn check_label_selector(key: &InformerKey) -> Result<(), FactoryError> {
    let Some(selector) = key.label_selector.as_deref() else {
        return Ok(());
    };
    kcontrol_indexer::labels::Selector::parse(selector)
        .map(drop)
        .map_err(|source| FactoryError::InvalidLabelSelector {
            informer: key.to_string(),
            selector: selector.to_owned(),
            source: Box::new(source),
        })
}

/// client-go's name for [`InformerFactory`] (`SharedInformerFactory` in
/// `k8s.io/client-go/informers`).
pub type SharedInformerFactory = InformerFactory;

/// Options of an [`InformerFactory`].
pub struct InformerFactoryBuilder {
    client: Client,
    default_resync: Duration,
    scope: InformerScope,
    watch_config: WatchConfig,
    transforms: HashMap<TypeId, PerType>,
    filters: HashMap<TypeId, PerType>,
    resyncs: HashMap<TypeId, Duration>,
    metrics: Option<Arc<dyn FactoryMetrics>>,
}

impl fmt::Debug for InformerFactoryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerFactoryBuilder")
            .field("default_resync", &self.default_resync)
            .field("scope", &self.scope)
            .field("watch_config", &self.watch_config)
            .finish_non_exhaustive()
    }
}

impl InformerFactoryBuilder {
    /// The resync period of every informer (default: none).
    #[must_use]
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = period;
        self
    }

    /// A resync period for informers of `K` only (client-go's `WithCustomResyncConfig`).
    #[must_use]
    pub fn resync_for<K: 'static>(mut self, period: Duration) -> Self {
        self.resyncs.insert(TypeId::of::<K>(), period);
        self
    }

    /// Lists and watches in `scope` (namespace and selectors) at once,
    /// replacing what [`namespace`](Self::namespace) and the selector
    /// setters set.
    #[must_use]
    pub fn scope(mut self, scope: InformerScope) -> Self {
        self.scope = scope;
        self
    }

    /// Watch only this namespace (default: all).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.scope.namespace = Some(namespace.into());
        self
    }

    /// List and watch only objects matching this label selector.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.scope.label_selector = Some(selector.into());
        self
    }

    /// List and watch only objects matching this field selector.
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.scope.field_selector = Some(selector.into());
        self
    }

    /// How every informer lists and watches: page size, WatchList,
    /// managedFields, watch timeout, backoff and pacing (default:
    /// client-go's).
    #[must_use]
    pub fn watch_config(mut self, watch_config: WatchConfig) -> Self {
        self.watch_config = watch_config;
        self
    }

    /// A transform applied to every object of type `K` before it is stored
    /// (client-go's `WithTransform`, per type). It replaces the watch
    /// configuration's `strip_managed_fields` for `K`.
    #[must_use]
    pub fn transform<K: KubeObject>(
        mut self,
        transform: impl Fn(K) -> K + Send + Sync + 'static,
    ) -> Self {
        let f: Arc<dyn Fn(K) -> K + Send + Sync> = Arc::new(transform);
        self.transforms.insert(TypeId::of::<K>(), Arc::new(f));
        self
    }

    /// A store filter for every informer of type `K`
    /// ([`SharedIndexInformerBuilder::store_filter`]): its stores keep only
    /// the objects `keep` accepts.
    #[must_use]
    pub fn store_filter<K: KubeObject>(
        mut self,
        keep: impl Fn(&K) -> bool + Send + Sync + 'static,
    ) -> Self {
        let f: crate::StoreFilter<K> = Arc::new(keep);
        self.filters.insert(TypeId::of::<K>(), Arc::new(f));
        self
    }

    /// Metrics for every reflector and informer the factory builds.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn FactoryMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Registers the reflector (`reflector_*`) and informer (`informer_*`)
    /// metric families in `registry` and reports every reflector and
    /// informer the factory builds to them, labelled with the informer's
    /// name (feature `prometheus`). Several factories on one registry
    /// share one [`prometheus_factory_metrics`] instead (a family is
    /// registered once per registry).
    #[cfg(feature = "prometheus")]
    #[must_use]
    pub fn registry(self, registry: &mut prometheus_client::registry::Registry) -> Self {
        self.metrics(prometheus_factory_metrics(registry))
    }

    /// The factory.
    pub fn build(self) -> InformerFactory {
        InformerFactory {
            client: self.client,
            default_resync: self.default_resync,
            scope: self.scope,
            watch_config: self.watch_config,
            transforms: self.transforms,
            filters: self.filters,
            resyncs: self.resyncs,
            metrics: self.metrics,
            stop: CancellationToken::new(),
            state: Mutex::new(State {
                informers: BTreeMap::new(),
                tasks: Vec::new(),
                shutting_down: false,
            }),
        }
    }
}

/// Hands out shared informers: one per resource, namespace and selectors,
/// however many controllers ask (client-go's `SharedInformerFactory`).
///
/// ```no_run
/// # async fn demo(client: kcontrol_client::Client) {
/// use std::time::Duration;
/// use kcontrol_indexer::k8s_openapi::api::apps::v1::Deployment;
/// use kcontrol_informer::InformerFactory;
/// use tokio_util::sync::CancellationToken;
///
/// let factory = InformerFactory::new(client, Duration::from_secs(30));
/// let deployments = factory.informer::<Deployment>();
/// assert!(std::sync::Arc::ptr_eq(&deployments, &factory.informer::<Deployment>()));
/// let shutdown = CancellationToken::new();
/// factory.start(&shutdown).unwrap();
/// factory
///     .wait_for_cache_sync(&shutdown, Some(Duration::from_secs(30)))
///     .await
///     .expect("caches synced");
/// shutdown.cancel();
/// factory.shutdown().await;
/// # }
/// ```
pub struct InformerFactory {
    client: Client,
    default_resync: Duration,
    scope: InformerScope,
    watch_config: WatchConfig,
    transforms: HashMap<TypeId, PerType>,
    filters: HashMap<TypeId, PerType>,
    resyncs: HashMap<TypeId, Duration>,
    metrics: Option<Arc<dyn FactoryMetrics>>,
    /// Cancelled by `shutdown`; every informer runs under a child of it.
    stop: CancellationToken,
    state: Mutex<State>,
}

impl fmt::Debug for InformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("InformerFactory")
            .field("default_resync", &self.default_resync)
            .field("scope", &self.scope)
            .field(
                "informers",
                &st.informers
                    .keys()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl InformerFactory {
    /// A factory of informers over all namespaces with this resync period
    /// (client-go's `NewSharedInformerFactory`).
    pub fn new(client: Client, default_resync: Duration) -> Self {
        Self::builder(client).default_resync(default_resync).build()
    }

    /// Options for a factory.
    pub fn builder(client: Client) -> InformerFactoryBuilder {
        InformerFactoryBuilder {
            client,
            default_resync: Duration::ZERO,
            scope: InformerScope::default(),
            watch_config: WatchConfig::default(),
            transforms: HashMap::new(),
            filters: HashMap::new(),
            resyncs: HashMap::new(),
            metrics: None,
        }
    }

    /// The shared informer of typed resource `K` in the factory's scope,
    /// created on first use.
    pub fn informer<K>(&self) -> Arc<SharedIndexInformer<K>>
    where
        K: KubeResource + DeserializeOwned,
    {
        self.scoped_informer::<K>(self.scope.clone())
    }

    /// How the factory's informers list and watch.
    pub fn watch_config(&self) -> WatchConfig {
        self.watch_config
    }

    /// The factory's own scope (its namespace and selectors), to build
    /// another from: `factory.scope().label_selector("app=web")` keeps the
    /// factory's namespace.
    pub fn scope(&self) -> InformerScope {
        self.scope.clone()
    }

    /// The shared informer of `K` in another scope (namespace, selectors).
    /// The scope given replaces the factory's (see
    /// [`scope`](Self::scope) to extend it instead).
    pub fn scoped_informer<K>(&self, scope: InformerScope) -> Arc<SharedIndexInformer<K>>
    where
        K: KubeResource + DeserializeOwned,
    {
        self.get_or_create(&K::api_resource(), scope, false, typed_api::<K>)
    }

    /// The shared metadata-only informer of `K` in the factory's scope:
    /// its cache holds [`PartialObjectMetadata<K>`] (names, labels,
    /// annotations, owners; no spec, no data), listed and watched as
    /// `PartialObjectMetadata` so the rest never crosses the wire (client-go's
    /// `metadatainformer`). For controllers that only map objects to keys.
    pub fn metadata_informer<K>(&self) -> Arc<SharedIndexInformer<PartialObjectMetadata<K>>>
    where
        K: TypedResource,
        PartialObjectMetadata<K>: TypedResource,
    {
        self.scoped_metadata_informer::<K>(self.scope.clone())
    }

    /// [`metadata_informer`](Self::metadata_informer) in another scope.
    pub fn scoped_metadata_informer<K>(
        &self,
        scope: InformerScope,
    ) -> Arc<SharedIndexInformer<PartialObjectMetadata<K>>>
    where
        K: TypedResource,
        PartialObjectMetadata<K>: TypedResource,
    {
        self.get_or_create(&K::api_resource(), scope, true, |client, ns| {
            typed_api::<K>(client, ns).metadata()
        })
    }

    /// The shared metadata-only informer of `K` with a compact cache: as
    /// [`metadata_informer`](Self::metadata_informer) (the same requests),
    /// holding [`CompactPartialObjectMetadata<K>`] (boxed strings, labels
    /// in one allocation, no k8s-openapi `ObjectMeta`): for caches of many
    /// objects' metadata.
    pub fn compact_metadata_informer<K: KubeResource>(
        &self,
    ) -> Arc<SharedIndexInformer<CompactPartialObjectMetadata<K>>> {
        self.scoped_compact_metadata_informer::<K>(self.scope.clone())
    }

    /// [`compact_metadata_informer`](Self::compact_metadata_informer) in
    /// another scope.
    pub fn scoped_compact_metadata_informer<K: KubeResource>(
        &self,
        scope: InformerScope,
    ) -> Arc<SharedIndexInformer<CompactPartialObjectMetadata<K>>> {
        self.get_or_create(&K::api_resource(), scope, true, |client, ns| {
            typed_api::<K>(client, ns).compact_metadata()
        })
    }

    /// The shared informer of a resource known at run time, as
    /// [`DynamicObject`]s, in the factory's scope.
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
    ) -> Arc<SharedIndexInformer<DynamicObject>> {
        self.scoped_dynamic_informer(resource, self.scope.clone())
    }

    /// [`dynamic_informer`](Self::dynamic_informer) in another scope.
    pub fn scoped_dynamic_informer(
        &self,
        resource: &ApiResource,
        scope: InformerScope,
    ) -> Arc<SharedIndexInformer<DynamicObject>> {
        self.get_or_create(resource, scope, false, |client, ns| match ns {
            Some(ns) if resource.namespaced => Api::namespaced_with(client, ns, resource),
            _ => Api::all_with(client, resource),
        })
    }

    /// A metadata-only informer's key names it apart from the full
    /// informer of the same resource.
    fn key<K: 'static>(
        resource: &ApiResource,
        scope: &InformerScope,
        metadata_only: bool,
    ) -> InformerKey {
        InformerKey {
            type_id: TypeId::of::<K>(),
            resource: format!(
                "{}.{}{}",
                resource.plural,
                resource.api_version(),
                if metadata_only { " (metadata)" } else { "" }
            ),
            namespace: scope.namespace.clone().filter(|_| resource.namespaced),
            label_selector: scope.label_selector.clone(),
            field_selector: scope.field_selector.clone(),
            type_name: std::any::type_name::<K>(),
        }
    }

    /// The informer of `K` in `scope` (metadata only or not), created with
    /// the lister-watcher `api` builds on first use.
    fn get_or_create<K>(
        &self,
        resource: &ApiResource,
        scope: InformerScope,
        metadata_only: bool,
        api: impl FnOnce(Client, Option<&str>) -> Api<K>,
    ) -> Arc<SharedIndexInformer<K>>
    where
        K: KubeObject + DeserializeOwned,
        Api<K>: ListerWatcher<K>,
    {
        let key = Self::key::<K>(resource, &scope, metadata_only);
        let mut st = self.state.lock();
        if let Some(existing) = st.informers.get(&key) {
            if let Ok(informer) = Arc::clone(&existing.informer)
                .as_any()
                .downcast::<SharedIndexInformer<K>>()
            {
                return informer;
            }
        }
        let api = api(self.client.clone(), key.namespace.as_deref());
        let mut lw = ListWatch::new(api);
        if let Some(l) = &key.label_selector {
            lw = lw.labels(l);
        }
        if let Some(f) = &key.field_selector {
            lw = lw.fields(f);
        }
        let resync = self
            .resyncs
            .get(&TypeId::of::<K>())
            .copied()
            .unwrap_or(self.default_resync);
        let name = key.to_string();
        let mut builder = SharedIndexInformer::builder(lw)
            .name(name.clone())
            .resync_period(resync);
        if let Some(metrics) = &self.metrics {
            if let Some(m) = metrics.reflector(&name) {
                builder = builder.reflector_metrics(m);
            }
            if let Some(m) = metrics.informer(&name) {
                builder = builder.metrics(m);
            }
        }
        builder = self.configured(builder);
        let informer = builder.build();
        if let Some(metrics) = &self.metrics {
            let weak = Arc::downgrade(&informer);
            metrics.informer_cache(
                &name,
                Box::new(move || weak.upgrade().map_or(0, |i| i.store().len())),
            );
        }
        st.informers.insert(
            key,
            Entry {
                informer: Arc::clone(&informer) as Arc<dyn ErasedInformer>,
                started: false,
            },
        );
        informer
    }

    /// `builder` with the factory's watch configuration and `K`'s
    /// transform and store filter, if any: a transform of `K`'s own
    /// replaces the configuration's managedFields stripping.
    fn configured<K: KubeObject>(
        &self,
        mut builder: SharedIndexInformerBuilder<K>,
    ) -> SharedIndexInformerBuilder<K> {
        let filter = self
            .filters
            .get(&TypeId::of::<K>())
            .and_then(|f| f.downcast_ref::<crate::StoreFilter<K>>())
            .cloned();
        if let Some(keep) = filter {
            builder = builder.store_filter(move |obj| keep(obj));
        }
        let custom = self
            .transforms
            .get(&TypeId::of::<K>())
            .and_then(|t| t.downcast_ref::<Arc<dyn Fn(K) -> K + Send + Sync>>())
            .cloned();
        match custom {
            Some(f) => builder
                .watch_config(self.watch_config.strip_managed_fields(false))
                .transform(move |obj| f(obj)),
            None => builder.watch_config(self.watch_config),
        }
    }

    /// Starts every informer not started yet, each on a new task of the
    /// current tokio runtime, running until `shutdown` is cancelled (or
    /// [`shutdown`](Self::shutdown) is called). Informers created later
    /// start on the next call. Does nothing once the factory shuts down.
    ///
    /// Stopping: cancelling `shutdown` stops the informers started with it
    /// and returns at once; [`shutdown`](Self::shutdown) stops every
    /// informer of the factory and waits until they and their handlers
    /// have ended. A controller that must not exit with a handler still
    /// running calls `shutdown().await` (cancelling first is not needed).
    ///
    /// # Errors
    /// Outside a tokio runtime, or when an informer's label selector does
    /// not parse (then no informer starts).
    pub fn start(&self, shutdown: &CancellationToken) -> Result<(), FactoryError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| FactoryError::NoRuntime)?;
        let mut st = self.state.lock();
        if st.shutting_down {
            return Ok(());
        }
        for key in st.informers.keys() {
            check_label_selector(key)?;
        }
        let mut tasks = Vec::new();
        for (key, entry) in st.informers.iter_mut().filter(|(_, e)| !e.started) {
            entry.started = true;
            tracing::debug!(informer = %key, "starting informer");
            let token = self.stop.child_token();
            let run = Arc::clone(&entry.informer).run_boxed(token.clone());
            tasks.push(runtime.spawn(run_until(run, shutdown.clone(), token)));
        }
        st.tasks.extend(tasks);
        Ok(())
    }

    /// Waits until every started informer has synced: the factory as the
    /// only entry of [`wait_for_cache_sync`](crate::wait_for_cache_sync),
    /// which also takes it beside handler registrations (wait on both
    /// before starting workers: a registration syncs once its handler has
    /// seen the initial list).
    ///
    /// # Errors
    /// When `shutdown` is cancelled or `timeout` passes first, naming the
    /// informers that had not synced.
    pub async fn wait_for_cache_sync(
        &self,
        shutdown: &CancellationToken,
        timeout: Option<Duration>,
    ) -> Result<(), CacheSyncError> {
        crate::synced::wait_for_cache_sync(shutdown, timeout, &[self]).await
    }

    /// Stops every informer and waits until they have stopped (their
    /// handlers' threads included). Later `start` calls do nothing.
    pub async fn shutdown(&self) {
        let tasks = {
            let mut st = self.state.lock();
            st.shutting_down = true;
            std::mem::take(&mut st.tasks)
        };
        self.stop.cancel();
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "an informer task failed");
            }
        }
    }
}

/// The factory has synced when every informer it started has.
impl HasSynced for InformerFactory {
    fn has_synced(&self) -> bool {
        let st = self.state.lock();
        st.informers
            .values()
            .filter(|e| e.started)
            .all(|e| e.informer.synced())
    }

    fn unsynced(&self) -> Vec<String> {
        let st = self.state.lock();
        st.informers
            .iter()
            .filter(|(_, e)| e.started && !e.informer.synced())
            .map(|(key, _)| format!("informer {key}"))
            .collect()
    }
}

/// Runs an informer (under `token`, a child of the factory's) until it
/// ends, cancelling `token` when the caller's `user` token is cancelled.
async fn run_until(
    mut run: Pin<Box<dyn Future<Output = ()> + Send>>,
    user: CancellationToken,
    token: CancellationToken,
) {
    tokio::select! {
        () = &mut run => return,
        () = user.cancelled() => token.cancel(),
    }
    run.await;
}

/// `K`'s objects in `ns`, or in every namespace when `ns` is `None` or `K`
/// is cluster-scoped.
fn typed_api<K: KubeResource>(client: Client, ns: Option<&str>) -> Api<K> {
    match ns {
        Some(ns) if K::api_resource().namespaced => Api::namespaced(client, ns),
        _ => Api::all(client),
    }
}
