//! Figures of an informer against the in-process API server over loopback
//! HTTP, each beside a reference measured in the same process:
//!
//! - initial sync of N ~1 KiB ConfigMaps (the project's benchmark shape),
//!   until a handler's registration has synced (store filled, handler has
//!   seen every object), with paged lists and with WatchList, beside a bare
//!   `serde_json` decode of the same objects;
//! - watch event to handler latency (p50, p99) at a given write rate: from
//!   just before the server stores an update to the handler's `on_update`;
//! - the same latency through the informer alone: watch events handed to
//!   the reflector by a channel (no HTTP, no server), then the DeltaFIFO,
//!   the store, the handler's buffer and thread.
//!
//! The server runs in the same process (it serves from memory and shares
//! the two cores), so the sync time includes serving the list.
//!
//! `cargo run --release -p kcontrol-informer --example informer_figures -- [N] [events/s]`
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::StreamExt;
use kcontrol_client::{Api, Client, Config, ListParams, ObjectList, WatchEvent, WatchParams};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_informer::{HandlerRegistration, ResourceEventHandlerFuncs, SharedIndexInformer};
use kcontrol_reflector::{ListerWatcher, WatchEventStream};
use kcontrol_testserver::TestServer;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn object(i: usize) -> serde_json::Value {
    let value = |n: u8| format!("{:x<45}", format!("value-{i}-{n}-"));
    json!({
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {
            "name": format!("cm-{i:06}"), "namespace": "bench",
            "labels": {"app": "bench", "shard": format!("s{:02}", i % 16), "tier": "bench"},
            "annotations": {"bench.example.com/note": "synthetic object for informer memory and sync-time baselines",
                            "bench.example.com/owner": "loader"},
            "managedFields": [{"manager": "bench-loader", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-21T23:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:alpha": {}, "f:beta": {}, "f:delta": {}, "f:gamma": {}},
                    "f:metadata": {"f:annotations": {".": {}, "f:bench.example.com/note": {}, "f:bench.example.com/owner": {}},
                                   "f:labels": {".": {}, "f:app": {}, "f:shard": {}, "f:tier": {}}}}}]
        },
        "data": {"alpha": value(1), "beta": value(2), "delta": value(4), "gamma": value(3)}
    })
}

/// The list body the server would send, from its stored objects.
fn list_body(server: &TestServer) -> Vec<u8> {
    let list = server.objects().list("configmaps", Some("bench")).unwrap();
    let mut body = format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{}"}},"items":["#,
        list.resource_version
    )
    .into_bytes();
    for (i, item) in list.items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item.json());
    }
    body.extend_from_slice(b"]}");
    body
}

