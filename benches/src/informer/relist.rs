//! The `relist` scenario: an informer holding 100,000 fixture ConfigMaps
//! is forced to relist by a 410, and its memory during the relist is
//! compared with its steady state (issue 6's target: peak at most 1.3x the
//! steady RSS; client-go and kube-rs users report 2-3x spikes here).
//!
//! The server runs in a child process of its own; the informer runs in
//! another fresh child process that holds only the client, the Tokio
//! runtime and the informer (managedFields stripped, default rate limit
//! and page size, jemalloc). In that child:
//! 1. initial sync (paged list, or WatchList), then three idle seconds;
//!    `steady_rss_bytes` is its whole `VmRSS` then;
//! 2. the peak is reset (`/proc/self/clear_refs`), the server is told to
//!    answer the next watch with a 410 `Expired` ERROR event
//!    (`/__admin/expire?watches=1`) and to end every open watch
//!    (`/__admin/close-watches`): the reflector re-watches, gets the 410 and
//!    relists the 100,000 objects into its full store;
//! 3. once the reflector reports the relist finished, a sentinel ConfigMap
//!    is created; its add reaches the handler only after every delta of the
//!    relist was popped (the FIFO pops keys in the order they came), so its
//!    arrival marks the relist fully processed.
//!    `relist_peak_rss_bytes` is the whole process's `VmHWM` then, and
//!    `relist_seconds` the time from the 410 to the sentinel's add.
//!
//! Both figures are whole-process figures of the informer's process, with
//! no server memory in them. `max_fifo_backlog` is the most relisted
//! objects decoded (counted by the transform) but not yet stored (counted
//! by an index function), sampled every half millisecond.
//!
//! Each runs twice: with jemalloc's default options, and with one arena
//! (`_RJEM_MALLOC_CONF=narenas:1`). By default jemalloc gives each thread
//! one of several arenas; the reflector's task moves between Tokio's
//! worker threads, so the relisted objects can be allocated in another
//! arena than the one the old objects are freed to, and the process grows
//! until that freed memory decays back to the system (seconds later). With
//! one arena the freed memory is reused at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Api, Client, DeleteParams, PostParams};
use kcontrol_indexer::transform::strip_managed_fields;
use kcontrol_informer::ResourceEventHandlerFuncs;
use kcontrol_reflector::ReflectorMetrics;
use serde_json::{json, Value};

use super::running::Running;
use super::server::ServerProcess;
use super::sync::{builder, counting_handler};
use super::{bytes_field, client, field, run_child_role, wait_until, ChildSpec};
use crate::report::{row, Report};
use crate::rss;

/// Objects in the store.
const OBJECTS: usize = 100_000;
/// Namespace of the objects.
const NAMESPACE: &str = "relist";
/// jemalloc with one arena: every thread allocates from and frees to the
/// same arena (by default each thread is assigned one of 4 per core).
const ONE_ARENA: &str = "narenas:1";
/// Idle time after the sync before the steady RSS is read.
const SETTLE: Duration = Duration::from_secs(3);
/// Longest sync, and longest relist, before the run is abandoned.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs the scenario, or a child's role when started as one.
pub fn bench(report: &mut Report) -> Result<(), String> {
    if let Some(result) = run_child_role() {
        return result;
    }
    let server = ServerProcess::start("relist", &[(NAMESPACE, OBJECTS)])?;
    for malloc_conf in [None, Some(ONE_ARENA)] {
        for watch_list in [false, true] {
            let spec = ChildSpec {
                role: "relist".to_owned(),
                url: server.url().to_owned(),
                namespace: NAMESPACE.to_owned(),
                objects: OBJECTS,
                watch_list,
                kind: "full",
                malloc_conf,
            };
            let out = spec.run("relist")?;
            report.row(relist_row(&out, &spec)?);
        }
    }
    Ok(())
}

fn relist_row(
    out: &HashMap<String, Value>,
    spec: &ChildSpec,
) -> Result<crate::report::Row, String> {
    let steady = bytes_field(out, "steady_rss_bytes")?;
    let peak = bytes_field(out, "relist_peak_rss_bytes")?;
    Ok(row([
        ("scenario", json!("relist")),
        ("objects", json!(OBJECTS)),
        ("watchlist", json!(spec.watch_list)),
        ("malloc_conf", json!(spec.malloc_conf.unwrap_or("default"))),
        ("steady_rss_bytes", json!(steady)),
        ("relist_peak_rss_bytes", json!(peak)),
        ("ratio", json!(peak as f64 / steady as f64)),
        ("relist_seconds", json!(field(out, "relist_seconds")?)),
        ("max_fifo_backlog", out.get("max_fifo_backlog").cloned().unwrap_or(Value::Null)),
        ("sync_seconds", json!(field(out, "sync_seconds")?)),
        ("sync_peak_rss_bytes", json!(bytes_field(out, "sync_peak_rss_bytes")?)),
        ("measured", json!("informer alone in a fresh child process (server in another): steady = VmRSS 3 s after the initial sync; peak = VmHWM from a 410 ERROR on the re-watch until a sentinel created after the relist reaches the handler; max_fifo_backlog = most relisted objects decoded but not yet stored, sampled every 0.5 ms until the relist's list ended")),
    ]))
}

/// Counts relists started and finished.
#[derive(Default)]
struct RelistMetrics {
    relisting: AtomicBool,
    relists_done: AtomicU64,
}

impl ReflectorMetrics for RelistMetrics {
    fn list_started(&self, relist: bool) {
        self.relisting.store(relist, Ordering::SeqCst);
    }

