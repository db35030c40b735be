//! The `sync-list` and `sync-watchlist` rows: an informer's initial sync,
//! beside a bare decode of the same list bytes, each in a fresh child
//! process (see the scenario's doc for what the memory figures include).

use kcontrol_reflector::WatchConfig;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::serde::de::DeserializeOwned;
use kcontrol_client::{Api, Client, ObjectList};
use kcontrol_indexer::compact::{CompactConfigMap, CompactPartialObjectMetadata};
use kcontrol_indexer::{KubeObject, PartialObjectMetadata};
use kcontrol_informer::{
    HandlerRegistration, ResourceEventHandlerFuncs, SharedIndexInformer, SharedIndexInformerBuilder,
};
use kcontrol_reflector::{ReflectorMetrics, WatchEventType};
use serde_json::{json, Value};

use super::running::Running;
use super::server::ServerProcess;
use super::{bytes_field, client, field, ChildSpec};
use crate::controller::procstat;
use crate::report::{row, Report};
use crate::rss;

/// Longest initial sync before the run is abandoned.
const SYNC_LIMIT: Duration = Duration::from_secs(300);
/// Decodes timed after the first, in memory the first one touched.
const WARM_DECODES: usize = 3;
/// Wait after the sync before the steady RSS is read.
const SETTLE: Duration = Duration::from_secs(2);

/// The rows of `objects` objects in `namespace`: one decode child, then a
/// sync child with paged lists and one with WatchList.
pub fn bench(
    report: &mut Report,
    server: &ServerProcess,
    objects: usize,
    namespace: &str,
) -> Result<(), String> {
    let mut spec = ChildSpec {
        role: "decode".to_owned(),
        url: server.url().to_owned(),
        namespace: namespace.to_owned(),
        objects,
        watch_list: false,
        kind: "full",
        malloc_conf: None,
    };
    let decode = spec.run("informer")?;
    let decode_seconds = field(&decode, "decode_seconds")?;
    let decode_warm_seconds = field(&decode, "decode_warm_seconds")?;
    let decoded_rss = bytes_field(&decode, "decoded_rss_bytes")?;
    let runs = [
        (false, "full"),
        (true, "full"),
        (false, "compact"),
        (true, "compact"),
        (false, "metadata"),
    ];
    for (watch_list, kind) in runs {
        spec.role = "sync".to_owned();
        spec.watch_list = watch_list;
        spec.kind = kind;
        let sync = spec.run("informer")?;
        let sync_seconds = field(&sync, "sync_seconds")?;
        let peak = bytes_field(&sync, "peak_rss_bytes")?;
        let steady = bytes_field(&sync, "steady_rss_bytes")?;
        let scenario = if watch_list {
            "sync-watchlist"
        } else {
            "sync-list"
        };
        report.row(row([
            ("scenario", json!(scenario)),
            ("objects", json!(objects)),
            ("cached_type", json!(match kind {
                "compact" => "CompactConfigMap",
                "metadata" => "PartialObjectMetadata<ConfigMap> (metadata-only informer)",
                "compact-metadata" => "CompactPartialObjectMetadata<ConfigMap> (compact metadata-only informer)",
                _ => "ConfigMap",
            })),
            ("sync_seconds", json!(sync_seconds)),
            ("decode_seconds", json!(decode_seconds)),
            ("ratio", json!(sync_seconds / decode_seconds)),
            ("decode_warm_seconds", json!(decode_warm_seconds)),
            ("ratio_warm", json!(sync_seconds / decode_warm_seconds)),
            ("sync_peak_rss_bytes", json!(peak)),
            ("decoded_rss_bytes", json!(decoded_rss)),
            ("rss_ratio", json!(peak as f64 / decoded_rss as f64)),
            ("steady_rss_bytes", json!(steady)),
            ("steady_rss_bytes_per_object", json!((steady as f64 / objects as f64).round())),
            ("baseline_rss_bytes", json!(bytes_field(&sync, "baseline_rss_bytes")?)),
            ("list_bytes", json!(bytes_field(&decode, "list_bytes")?)),
            ("server_rss_bytes", json!(server.rss_bytes())),
            ("measured", json!("sync: fresh child process (client, runtime, informer with managedFields stripped; no server), wall time from run() to the handler registration's has_synced, whole-process VmHWM during it, VmRSS 2 s later; decode: another fresh child, serde_json::from_slice of the unpaged list body into ObjectList<ConfigMap>, its time and VmRSS growth (decode_warm: best of 3 more decodes in that process, memory reused); server in a third process")),
        ]));
    }
    Ok(())
}

/// Child: fetches the list body, then decodes it once, measured.
pub async fn decode_child(spec: &ChildSpec) -> Result<Value, String> {
    let client = client(&spec.url)?;
    let path = format!("/api/v1/namespaces/{}/configmaps", spec.namespace);
    let request = http::Request::get(&path)
        .body(Bytes::new())
        .map_err(|e| format!("GET {path}: {e}"))?;
    let body = client
        .request_bytes(request)
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    let before = rss::current_bytes();
    let start = Instant::now();
    let list: ObjectList<ConfigMap> =
        serde_json::from_slice(&body).map_err(|e| format!("decoding the list: {e}"))?;
    let decode_seconds = start.elapsed().as_secs_f64();
    let after = rss::current_bytes();
    let items = black_box(&list).items.len();
    if items != spec.objects {
        return Err(format!("the list has {items} items, want {}", spec.objects));
    }
    drop(list);
    let mut decode_warm_seconds = f64::MAX;
    for _ in 0..WARM_DECODES {
        let start = Instant::now();
        let list: ObjectList<ConfigMap> =
            serde_json::from_slice(&body).map_err(|e| format!("decoding the list: {e}"))?;
        decode_warm_seconds = decode_warm_seconds.min(start.elapsed().as_secs_f64());
        drop(black_box(list));
    }
    Ok(json!({
        "decode_seconds": decode_seconds,
        "decode_warm_seconds": decode_warm_seconds,
        "decoded_rss_bytes": after.saturating_sub(before),
        "list_bytes": body.len(),
    }))
}

