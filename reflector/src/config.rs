//! [`WatchConfig`]: how objects are listed and watched, one value that
//! every layer takes (reflector, informer, informer factory, controller);
//! [`ReflectorConfig`]: a [`Reflector`](crate::Reflector)'s options
//! (client-go's reflector fields and `ReflectorOptions`): a `WatchConfig`
//! and what the cache does with the objects; [`BackoffConfig`], how a
//! reflector waits after failures (by the rules of its [`PacingPreset`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::PacingPreset;
use crate::error::ReflectorError;
use crate::metrics::ReflectorMetrics;

/// A transform applied to every listed or watched object before it is
/// wrapped in an `Arc` and queued (e.g. to drop `managedFields`).
pub type TransformFn<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Decides, at each resync period, whether to resync now.
pub type ShouldResyncFn = Arc<dyn Fn() -> bool + Send + Sync>;

/// Receives every list and watch failure (client-go's `WatchErrorHandler`).
pub type ErrorHandlerFn = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// How a reflector backs off after failures: exponential from `initial`,
/// doubling up to `max`, with `jitter`, back to `initial` once no backoff
/// was needed for `reset_after` (client-go: 800 ms, 30 s, 2 min, jitter 1.0).
/// A success does not reset it: a server that answers and falls over again
/// keeps clients at the backoff its outages grew (RF5).
///
/// Each wait is `base × (1 + jitter × r)` with `r` uniform in `[0, 1)`,
/// where `base` starts at `initial` and doubles after each wait up to
/// `max` — client-go's `wait.Backoff` semantics, so with the default
/// jitter a wait at the cap lies between 30 and 60 s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffConfig {
    /// The first wait (800 ms).
    pub initial: Duration,
    /// The largest base wait (30 s).
    pub max: Duration,
    /// After this long without a backoff, the next one starts again from
    /// `initial` (2 min).
    pub reset_after: Duration,
    /// The random fraction added to each wait (1.0: up to +100 %).
    pub jitter: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
            jitter: 1.0,
        }
    }
}

/// How objects are listed and watched, whatever type caches them (as
/// kube-runtime's `watcher::Config`): page size, WatchList, watch timeout,
/// managedFields, backoff and pacing. Declared once, here; the reflector
/// ([`ReflectorConfig::watch_config`]), the informer builder, the informer factory
/// and the controller each take one. What is watched (namespace,
/// selectors) is not here: it is the lister-watcher's (`ListWatch`,
/// the factory's scope). [`Default`] gives client-go's defaults.
///
/// ```
/// use std::time::Duration;
/// use kcontrol_reflector::{BackoffConfig, PacingPreset, WatchConfig};
///
/// let watch = WatchConfig::default()
///     .page_size(1000)
///     .use_watch_list(true)
///     .strip_managed_fields(true)
///     .backoff(BackoffConfig { initial: Duration::from_millis(100), ..BackoffConfig::default() });
/// assert_eq!(watch.page_size, 1000);
/// assert_eq!(watch.min_watch_timeout, Duration::from_secs(300));
/// assert_eq!(watch.pacing, PacingPreset::Kcontrol);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WatchConfig {
    /// Objects per list page (`limit`, default 500; 0 lists without pages).
    ///
    /// As in client-go, a relist at a specific resourceVersion is not
    /// paged unless the server paged an earlier list, so that it is served
    /// from the watch cache; lists at `"0"` may come back in one page anyway
    /// (the watch cache ignores `limit`). Either way objects are decoded and
    /// queued one at a time.
    pub page_size: u32,
    /// Use WatchList (`sendInitialEvents`) instead of list + watch where
    /// the server supports it (default `false`).
    pub use_watch_list: bool,
    /// Drop every object's `metadata.managedFields` (default `false`):
    /// protobuf answers are decoded without them (skipped unread), JSON
    /// ones are stripped after decoding, before any transform.
    pub strip_managed_fields: bool,
    /// Watches ask the server to end them after a random time in
    /// `[min_watch_timeout, 2 × min_watch_timeout)` (default 5 min).
    pub min_watch_timeout: Duration,
    /// Waits after failures.
    pub backoff: BackoffConfig,
    /// Whose rules pace retries (RF5; default kcontrol's).
    pub pacing: PacingPreset,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            page_size: 500,
            use_watch_list: false,
            strip_managed_fields: false,
            min_watch_timeout: Duration::from_secs(300),
            backoff: BackoffConfig::default(),
            pacing: PacingPreset::default(),
        }
    }
}

