//! The `event-latency` rows: from just before the server stores an update
//! to the handler's `on_update`, at a paced write rate, with the server in
//! this process (its writes are timed by the same clock as the handler);
//! and, to tell the informer's share from the server's and HTTP's, the
//! same rates through the informer alone (`path: "informer-only"`): watch
//! events handed to the reflector on a channel (no server, no HTTP), then
//! the DeltaFIFO, the store, the handler's buffer and thread.

mod channel;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_informer::ResourceEventHandlerFuncs;
use kcontrol_testserver::TestServer;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::sync::{builder, counting_handler};
use super::{runtime, wait_until, ChildSpec};
use crate::fixtures;
use crate::report::{row, Report};

/// Objects the writes cycle over.
const OBJECTS: usize = 1_000;
/// Namespace of the latency rows.
const NAMESPACE: &str = "latency";
/// Seconds of writes of each row.
const SECONDS: u64 = 3;
/// Write rates.
const RATES: [u64; 2] = [1_000, 10_000];

/// Runs the rows: each rate with paged lists and with WatchList.
pub fn bench(report: &mut Report) -> Result<(), String> {
    runtime()?.block_on(async {
        let server = TestServer::builder()
            .history_size(OBJECTS + RATES.iter().sum::<u64>() as usize * 2 * SECONDS as usize)
            .deployment_simulator(None)
            .start()
            .await
            .map_err(|e| format!("starting the testserver: {e}"))?;
        let objects = server.objects();
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
        objects
            .create("namespaces", "", ns)
            .map_err(|e| format!("creating namespace {NAMESPACE}: {e}"))?;
        objects
            .bulk_load(
                "configmaps",
                NAMESPACE,
                (0..OBJECTS).map(|i| fixtures::configmap_value(i, 0)),
            )
            .map_err(|e| format!("loading the ConfigMaps: {e}"))?;
        for watch_list in [false, true] {
            for rate in RATES {
                let lat = latencies(&server, watch_list, rate).await?;
                report.row(row([
                    ("scenario", json!("event-latency")),
                    ("events_per_sec", json!(rate)),
                    ("watchlist", json!(watch_list)),
                    ("path", json!("server+http+informer")),
                    ("events", json!(lat.len())),
                    ("p50_us", json!(percentile(&lat, 0.50))),
                    ("p99_us", json!(percentile(&lat, 0.99))),
                    ("max_us", json!(lat.last().copied().unwrap_or(0))),
                    ("measured", json!("from just before Objects::update in the in-process server to the handler's on_update (HTTP watch over loopback, reflector, DeltaFIFO, store, handler thread); writes paced by a writer thread")),
                ]));
            }
        }
        server.shutdown().await;
        for rate in RATES {
            let lat = channel::latencies(rate, SECONDS).await?;
            report.row(row([
                ("scenario", json!("event-latency")),
                ("events_per_sec", json!(rate)),
                ("watchlist", json!(false)),
                ("path", json!("informer-only")),
                ("events", json!(lat.len())),
                ("p50_us", json!(percentile(&lat, 0.50))),
                ("p99_us", json!(percentile(&lat, 0.99))),
                ("max_us", json!(lat.last().copied().unwrap_or(0))),
                ("measured", json!("from handing a decoded watch event to the reflector on a channel (no server, no HTTP) to the handler's on_add (reflector, DeltaFIFO, store, handler thread); events paced by a writer thread")),
            ]));
        }
        Ok(())
    })
}

/// Nanoseconds since `base`.
pub(super) fn nanos_since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The `seq` data value of a written object.
pub(super) fn seq_of(cm: &ConfigMap) -> Option<usize> {
    cm.data.as_ref()?.get("seq")?.parse().ok()
}

/// Latencies in microseconds of `rate * SECONDS` updates, sorted.
async fn latencies(server: &TestServer, watch_list: bool, rate: u64) -> Result<Vec<u64>, String> {
    let spec = ChildSpec {
        role: "latency".to_owned(),
        url: server.url().trim_end_matches('/').to_owned(),
        namespace: NAMESPACE.to_owned(),
        objects: OBJECTS,
        watch_list,
        malloc_conf: None,
    };
    let informer = builder(&spec)?.build();
    let total = usize::try_from(rate * SECONDS).map_err(|e| e.to_string())?;
    let base = Instant::now();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (s, l) = (Arc::clone(&sent), Arc::clone(&seen));
    let adds = Arc::default();
    let synced = counting_handler(&informer, &adds)?;
    informer
        .add_event_handler(ResourceEventHandlerFuncs::new().update_func(
            move |_, new: &Arc<ConfigMap>| {
                let now = nanos_since(base);
                if let Some(at) = seq_of(new).and_then(|seq| s.get(seq)) {
                    let latency = now.saturating_sub(at.load(Ordering::SeqCst)) / 1_000;
                    if let Ok(mut seen) = l.lock() {
                        seen.push(latency);
                    }
                }
            },
        ))
        .map_err(|e| format!("adding the handler: {e}"))?;
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    wait_until("initial sync", Duration::from_secs(60), || {
        synced.has_synced()
    })
    .await?;
    let writer = {
        let (store, sent) = (server.objects(), Arc::clone(&sent));
        tokio::task::spawn_blocking(move || -> Result<(), String> {
            let start = Instant::now();
            let step = Duration::from_nanos(1_000_000_000 / rate);
            for (seq, at) in sent.iter().enumerate() {
                let obj = update_of(seq);
                let due = start + step * u32::try_from(seq).unwrap_or(u32::MAX);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                at.store(nanos_since(base), Ordering::SeqCst);
                store
                    .update("configmaps", NAMESPACE, obj)
                    .map_err(|e| format!("update {seq}: {e}"))?;
            }
            Ok(())
        })
    };
    writer
        .await
        .map_err(|e| format!("the writer thread: {e}"))??;
    let all_seen = || seen.lock().map(|s| s.len() >= total).unwrap_or(true);
    let delivered = wait_until("delivery", Duration::from_secs(30), all_seen).await;
    shutdown.cancel();
    let _ = run.await;
    delivered?;
    let mut all = seen.lock().map(|s| s.clone()).unwrap_or_default();
    all.sort_unstable();
    Ok(all)
}

/// Write `seq`: object `seq mod OBJECTS` with `data.seq`, unconditional
/// (no resourceVersion or uid).
fn update_of(seq: usize) -> Value {
    let mut obj = fixtures::configmap_value(seq % OBJECTS, 0);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("uid");
    }
    if let Some(data) = obj.get_mut("data").and_then(Value::as_object_mut) {
        data.insert("seq".to_owned(), json!(seq.to_string()));
    }
    obj
}

/// The value at quantile `p` of sorted `values` (nearest rank).
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}
