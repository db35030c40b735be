//! How much a reflector adds on top of decoding: N ConfigMaps of about
//! 1 KiB each (the benchmark shape), measured four ways in one process:
//!
//! 1. a bare `serde_json` decode of the list bytes into `ObjectList<ConfigMap>`;
//! 2. the streaming list decoder (`ListStream`) over the same bytes in
//!    64 KiB chunks, each object dropped once decoded;
//! 3. a reflector's initial sync from the in-process testserver over
//!    loopback HTTP (list at `"0"`), popped into a `ThreadSafeStore`;
//! 4. the same with WatchList;
//!
//! then a relist of everything into the full store (forced by a 410).
//!
//! ```sh
//! cargo run --release -p kcontrol-reflector --example sync -- 100000
//! ```
//!
//! `SYNC_WATCH_LIST_FIRST=1` runs the WatchList sync first (the first sync
//! of the process also pays for fresh memory); `SYNC_TRACE=1` prints when
//! lists start and finish and each backoff.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use kcontrol_reflector::WatchConfig;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use kcontrol_client::{Api, Client, Config, ListStream, ObjectList};
use kcontrol_deltafifo::{Delta, DeltaFifo, PopError, ProcessError};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::ThreadSafeStore;
use kcontrol_reflector::{Reflector, ReflectorConfig, ReflectorMetrics};
use kcontrol_testserver::TestServer;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const NS: &str = "bench";

/// A ConfigMap of about 1 KiB of compact JSON.
fn object(i: usize) -> Value {
    let value = |k: usize| format!("value-{k}-{i:08}-{}", "x".repeat(24));
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": format!("cm-{i:06}"), "namespace": NS,
            "labels": {"app": "bench", "shard": format!("s{:02}", i % 16), "tier": "bench"},
            "annotations": {
                "bench.example.com/note": "synthetic object for informer memory and sync-time baselines",
                "bench.example.com/owner": "loader"
            },
            "managedFields": [{"manager": "bench-loader", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-21T23:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:alpha": {}, "f:beta": {}, "f:delta": {}, "f:gamma": {}},
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:shard": {}, "f:tier": {}}}}}]
        },
        "data": {"alpha": value(1), "beta": value(2), "delta": value(4), "gamma": value(3)}
    })
}

