//! What a DeltaFifo adds to an informer's initial sync: N ConfigMaps of
//! about 1 KiB of JSON (the project's benchmark shape) are decoded on a
//! producer thread, as the reflector does, and handed to a consumer thread
//! that stores them in a map, as the informer does. Printed beside, in the
//! same process: the bare decode, and the same hand-off over a plain
//! `std::sync::mpsc` channel. Wall time and, on Linux, the process's CPU
//! time (all threads; far less disturbed by other load on a shared machine)
//! are printed per object; each run is repeated and the best kept.
//!
//! ```sh
//! cargo run --release -p kcontrol-deltafifo --example fifo_throughput [N]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use kcontrol_deltafifo::{DeltaFifo, PopError, ProcessError};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::meta_namespace_key;
use serde_json::json;

/// Object `i` as about 1 KiB of compact JSON.
fn object_json(i: usize) -> Vec<u8> {
    let value = |n: u8| format!("{:x<45}", format!("value-{i}-{n}-"));
    serde_json::to_vec(&json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": format!("cm-{i:06}"),
            "namespace": "bench",
            "uid": format!("6f1c2b1e-8a4d-4c6e-9d2f-{i:012x}"),
            "resourceVersion": (1000 + i).to_string(),
            "creationTimestamp": "2026-11-21T23:00:00Z",
            "labels": { "app": "bench", "shard": format!("s{:02}", i % 16), "tier": "bench" },
            "annotations": {
                "bench.example.com/note": "synthetic object for informer memory and sync-time baselines",
                "bench.example.com/owner": "loader"
            },
            "managedFields": [{
                "manager": "bench-loader", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-21T23:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:data": { ".": {}, "f:alpha": {}, "f:beta": {}, "f:delta": {}, "f:gamma": {} },
                    "f:metadata": {
                        "f:annotations": { ".": {}, "f:bench.example.com/note": {}, "f:bench.example.com/owner": {} },
                        "f:labels": { ".": {}, "f:app": {}, "f:shard": {}, "f:tier": {} }
                    }
                }
            }]
        },
        "data": { "alpha": value(1), "beta": value(2), "delta": value(4), "gamma": value(3) }
    }))
    .unwrap()
}

/// CPU time used by the whole process so far (Linux; zero elsewhere).
fn cpu_time() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 12th and 13th of them, in clock ticks (100 per second on Linux).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Runs `f` `times` times; the best wall and best CPU time.
fn best(times: usize, f: &dyn Fn()) -> (Duration, Duration) {
    let mut wall = Duration::MAX;
    let mut cpu = Duration::MAX;
    for _ in 0..times {
        let (w0, c0) = (Instant::now(), cpu_time());
        f();
        wall = wall.min(w0.elapsed());
        cpu = cpu.min(cpu_time().saturating_sub(c0));
    }
    (wall, cpu)
}

fn decode(bytes: &[u8]) -> Arc<ConfigMap> {
    Arc::new(serde_json::from_slice(bytes).unwrap())
}

/// The bare decode into a Vec, on one thread.
fn bare(input: &[Vec<u8>]) {
    let decoded: Vec<Arc<ConfigMap>> = input.iter().map(|b| decode(b)).collect();
    assert_eq!(decoded.len(), input.len());
}

/// Decode → channel → map keyed like a store.
fn channel(input: &[Vec<u8>]) {
    let (tx, rx) = mpsc::channel::<Arc<ConfigMap>>();
    let consumer = thread::spawn(move || {
        let mut store = HashMap::new();
        for obj in rx {
            store.insert(meta_namespace_key(obj.as_ref()).unwrap(), obj);
        }
        store.len()
    });
    for bytes in input {
        tx.send(decode(bytes)).unwrap();
    }
    drop(tx);
    assert_eq!(consumer.join().unwrap(), input.len());
}

/// Decode → DeltaFifo (streaming replace, or watch adds) → map.
fn fifo(input: &[Vec<u8>], streaming: bool) {
    let fifo = DeltaFifo::<ConfigMap>::builder().build();
    let consumer = {
        let fifo = Arc::clone(&fifo);
        thread::spawn(move || {
            let mut store = HashMap::new();
            loop {
                let popped = fifo.pop(|deltas, _| {
                    store.insert(
                        deltas.key().to_owned(),
                        Arc::clone(deltas.newest().object()),
                    );
                    Ok::<_, ProcessError<Infallible>>(())
                });
                if matches!(popped, Err(PopError::Closed)) {
                    return store.len();
                }
            }
        })
    };
    if streaming {
        let mut relist = fifo.begin_replace().unwrap();
        for bytes in input {
            relist.add(decode(bytes)).unwrap();
        }
        relist.finish("1").unwrap();
    } else {
        for bytes in input {
            fifo.add(decode(bytes)).unwrap();
        }
    }
    fifo.close();
    assert_eq!(consumer.join().unwrap(), input.len());
    assert!(fifo.has_synced());
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let input: Vec<Vec<u8>> = (0..n).map(object_json).collect();
    let avg = input.iter().map(Vec::len).sum::<usize>() / n;
    println!("{n} objects, {avg} bytes of JSON each; best of 3 runs");
    let per = |d: Duration| d.as_nanos() as f64 / n as f64;
    let (wall0, cpu0) = best(3, &|| bare(&input));
    println!(
        "{:<36} {:>7.0} ns wall {:>7.0} ns cpu per object",
        "bare decode",
        per(wall0),
        per(cpu0)
    );
    let runs: [(&str, &dyn Fn()); 3] = [
        ("decode -> mpsc channel -> map", &|| channel(&input)),
        ("decode -> deltafifo stream -> map", &|| fifo(&input, true)),
        ("decode -> deltafifo add -> map", &|| fifo(&input, false)),
    ];
    for (name, run) in runs {
        let (wall, cpu) = best(3, run);
        println!(
            "{name:<36} {:>7.0} ns wall {:>7.0} ns cpu per object  ({:.2}x / {:.2}x bare decode)",
            per(wall),
            per(cpu),
            wall.as_secs_f64() / wall0.as_secs_f64(),
            cpu.as_secs_f64() / cpu0.as_secs_f64(),
        );
    }
}