    fn list_finished(&self, _items: u64, _elapsed: Duration) {
        if self.relisting.swap(false, Ordering::SeqCst) {
            self.relists_done.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Objects the reflector decoded and objects the pop loop stored, to
/// sample how many relisted objects wait in the DeltaFIFO (each a second
/// copy beside the old object still in the store).
#[derive(Default)]
struct Backlog {
    /// Transform calls: one per decoded object, before it enters the FIFO.
    decoded: AtomicU64,
    /// Index function calls: two per store upsert of a known key (the new
    /// object's values, then the old one's).
    indexed: AtomicU64,
}

impl Backlog {
    fn counts(&self) -> (u64, u64) {
        (
            self.decoded.load(Ordering::SeqCst),
            self.indexed.load(Ordering::SeqCst),
        )
    }
}

/// Waits for the relist to finish, sampling the FIFO backlog; returns the
/// largest one seen.
async fn wait_relist(metrics: &RelistMetrics, backlog: &Backlog) -> Result<u64, String> {
    let (decoded0, indexed0) = backlog.counts();
    let deadline = Instant::now() + LIMIT;
    let mut max = 0;
    while metrics.relists_done.load(Ordering::SeqCst) == 0 {
        if Instant::now() >= deadline {
            return Err(format!("relist: not within {LIMIT:?}"));
        }
        let (decoded, indexed) = backlog.counts();
        max = max.max((decoded - decoded0).saturating_sub((indexed - indexed0) / 2));
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    Ok(max)
}

/// Sends `POST path` to the server's admin endpoint.
async fn admin(client: &Client, path: &str) -> Result<(), String> {
    let request = http::Request::post(path)
        .body(Bytes::new())
        .map_err(|e| format!("POST {path}: {e}"))?;
    client
        .request_bytes(request)
        .await
        .map(drop)
        .map_err(|e| format!("POST {path}: {e}"))
}

/// Child: sync, steady RSS, forced relist, peak RSS.
pub async fn relist_child(spec: &ChildSpec) -> Result<Value, String> {
    let metrics = Arc::new(RelistMetrics::default());
    let backlog = Arc::new(Backlog::default());
    let (decoded, indexed) = (Arc::clone(&backlog), Arc::clone(&backlog));
    let informer = builder(spec)?
        .reflector_metrics(Arc::clone(&metrics) as Arc<dyn ReflectorMetrics>)
        // the same transform, counted
        .transform(move |mut cm: ConfigMap| {
            strip_managed_fields(&mut cm);
            decoded.decoded.fetch_add(1, Ordering::Relaxed);
            cm
        })
        .indexer("bench-count", move |_| {
            indexed.indexed.fetch_add(1, Ordering::Relaxed);
            Vec::new()
        })
        .build();
    let adds = Arc::new(AtomicUsize::new(0));
    let synced = counting_handler(&informer, &adds)?;
    let sentinel_name = format!("sentinel-{}", spec.watch_list);
    let sentinel_seen = Arc::new(AtomicBool::new(false));
    informer
        .add_event_handler(ResourceEventHandlerFuncs::new().add_func({
            let (name, seen) = (sentinel_name.clone(), Arc::clone(&sentinel_seen));
            move |cm: &Arc<ConfigMap>, _| {
                if cm.metadata.name.as_deref() == Some(name.as_str()) {
                    seen.store(true, Ordering::SeqCst);
                }
            }
        }))
        .map_err(|e| format!("adding the sentinel handler: {e}"))?;
    rss::reset_peak();
    let start = Instant::now();
    let run = Running::synced(&informer, &synced, LIMIT).await?;
    let outcome = async {
        let sync_seconds = start.elapsed().as_secs_f64();
        let sync_peak = rss::peak_bytes();
        tokio::time::sleep(SETTLE).await;
        let steady = rss::current_bytes();
        let client = client(&spec.url)?;
        rss::reset_peak();
        let start = Instant::now();
        let (_, indexed_before) = backlog.counts();
        admin(&client, "/__admin/expire?watches=1").await?;
        admin(&client, "/__admin/close-watches").await?;
        let max_backlog = wait_relist(&metrics, &backlog).await?;
        let api = Api::<ConfigMap>::namespaced(client, &spec.namespace);
        let mut sentinel = ConfigMap::default();
        sentinel.metadata.name = Some(sentinel_name.clone());
        api.create(&PostParams::default(), &sentinel)
            .await
            .map_err(|e| format!("creating the sentinel: {e}"))?;
        wait_until("the sentinel's add", LIMIT, || {
            sentinel_seen.load(Ordering::SeqCst)
        })
        .await?;
        let relist_seconds = start.elapsed().as_secs_f64();
        // every object replaced once (two index calls each), and the
        // sentinel added (one): else the backlog figure means nothing
        let (_, indexed_after) = backlog.counts();
        let calls = indexed_after - indexed_before;
        let max_backlog = (calls == 2 * spec.objects as u64 + 1).then_some(max_backlog);
        let peak = rss::peak_bytes();
        let stored = informer.store().len();
        api.delete(&sentinel_name, &DeleteParams::default())
            .await
            .map_err(|e| format!("deleting the sentinel: {e}"))?;
        if stored != spec.objects + 1 {
            return Err(format!(
                "after the relist: {stored} stored, want {} and the sentinel",
                spec.objects
            ));
        }
        Ok(json!({
            "sync_seconds": sync_seconds,
            "sync_peak_rss_bytes": sync_peak,
            "steady_rss_bytes": steady,
            "relist_peak_rss_bytes": peak,
            "relist_seconds": relist_seconds,
            "max_fifo_backlog": max_backlog,
        }))
    }
    .await;
    run.stop().await;
    outcome
}