/// The informer of the spec's namespace as a controller would build it:
/// managedFields stripped, default page size, WatchList as the spec says.
pub fn builder(spec: &ChildSpec) -> Result<SharedIndexInformerBuilder<ConfigMap>, String> {
    let api = Api::<ConfigMap>::namespaced(client(&spec.url)?, &spec.namespace);
    Ok(SharedIndexInformer::builder(api).watch_config(
        WatchConfig::default()
            .use_watch_list(spec.watch_list)
            .strip_managed_fields(true),
    ))
}

/// Child: one informer's initial sync, measured, of the type the spec asks.
pub async fn sync_child(spec: &ChildSpec) -> Result<Value, String> {
    sync_with(spec, client(&spec.url)?).await
}

/// One informer's initial sync through `client`, measured, of the type the
/// spec asks (the spec's URL is not used).
pub async fn sync_with(spec: &ChildSpec, client: Client) -> Result<Value, String> {
    let ns = &spec.namespace;
    match spec.kind {
        "compact" => {
            let api = Api::<CompactConfigMap>::namespaced(client, ns);
            sync_of(spec, SharedIndexInformer::builder(api), false).await
        }
        "metadata" => {
            let api = Api::<ConfigMap>::namespaced(client, ns).metadata();
            let builder = SharedIndexInformer::<PartialObjectMetadata<ConfigMap>>::builder(api);
            sync_of(spec, builder, true).await
        }
        "compact-metadata" => {
            let api = Api::<ConfigMap>::namespaced(client, ns).compact_metadata();
            let builder =
                SharedIndexInformer::<CompactPartialObjectMetadata<ConfigMap>>::builder(api);
            sync_of(spec, builder, true).await
        }
        _ => {
            let api = Api::<ConfigMap>::namespaced(client, ns);
            sync_of(spec, SharedIndexInformer::builder(api), true).await
        }
    }
}

/// One informer's initial sync, measured.
pub(crate) async fn sync_of<K: KubeObject + DeserializeOwned>(
    spec: &ChildSpec,
    builder: SharedIndexInformerBuilder<K>,
    strip_managed_fields: bool,
) -> Result<Value, String> {
    let counts = Arc::new(SyncCounts::default());
    let watch_config = WatchConfig::default()
        .use_watch_list(spec.watch_list)
        .strip_managed_fields(strip_managed_fields);
    let informer = builder
        .watch_config(watch_config)
        .reflector_metrics(Arc::clone(&counts) as Arc<dyn ReflectorMetrics>)
        .build();
    let adds = Arc::new(AtomicUsize::new(0));
    let reg = counting_handler(&informer, &adds)?;
    let baseline = rss::current_bytes();
    rss::reset_peak();
    let cpu_before = procstat::cpu_time("self");
    let start = Instant::now();
    let run = Running::synced(&informer, &reg, SYNC_LIMIT).await?;
    let sync_seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = procstat::cpu_time("self").saturating_sub(cpu_before);
    let peak = rss::peak_bytes();
    tokio::time::sleep(SETTLE).await;
    let steady = rss::current_bytes();
    let stored = informer.store().len();
    let added = adds.load(Ordering::SeqCst);
    run.stop().await;
    counts.check(spec)?;
    if stored != spec.objects || added != spec.objects {
        return Err(format!(
            "after sync: {stored} stored, {added} added, want {}",
            spec.objects
        ));
    }
    Ok(json!({
        "sync_seconds": sync_seconds,
        "cpu_seconds": cpu_seconds.as_secs_f64(),
        "peak_rss_bytes": peak,
        "steady_rss_bytes": steady,
        "baseline_rss_bytes": baseline,
    }))
}

/// What the reflector did during the sync, to check that the sync went
/// the way the row says (a refused WatchList falls back to a list).
#[derive(Default)]
pub struct SyncCounts {
    listed: AtomicU64,
    watch_adds: AtomicU64,
}

impl ReflectorMetrics for SyncCounts {
    fn list_finished(&self, items: u64, _elapsed: Duration) {
        self.listed.fetch_add(items, Ordering::SeqCst);
    }

    fn watch_event(&self, event: WatchEventType) {
        if event == WatchEventType::Added {
            self.watch_adds.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl SyncCounts {
    /// Whether the objects came by WatchList's ADDED events or by a list,
    /// as `spec` asks.
    pub fn check(&self, spec: &ChildSpec) -> Result<(), String> {
        let want = spec.objects as u64;
        let (listed, watched) = (
            self.listed.load(Ordering::SeqCst),
            self.watch_adds.load(Ordering::SeqCst),
        );
        let ok = if spec.watch_list {
            watched >= want
        } else {
            listed == want && watched == 0
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "watch_list={}: {listed} objects listed and {watched} ADDED events, want {want}",
                spec.watch_list
            ))
        }
    }
}

/// Registers a handler that counts adds (the least a controller's handler
/// does: look at each object once).
pub fn counting_handler<K: KubeObject>(
    informer: &SharedIndexInformer<K>,
    adds: &Arc<AtomicUsize>,
) -> Result<HandlerRegistration, String> {
    let adds = Arc::clone(adds);
    informer
        .add_event_handler(
            ResourceEventHandlerFuncs::new().add_func(move |cm: &Arc<K>, _| {
                black_box(cm);
                adds.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .map_err(|e| format!("adding the handler: {e}"))
}