fn seconds(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// Starts a reflector + consumer; returns when the consumer has synced.
async fn sync(url: &str, watch_list: bool, server: &TestServer) -> (Duration, Duration, usize) {
    let client = Client::new(Config::new(url.parse().unwrap()).with_rate_limit(None)).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let store = Arc::new(ThreadSafeStore::<ConfigMap>::new());
    let fifo = DeltaFifo::<ConfigMap>::builder()
        .known_objects(store.clone())
        .build();
    let finished = Arc::new(ListsFinished::default());
    let reflector = Arc::new(Reflector::new(
        Arc::new(api),
        fifo.clone(),
        ReflectorConfig::default()
            .watch_config(WatchConfig::default().use_watch_list(watch_list))
            .metrics(finished.clone()),
    ));
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let run = tokio::spawn({
        let (reflector, shutdown) = (reflector.clone(), shutdown.clone());
        async move { reflector.run(shutdown).await }
    });
    let consumer = tokio::spawn({
        let (fifo, store) = (fifo.clone(), store.clone());
        async move {
            loop {
                let r = fifo
                    .pop_async(|deltas, _| {
                        for d in deltas.iter() {
                            match d {
                                Delta::Deleted(_) => drop(store.delete_by_key(deltas.key())),
                                other => drop(store.update(other.object().clone())),
                            }
                        }
                        Ok::<_, ProcessError<Infallible>>(())
                    })
                    .await;
                if matches!(r, Err(PopError::Closed)) {
                    return;
                }
            }
        }
    });
    while !fifo.has_synced() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let synced = started.elapsed();
    // a relist of everything into the full store
    let relist_started = Instant::now();
    if std::env::var_os("SYNC_TRACE").is_some() {
        println!("  relist forced at {relist_started:?}");
    }
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    while finished.0.load(Ordering::SeqCst) < 2 || !fifo.is_empty() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // from the start of the relist (after the reflector's backoff) until
    // the consumer has processed it
    let relist = finished
        .1
        .lock()
        .unwrap()
        .unwrap_or(relist_started)
        .elapsed();
    let stored = store.list_keys().len();
    shutdown.cancel();
    run.await.unwrap();
    fifo.close();
    consumer.await.unwrap();
    (synced, relist, stored)
}

/// Counts finished lists (a WatchList's initial events count as one) and
/// notes when the last relist started.
#[derive(Default)]
struct ListsFinished(AtomicU64, std::sync::Mutex<Option<Instant>>);

impl ReflectorMetrics for ListsFinished {
    fn list_started(&self, relist: bool) {
        if relist {
            *self.1.lock().unwrap() = Some(Instant::now());
        }
        if std::env::var_os("SYNC_TRACE").is_some() {
            println!("  list started (relist {relist}) at {:?}", Instant::now());
        }
    }
    fn list_finished(&self, items: u64, elapsed: Duration) {
        if std::env::var_os("SYNC_TRACE").is_some() {
            println!(
                "  list of {items} finished after {elapsed:?} at {:?}",
                Instant::now()
            );
        }
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn backoff(&self, delay: Duration) {
        if std::env::var_os("SYNC_TRACE").is_some() {
            println!("  backoff {delay:?}");
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let items: Vec<Value> = (0..n).map(object).collect();
    let body = serde_json::to_vec(&json!({"kind": "ConfigMapList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "1"}, "items": items}))
    .unwrap();
    println!(
        "{n} ConfigMaps, {:.1} MB of list JSON ({} bytes each)",
        body.len() as f64 / 1e6,
        body.len() / n.max(1)
    );

    let t = Instant::now();
    let list: ObjectList<ConfigMap> = serde_json::from_slice(&body).unwrap();
    let bare = t.elapsed();
    assert_eq!(list.items.len(), n);
    drop(list);

    let chunks: Vec<Result<Bytes, kcontrol_client::Error>> = body
        .chunks(64 * 1024)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let t = Instant::now();
    let mut stream = ListStream::<ConfigMap>::new(futures::stream::iter(chunks), "list", 1 << 26);
    let mut count = 0;
    while let Some(item) = stream.next().await {
        drop(item.unwrap());
        count += 1;
    }
    let streamed = t.elapsed();
    assert_eq!(count, n);

    let server = TestServer::builder()
        .deployment_simulator(None)
        .request_log_capacity(0)
        .start()
        .await
        .unwrap();
    server
        .objects()
        .bulk_load("configmaps", NS, (0..n).map(object))
        .unwrap();
    let client =
        Client::new(Config::new(server.url().parse().unwrap()).with_rate_limit(None)).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let t = Instant::now();
    let mut page = api
        .list_stream(&kcontrol_client::ListParams::default().resource_version("0"))
        .await
        .unwrap();
    let mut count = 0;
    while let Some(item) = page.next().await {
        drop(item.unwrap());
        count += 1;
    }
    let http_stream = t.elapsed();
    assert_eq!(count, n);
    // the first sync of the process also pays for fresh memory (page
    // faults); SYNC_WATCH_LIST_FIRST=1 swaps the order to see it
    let watch_list_first = std::env::var_os("SYNC_WATCH_LIST_FIRST").is_some();
    let mut results = Vec::new();
    for watch_list in [watch_list_first, !watch_list_first] {
        let (synced, relisted, stored) = sync(server.url(), watch_list, &server).await;
        assert_eq!(stored, n);
        results.push((watch_list, synced, relisted));
    }
    results.sort_by_key(|r| r.0);
    let [(_, list_sync, list_relist), (_, wl_sync, wl_relist)] = results[..] else {
        unreachable!("two runs");
    };

    let ratio = |d: Duration| d.as_secs_f64() / bare.as_secs_f64();
    println!("{:<48} {:>10} {:>8}", "what", "time", "× bare");
    for (what, d) in [
        ("bare decode of the list bytes (reference)", bare),
        ("ListStream decode, 64 KiB chunks", streamed),
        ("list_stream over HTTP, objects dropped", http_stream),
        ("reflector sync over HTTP (list), into a store", list_sync),
        ("reflector relist into the full store (410)", list_relist),
        ("reflector sync over HTTP (WatchList)", wl_sync),
        ("WatchList relist into the full store (410)", wl_relist),
    ] {
        println!("{what:<48} {:>10} {:>8.2}", seconds(d), ratio(d));
    }
    server.shutdown().await;
}
