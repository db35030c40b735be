//! Measures what the benchmark harness will: a 100,000-object list served
//! as JSON (MB/s) and watch events delivered to one watcher (events/s),
//! with objects shaped like `shared/fixtures/configmap-1k.json`.
//!
//! `cargo run --release -p kcontrol-testserver --example server_throughput`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kcontrol_testserver::TestServer;
use serde_json::{json, Value};
use std::time::Instant;

const OBJECTS: usize = 100_000;

fn fixture(i: usize) -> Value {
    let x = "x".repeat(34);
    json!({
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {
            "name": format!("cm-{i:06}"), "namespace": "bench",
            "labels": {"app": "bench", "shard": format!("s{}", i % 16), "tier": "bench"},
            "annotations": {"bench.example.com/note": "synthetic object for informer memory and sync-time baselines", "bench.example.com/owner": "loader"},
            "managedFields": [{"manager": "bench-loader", "operation": "Update", "apiVersion": "v1", "time": "2026-11-21T23:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:alpha": {}, "f:beta": {}, "f:delta": {}, "f:gamma": {}},
                    "f:metadata": {"f:annotations": {".": {}, "f:bench.example.com/note": {}, "f:bench.example.com/owner": {}},
                        "f:labels": {".": {}, "f:app": {}, "f:shard": {}, "f:tier": {}}}}}]
        },
        "data": {"alpha": format!("value-{i}-1-{x}"), "beta": format!("value-{i}-2-{x}"), "delta": format!("value-{i}-4-{x}"), "gamma": format!("value-{i}-3-{x}")}
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = TestServer::builder()
        .history_size(OBJECTS * 3)
        .request_log_capacity(0)
        .start()
        .await
        .unwrap();
    let objects = server.objects();
    objects
        .create(
            "namespaces",
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}),
        )
        .unwrap();
    let before_load = objects.resource_version();
    let t = Instant::now();
    objects
        .bulk_load("configmaps", "bench", (0..OBJECTS).map(fixture))
        .unwrap();
    println!("bulk_load {OBJECTS} objects: {:.2?}", t.elapsed());

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("{}/api/v1/namespaces/bench/configmaps", server.url());
    for run in 0..5 {
        let t = Instant::now();
        let resp = client.get(url.parse().unwrap()).await.unwrap();
        let mut body = resp.into_body();
        let mut bytes = 0usize;
        while let Some(f) = body.frame().await {
            if let Ok(d) = f.unwrap().into_data() {
                bytes += d.len();
            }
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "list run {run}: {bytes} bytes in {:.1} ms = {:.0} MB/s",
            s * 1e3,
            bytes as f64 / s / 1e6
        );
    }

    // replay: every event of the bulk load, from history
    let watch_url = format!("{url}?watch=true&resourceVersion={before_load}");
    let t = Instant::now();
    let resp = client.get(watch_url.parse().unwrap()).await.unwrap();
    let mut body = resp.into_body();
    let mut events = 0usize;
    while events < OBJECTS {
        let Some(f) = body.frame().await else { break };
        if let Ok(d) = f.unwrap().into_data() {
            events += d.iter().filter(|b| **b == b'\n').count();
        }
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "watch replay: {events} events in {:.1} ms = {:.0} events/s",
        s * 1e3,
        events as f64 / s
    );
    drop(body);

    // live: one writer thread updates while one watcher receives
    let start = objects.resource_version();
    let resp = client
        .get(
            format!("{url}?watch=true&resourceVersion={start}")
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
    let mut body = resp.into_body();
    let writes = 100_000;
    let writer_objects = objects.clone();
    let t = Instant::now();
    let writer = std::thread::spawn(move || {
        for i in 0..writes {
            let mut o = fixture(i % OBJECTS);
            o["data"]["alpha"] = json!(format!("changed-{i}"));
            writer_objects.update("configmaps", "bench", o).unwrap();
        }
    });
    let mut events = 0usize;
    while events < writes {
        let Some(f) = body.frame().await else { break };
        if let Ok(d) = f.unwrap().into_data() {
            events += d.iter().filter(|b| **b == b'\n').count();
        }
    }
    let s = t.elapsed().as_secs_f64();
    writer.join().unwrap();
    println!(
        "watch live (writer in the same process): {events} events in {:.1} ms = {:.0} events/s",
        s * 1e3,
        events as f64 / s
    );
    server.shutdown().await;
}