async fn sync_once(server: &TestServer, watch_list: bool) -> Duration {
    let client = Client::new(Config::new(server.url().parse().unwrap())).unwrap();
    let informer = SharedIndexInformer::builder(Api::<ConfigMap>::namespaced(client, "bench"))
        .use_watch_list(watch_list)
        .build();
    let reg = informer
        .add_event_handler(ResourceEventHandlerFuncs::<ConfigMap>::new())
        .unwrap();
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let run = tokio::spawn({
        let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    wait_synced(&reg).await;
    let elapsed = started.elapsed();
    shutdown.cancel();
    run.await.unwrap();
    elapsed
}

async fn wait_synced(reg: &HandlerRegistration) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !reg.has_synced() {
        assert!(Instant::now() < deadline, "no sync within 10 minutes");
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// Latencies in microseconds from before each write to its handler call.
async fn latencies(server: &TestServer, objects: usize, rate: u64, seconds: u64) -> Vec<u64> {
    let client = Client::new(Config::new(server.url().parse().unwrap())).unwrap();
    let informer =
        SharedIndexInformer::builder(Api::<ConfigMap>::namespaced(client, "bench")).build();
    let total = usize::try_from(rate * seconds).unwrap();
    let base = Instant::now();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (s, l) = (Arc::clone(&sent), Arc::clone(&seen));
    let reg = informer
        .add_event_handler(ResourceEventHandlerFuncs::new().update_func(
            move |_, new: &Arc<ConfigMap>| {
                let now = u64::try_from(base.elapsed().as_nanos()).unwrap();
                let seq = new
                    .data
                    .as_ref()
                    .and_then(|d| d.get("seq"))
                    .and_then(|s| s.parse::<usize>().ok());
                if let Some(at) = seq.and_then(|seq| s.get(seq)) {
                    l.lock().push((now - at.load(Ordering::SeqCst)) / 1_000);
                }
            },
        ))
        .unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    wait_synced(&reg).await;
    let writer = {
        let (store, sent) = (server.objects(), Arc::clone(&sent));
        tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            for seq in 0..total {
                let due = start + Duration::from_nanos(1_000_000_000 / rate * seq as u64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let mut obj = object(seq % objects);
                obj["data"]["seq"] = json!(seq.to_string());
                sent[seq].store(
                    u64::try_from(base.elapsed().as_nanos()).unwrap(),
                    Ordering::SeqCst,
                );
                store.update("configmaps", "bench", obj).unwrap();
            }
        })
    };
    writer.await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().len() < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    run.await.unwrap();
    let mut all = seen.lock().clone();
    all.sort_unstable();
    all
}

/// A lister-watcher whose list is empty and whose watch delivers what the
/// test sends on a channel: the informer's path without HTTP.
struct ChannelWatch {
    events: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<ConfigMap>>>,
}

impl ListerWatcher<ConfigMap> for ChannelWatch {
    fn list<'a>(
        &'a self,
        _: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<ConfigMap>, kcontrol_client::Error>> {
        Box::pin(async {
            let list = json!({"metadata": {"resourceVersion": "1"}, "items": []});
            Ok(serde_json::from_value(list).unwrap())
        })
    }

    fn watch<'a>(
        &'a self,
        _: &'a WatchParams,
        _: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<ConfigMap>, kcontrol_client::Error>> {
        let events = self.events.lock().take();
        Box::pin(async move {
            let stream: WatchEventStream<ConfigMap> = match events {
                Some(rx) => tokio_stream_from(rx)
                    .map(|cm| Ok(WatchEvent::Added(cm)))
                    .boxed(),
                None => futures::stream::pending().boxed(),
            };
            Ok(stream)
        })
    }
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Latencies in microseconds from handing an event to the reflector to the
/// handler's `on_add`.
async fn informer_only_latencies(rate: u64, seconds: u64) -> Vec<u64> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let informer = SharedIndexInformer::builder(ChannelWatch {
        events: Mutex::new(Some(rx)),
    })
    .build();
    let total = usize::try_from(rate * seconds).unwrap();
    let base = Instant::now();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (s, l) = (Arc::clone(&sent), Arc::clone(&seen));
    let reg = informer
        .add_event_handler(ResourceEventHandlerFuncs::new().add_func(
            move |cm: &Arc<ConfigMap>, _| {
                let now = u64::try_from(base.elapsed().as_nanos()).unwrap();
                let seq = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("seq"))
                    .and_then(|s| s.parse::<usize>().ok());
                if let Some(at) = seq.and_then(|seq| s.get(seq)) {
                    l.lock().push((now - at.load(Ordering::SeqCst)) / 1_000);
                }
            },
        ))
        .unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    wait_synced(&reg).await;
    let objects: Vec<ConfigMap> = (0..total)
        .map(|seq| {
            let mut obj = object(seq);
            obj["metadata"]["resourceVersion"] = json!((seq + 2).to_string());
            obj["data"]["seq"] = json!(seq.to_string());
            serde_json::from_value(obj).unwrap()
        })
        .collect();
    let writer = {
        let sent = Arc::clone(&sent);
        std::thread::spawn(move || {
            let start = Instant::now();
            for (seq, obj) in objects.into_iter().enumerate() {
                let due = start + Duration::from_nanos(1_000_000_000 / rate * seq as u64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                sent[seq].store(
                    u64::try_from(base.elapsed().as_nanos()).unwrap(),
                    Ordering::SeqCst,
                );
                tx.send(obj).unwrap();
            }
        })
    };
    tokio::task::spawn_blocking(move || writer.join().unwrap())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().len() < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    run.await.unwrap();
    let mut all = seen.lock().clone();
    all.sort_unstable();
    all
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let rate: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let server = TestServer::builder()
        .history_size(200_000)
        .start()
        .await
        .unwrap();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    server.objects().create("namespaces", "", ns).unwrap();
    server
        .objects()
        .bulk_load("configmaps", "bench", (0..n).map(object))
        .unwrap();

    let body = list_body(&server);
    let started = Instant::now();
    let decoded: ObjectList<ConfigMap> = serde_json::from_slice(&body).unwrap();
    let decode = started.elapsed();
    assert_eq!(decoded.items.len(), n);
    drop(decoded);

    let list = sync_once(&server, false).await;
    let watch_list = sync_once(&server, true).await;
    println!("objects {n}, list body {} bytes", body.len());
    println!(
        "{:<34} {:>10}",
        "bare decode of the same objects",
        format!("{:.3} s", decode.as_secs_f64())
    );
    for (what, t) in [
        ("informer sync, paged list", list),
        ("informer sync, WatchList", watch_list),
    ] {
        println!(
            "{what:<34} {:>10}  ({:.2}x the decode)",
            format!("{:.3} s", t.as_secs_f64()),
            t.as_secs_f64() / decode.as_secs_f64()
        );
    }
    let lat = latencies(&server, n.min(1_000), rate, 3).await;
    println!(
        "event -> handler at {rate}/s: {} events, p50 {} us, p99 {} us, max {} us",
        lat.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0)
    );
    server.shutdown().await;
    let lat = informer_only_latencies(rate, 3).await;
    println!(
        "informer only (no HTTP) at {rate}/s: {} events, p50 {} us, p99 {} us, max {} us",
        lat.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0)
    );
}
