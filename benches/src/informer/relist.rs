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
//! no server memory in them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Api, Client, DeleteParams, PostParams};
use kcontrol_informer::ResourceEventHandlerFuncs;
use kcontrol_reflector::ReflectorMetrics;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::server::ServerProcess;
use super::sync::{builder, counting_handler};
use super::{bytes_field, client, field, run_child_role, wait_until, ChildSpec};
use crate::report::{row, Report};
use crate::rss;

/// Objects in the store.
const OBJECTS: usize = 100_000;
/// Namespace of the objects.
const NAMESPACE: &str = "relist";
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
    for watch_list in [false, true] {
        let spec = ChildSpec {
            role: "relist".to_owned(),
            url: server.url().to_owned(),
            namespace: NAMESPACE.to_owned(),
            objects: OBJECTS,
            watch_list,
        };
        let out = spec.run("relist")?;
        report.row(relist_row(&out, watch_list)?);
    }
    Ok(())
}

fn relist_row(
    out: &HashMap<String, Value>,
    watch_list: bool,
) -> Result<crate::report::Row, String> {
    let steady = bytes_field(out, "steady_rss_bytes")?;
    let peak = bytes_field(out, "relist_peak_rss_bytes")?;
    Ok(row([
        ("scenario", json!("relist")),
        ("objects", json!(OBJECTS)),
        ("watchlist", json!(watch_list)),
        ("steady_rss_bytes", json!(steady)),
        ("relist_peak_rss_bytes", json!(peak)),
        ("ratio", json!(peak as f64 / steady as f64)),
        ("relist_seconds", json!(field(out, "relist_seconds")?)),
        ("sync_seconds", json!(field(out, "sync_seconds")?)),
        ("sync_peak_rss_bytes", json!(bytes_field(out, "sync_peak_rss_bytes")?)),
        ("measured", json!("informer alone in a fresh child process (server in another): steady = VmRSS 3 s after the initial sync; peak = VmHWM from a 410 ERROR on the re-watch until a sentinel created after the relist reaches the handler")),
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
    let informer = builder(spec)?
        .reflector_metrics(Arc::clone(&metrics) as Arc<dyn ReflectorMetrics>)
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
    let shutdown = CancellationToken::new();
    let start = Instant::now();
    let run = tokio::spawn({
        let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    let outcome = async {
        wait_until("initial sync", LIMIT, || synced.has_synced()).await?;
        let sync_seconds = start.elapsed().as_secs_f64();
        let sync_peak = rss::peak_bytes();
        tokio::time::sleep(SETTLE).await;
        let steady = rss::current_bytes();
        let client = client(&spec.url)?;
        rss::reset_peak();
        let start = Instant::now();
        admin(&client, "/__admin/expire?watches=1").await?;
        admin(&client, "/__admin/close-watches").await?;
        wait_until("relist", LIMIT, || {
            metrics.relists_done.load(Ordering::SeqCst) > 0
        })
        .await?;
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
        }))
    }
    .await;
    shutdown.cancel();
    let _ = run.await;
    outcome
}