impl WatchConfig {
    /// Sets [`page_size`](Self::page_size).
    #[must_use]
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.page_size = page_size;
        self
    }

    /// Sets [`use_watch_list`](Self::use_watch_list).
    #[must_use]
    pub fn use_watch_list(mut self, on: bool) -> Self {
        self.use_watch_list = on;
        self
    }

    /// Sets [`strip_managed_fields`](Self::strip_managed_fields).
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = on;
        self
    }

    /// Sets [`min_watch_timeout`](Self::min_watch_timeout).
    #[must_use]
    pub fn min_watch_timeout(mut self, timeout: Duration) -> Self {
        self.min_watch_timeout = timeout;
        self
    }

    /// Sets [`backoff`](Self::backoff).
    #[must_use]
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets [`pacing`](Self::pacing).
    #[must_use]
    pub fn pacing(mut self, pacing: PacingPreset) -> Self {
        self.pacing = pacing;
        self
    }
}

/// Options of a [`Reflector`](crate::Reflector): how it lists and watches
/// ([`WatchConfig`]) and what it does with the objects. Every field is
/// public and has a builder method; [`Default`] gives client-go's defaults.
///
/// ```
/// use std::time::Duration;
/// use kcontrol_reflector::{ReflectorConfig, WatchConfig};
/// use kcontrol_indexer::{k8s_openapi::api::core::v1::ConfigMap, transform::strip_managed_fields};
///
/// let config = ReflectorConfig::<ConfigMap>::default()
///     .name("configmaps")
///     .watch_config(WatchConfig::default().page_size(1000).use_watch_list(true))
///     .resync_period(Duration::from_secs(600))
///     .transform(|mut cm: ConfigMap| {
///         strip_managed_fields(&mut cm);
///         cm
///     })
///     .error_handler(|err| tracing::warn!(%err, "configmaps reflector"));
/// assert_eq!(config.watch_config.page_size, 1000);
/// ```
pub struct ReflectorConfig<K> {
    /// The reflector's name, in logs and metrics (default `"reflector"`).
    pub name: String,
    /// How it lists and watches.
    pub watch_config: WatchConfig,
    /// Resync every this long (`None`, the default: never).
    pub resync_period: Option<Duration>,
    /// Asked at each resync period; `None` always resyncs.
    pub should_resync: Option<ShouldResyncFn>,
    /// Applied to every object before it is queued.
    pub transform: Option<TransformFn<K>>,
    /// Called on every list and watch failure (they are also logged).
    pub error_handler: Option<ErrorHandlerFn>,
    /// Receives the reflector's activity.
    pub metrics: Option<Arc<dyn ReflectorMetrics>>,
}

impl<K> Default for ReflectorConfig<K> {
    fn default() -> Self {
        Self {
            name: "reflector".to_owned(),
            watch_config: WatchConfig::default(),
            resync_period: None,
            should_resync: None,
            transform: None,
            error_handler: None,
            metrics: None,
        }
    }
}

impl<K> Clone for ReflectorConfig<K> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            watch_config: self.watch_config,
            resync_period: self.resync_period,
            should_resync: self.should_resync.clone(),
            transform: self.transform.clone(),
            error_handler: self.error_handler.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

impl<K> fmt::Debug for ReflectorConfig<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorConfig")
            .field("name", &self.name)
            .field("watch_config", &self.watch_config)
            .field("resync_period", &self.resync_period)
            .field("should_resync", &self.should_resync.is_some())
            .field("transform", &self.transform.is_some())
            .field("error_handler", &self.error_handler.is_some())
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl<K> ReflectorConfig<K> {
    /// The defaults (same as [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`name`](Self::name).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets [`watch_config`](Self::watch_config).
    #[must_use]
    pub fn watch_config(mut self, watch_config: WatchConfig) -> Self {
        self.watch_config = watch_config;
        self
    }

    /// Resyncs every `period` ([`resync_period`](Self::resync_period)).
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Sets [`should_resync`](Self::should_resync).
    #[must_use]
    pub fn should_resync(mut self, f: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.should_resync = Some(Arc::new(f));
        self
    }

    /// Sets [`transform`](Self::transform).
    #[must_use]
    pub fn transform(mut self, f: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(f));
        self
    }

    /// Sets [`error_handler`](Self::error_handler).
    #[must_use]
    pub fn error_handler(mut self, f: impl Fn(&ReflectorError) + Send + Sync + 'static) -> Self {
        self.error_handler = Some(Arc::new(f));
        self
    }

    /// Sets [`metrics`](Self::metrics).
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn ReflectorMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}
