//! The `event-latency` rows: from just before the server stores an update
//! to the handler's `on_update`, at a paced write rate, with the server in
//! this process (its writes are timed by the same clock as the handler);
//! and, to tell the informer's share from the server's and HTTP's, the
//! same rates through the informer alone (`path: "informer-only"`): watch
//! events handed to the reflector on a channel (no server, no HTTP), then
//! the DeltaFIFO, the store, the handler's buffer and thread.

mod channel;
mod record;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_informer::ResourceEventHandlerFuncs;
use kcontrol_testserver::TestServer;
use serde_json::{json, Value};

use self::record::Latencies;
use super::running::Running;
use super::sync::{builder, counting_handler};
use super::{runtime, wait_until, ChildSpec};
use crate::fixtures;
use crate::report::{row, Report, Row};

/// Objects the writes cycle over.
const OBJECTS: usize = 1_000;
/// Namespace of the latency rows.
const NAMESPACE: &str = "latency";
/// Seconds of writes of each row.
const SECONDS: u64 = 3;
/// Write rates.
const RATES: [u64; 2] = [1_000, 10_000];
/// Longest wait for the initial sync.
const SYNC_LIMIT: Duration = Duration::from_secs(60);
/// Longest wait, after the last write, for every write to reach the handler.
const DELIVERY_LIMIT: Duration = Duration::from_secs(30);

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
                report.row(latency_row(
                    rate,
                    watch_list,
                    "server+http+informer",
                    &lat,
                    VIA_SERVER,
                ));
            }
        }
        server.shutdown().await;
        for rate in RATES {
            let lat = channel::latencies(rate, SECONDS).await?;
            report.row(latency_row(
                rate,
                false,
                "informer-only",
                &lat,
                INFORMER_ONLY,
            ));
        }
        Ok(())
    })
}

/// What the `server+http+informer` rows measure.
const VIA_SERVER: &str = "from just before Objects::update in the in-process server to the handler's on_update (HTTP watch over loopback, reflector, DeltaFIFO, store, handler thread); writes paced by a writer thread";
/// What the `informer-only` rows measure.
const INFORMER_ONLY: &str = "from handing a decoded watch event to the reflector on a channel (no server, no HTTP) to the handler's on_add (reflector, DeltaFIFO, store, handler thread); events paced by a writer thread";

/// One row of sorted latencies `lat`, in microseconds.
fn latency_row(rate: u64, watch_list: bool, path: &str, lat: &[u64], measured: &str) -> Row {
    row([
        ("scenario", json!("event-latency")),
        ("events_per_sec", json!(rate)),
        ("watchlist", json!(watch_list)),
        ("path", json!(path)),
        ("events", json!(lat.len())),
        ("p50_us", json!(percentile(lat, 0.50))),
        ("p99_us", json!(percentile(lat, 0.99))),
        ("max_us", json!(lat.last().copied().unwrap_or(0))),
        ("measured", json!(measured)),
    ])
}

/// Latencies in microseconds of `rate * SECONDS` updates, sorted.
async fn latencies(server: &TestServer, watch_list: bool, rate: u64) -> Result<Vec<u64>, String> {
    let spec = ChildSpec {
        role: "latency".to_owned(),
        url: server.url().trim_end_matches('/').to_owned(),
        namespace: NAMESPACE.to_owned(),
        objects: OBJECTS,
        watch_list,
        kind: "full",
        malloc_conf: None,
    };
    let informer = builder(&spec)?.build();
    let total = usize::try_from(rate * SECONDS).map_err(|e| e.to_string())?;
    let lat = Arc::new(Latencies::new(total));
    let adds = Arc::default();
    let synced = counting_handler(&informer, &adds)?;
    informer
        .add_event_handler(ResourceEventHandlerFuncs::new().update_func({
            let lat = Arc::clone(&lat);
            move |_, new: &Arc<ConfigMap>| lat.record(new)
        }))
        .map_err(|e| format!("adding the handler: {e}"))?;
    let run = Running::synced(&informer, &synced, SYNC_LIMIT).await?;
    let writer = {
        let (store, lat) = (server.objects(), Arc::clone(&lat));
        tokio::task::spawn_blocking(move || {
            lat.pace(rate, (0..total).map(update_of), |seq, obj| {
                store
                    .update("configmaps", NAMESPACE, obj)
                    .map(drop)
                    .map_err(|e| format!("update {seq}: {e}"))
            })
        })
    };
    delivered(writer, &lat, run).await
}

/// Waits for `writer`, then for every write to reach the handler, and
/// stops the informer.
async fn delivered(
    writer: tokio::task::JoinHandle<Result<(), String>>,
    lat: &Latencies,
    run: Running,
) -> Result<Vec<u64>, String> {
    writer
        .await
        .map_err(|e| format!("the writer thread: {e}"))??;
    let delivered = wait_until("delivery", DELIVERY_LIMIT, || lat.all_seen()).await;
    run.stop().await;
    delivered?;
    Ok(lat.take())
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
