//! What the client adds on top of decoding: serves N ~1 KiB ConfigMaps (the
//! project's benchmark shape) from a loopback HTTP server, and times
//! `Api::list` and a watch of N `ADDED` events against a bare
//! `serde_json::from_slice` of the same bytes, in the same process.
//!
//! `cargo run --release -p kcontrol-client --example decode_overhead -- [N]`
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{
    Api, Client, Config, ListParams, ObjectList, WatchEvent, WatchParams, WatchStream,
};
use serde_json::json;

fn object(i: usize) -> serde_json::Value {
    let value = |n: u8| format!("{:x<45}", format!("value-{i}-{n}-"));
    json!({
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {
            "name": format!("cm-{i:06}"), "namespace": "bench",
            "uid": format!("6f1c2b1e-8a4d-4c6e-9d2f-{i:012x}"), "resourceVersion": (i + 1).to_string(),
            "creationTimestamp": "2026-11-21T23:00:00Z",
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

fn bodies(n: usize) -> (Bytes, Bytes) {
    let items: Vec<_> = (0..n).map(object).collect();
    let list = json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": n.to_string()}, "items": items});
    let mut events = Vec::new();
    for item in items {
        serde_json::to_writer(&mut events, &json!({"type": "ADDED", "object": item})).unwrap();
        events.push(b'\n');
    }
    (
        Bytes::from(serde_json::to_vec(&list).unwrap()),
        Bytes::from(events),
    )
}

/// 64 KiB chunks, as a chunked HTTP body arrives.
fn chunks(body: &Bytes) -> Vec<Bytes> {
    (0..body.len())
        .step_by(65536)
        .map(|at| body.slice(at..body.len().min(at + 65536)))
        .collect()
}

async fn serve(list: Bytes, events: Bytes) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (list, events) = (list.clone(), events.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
                        let body = if watch {
                            let frames = chunks(&events)
                                .into_iter()
                                .map(|c| Ok::<_, Infallible>(Frame::data(c)));
                            BodyExt::boxed(StreamBody::new(futures::stream::iter(frames)))
                        } else {
                            Full::new(list.clone()).boxed()
                        };
                        async move { Ok::<_, Infallible>(hyper::Response::new(body)) }
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            let value = std::hint::black_box(f());
            let secs = start.elapsed().as_secs_f64();
            drop(value); // freeing is not part of decoding, as in the client runs below
            secs
        })
        .fold(f64::INFINITY, f64::min)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let (list_body, watch_body) = bodies(n);
    println!(
        "{n} objects: list body {} bytes, watch body {} bytes",
        list_body.len(),
        watch_body.len()
    );
    let url = serve(list_body.clone(), watch_body.clone()).await;
    let client = Client::try_from(Config::new(url.parse().unwrap()).with_rate_limit(None)).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "bench");
    const RUNS: usize = 5;

    let bare_list = best_of(RUNS, || {
        serde_json::from_slice::<ObjectList<ConfigMap>>(&list_body).unwrap()
    });
    let mut http_list = f64::INFINITY;
    for _ in 0..RUNS {
        let start = Instant::now();
        let list = api.list(&ListParams::default()).await.unwrap();
        http_list = http_list.min(start.elapsed().as_secs_f64());
        assert_eq!(list.items.len(), n);
    }

    let bare_watch = best_of(RUNS, || {
        watch_body
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice::<WatchEvent<ConfigMap>>(line).unwrap())
            .collect::<Vec<_>>()
    });
    let mut stream_watch = f64::INFINITY;
    for _ in 0..RUNS {
        let source = futures::stream::iter(chunks(&watch_body).into_iter().map(Ok));
        let start = Instant::now();
        let events: Vec<_> = WatchStream::<ConfigMap>::new(source, 64 << 20)
            .collect()
            .await;
        let count = events.len();
        stream_watch = stream_watch.min(start.elapsed().as_secs_f64());
        assert_eq!(count, n);
    }
    let mut http_watch = f64::INFINITY;
    for _ in 0..RUNS {
        let start = Instant::now();
        let events: Vec<_> = api
            .watch(&WatchParams::default(), "0")
            .await
            .unwrap()
            .collect()
            .await;
        let count = events.len();
        http_watch = http_watch.min(start.elapsed().as_secs_f64());
        assert_eq!(count, n);
    }

    println!("{:<44} {:>10} {:>8}", "case (best of 5)", "ms", "ratio");
    let line = |name: &str, secs: f64, reference: f64| {
        println!("{name:<44} {:>10.2} {:>8.2}", secs * 1e3, secs / reference);
    };
    line("bare from_slice of the list body", bare_list, bare_list);
    line("Api::list over loopback HTTP/1.1", http_list, bare_list);
    line("bare from_slice of each watch line", bare_watch, bare_watch);
    line(
        "WatchStream over 64 KiB chunks (memory)",
        stream_watch,
        bare_watch,
    );
    line("Api::watch over loopback HTTP/1.1", http_watch, bare_watch);
}
