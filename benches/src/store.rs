//! The `store` scenario: `ThreadSafeStore` speed and memory on 100,000
//! ConfigMaps of the fixture shape.
//!
//! Speed rows (`store-insert`, `store-update`, `store-get`,
//! `store-by-index`) time single-threaded operations and, beside each, the
//! same work on a plain `HashMap` with no lock and no index as the
//! in-process reference. Memory rows come from [`memory`] (resident growth,
//! measured in a fresh child process per phase) and, with the `jemalloc`
//! feature (on by default), `parts` (where the bytes of an object go).

mod memory;
#[cfg(feature = "jemalloc")]
mod parts;

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{meta_namespace_key, Object, ThreadSafeStore, NAMESPACE_INDEX};
use serde_json::{json, Value};

use crate::fixtures;
use crate::report::{row, Report};

/// Objects in every phase.
pub const N: usize = 100_000;

/// Runs the scenario, or one memory phase when started as its child.
pub fn bench(report: &mut Report) -> Result<(), String> {
    if let Some(phase) = memory::child_phase() {
        return memory::run_child(&phase);
    }
    speed(report)?;
    memory::bench(report)?;
    #[cfg(feature = "jemalloc")]
    parts::bench(report)?;
    Ok(())
}

/// Decodes object `i` of the fixture with resourceVersion `rv`.
fn decode(i: usize, rv: u64) -> Result<ConfigMap, String> {
    serde_json::from_slice(&fixtures::configmap_json(i, rv))
        .map_err(|e| format!("fixture {i} does not decode: {e}"))
}

/// Operations per second of `ops` operations taking `secs`.
fn rate(ops: usize, secs: f64) -> f64 {
    ops as f64 / secs.max(1e-9)
}

/// Wall-clock seconds, and CPU seconds of this thread, that a run took.
/// On a shared machine the thread may run only part of the wall time;
/// CPU time is what the work itself cost.
#[derive(Clone, Copy)]
struct Took {
    wall: f64,
    cpu: f64,
}

/// CPU time this thread has run, from `/proc/thread-self/schedstat` (ns
/// precision; Linux only, `None` elsewhere).
fn thread_cpu_secs() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Times `f`, returning its result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Took) {
    let cpu_start = thread_cpu_secs();
    let start = Instant::now();
    let out = f();
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (cpu_start, thread_cpu_secs()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => wall,
    };
    (out, Took { wall, cpu })
}

/// The rate fields shared by the speed rows: wall-clock and CPU-time rates
/// of the store, and the reference's, compared by CPU time.
fn rates(ops: usize, took: Took, reference: Took) -> [(&'static str, Value); 5] {
    let cpu_rate = rate(ops, took.cpu);
    [
        ("ops_per_sec", json!(rate(ops, took.wall))),
        ("cpu_ops_per_sec", json!(cpu_rate)),
        ("cpu_share", json!(took.cpu / took.wall.max(1e-9))),
        ("reference_cpu_ops_per_sec", json!(rate(ops, reference.cpu))),
        (
            "ratio_to_reference",
            json!(cpu_rate / rate(ops, reference.cpu)),
        ),
    ]
}

/// A deterministic shuffle (xorshift64 Fisher-Yates), so lookups do not
/// walk memory in insertion order.
fn shuffled<T>(mut items: Vec<T>) -> Vec<T> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        items.swap(i, (state % (i as u64 + 1)) as usize);
    }
    items
}

fn speed_row(
    report: &mut Report,
    scenario: &str,
    ops: usize,
    took: Took,
    reference: Took,
    what: &str,
) {
    let [r1, r2, r3, r4, r5] = rates(ops, took, reference);
    report.row(row([
        ("scenario", json!(scenario)),
        ("objects", json!(N)),
        ("ops", json!(ops)),
        r1,
        r2,
        r3,
        r4,
        r5,
        ("measured", json!(what)),
    ]));
}

fn speed(report: &mut Report) -> Result<(), String> {
    let first: Vec<Arc<ConfigMap>> = (0..N)
        .map(|i| decode(i, 1).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let second: Vec<Arc<ConfigMap>> = (0..N)
        .map(|i| decode(i, 2).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let store = ThreadSafeStore::new();
    let mut reference: HashMap<String, Arc<ConfigMap>> = HashMap::new();

    let (inserted, took) = timed(|| {
        first
            .iter()
            .try_for_each(|o| store.add(Arc::clone(o)).map(drop))
    });
    inserted.map_err(|e| e.to_string())?;
    let (_, reference_took) = timed(|| {
        for o in &first {
            if let Ok(key) = meta_namespace_key(o.as_ref()) {
                reference.insert(key, Arc::clone(o));
            }
        }
    });
    speed_row(report, "store-insert", N, took, reference_took, "add() into an empty store with the namespace index; reference: key + insert into a std HashMap<String, Arc<_>>");

    let (updated, took) = timed(|| {
        second
            .iter()
            .try_for_each(|o| store.update(Arc::clone(o)).map(drop))
    });
    updated.map_err(|e| e.to_string())?;
    let (_, reference_took) = timed(|| {
        for o in &second {
            if let Ok(key) = meta_namespace_key(o.as_ref()) {
                reference.insert(key, Arc::clone(o));
            }
        }
    });
    speed_row(report, "store-update", N, took, reference_took, "update() of every object (new resourceVersion, same index values); reference: std HashMap insert");
    drop(first);

    get_speed(report, &store, &reference);
    by_index_speed(report, &store)
}

fn get_speed(
    report: &mut Report,
    store: &ThreadSafeStore<ConfigMap>,
    reference: &HashMap<String, Arc<ConfigMap>>,
) {
    const PASSES: usize = 10;
    let keys = shuffled(store.list_keys());
    let (found, took) = timed(|| {
        let mut found = 0usize;
        for _ in 0..PASSES {
            for key in &keys {
                found += usize::from(black_box(store.get_by_key(key)).is_some());
            }
        }
        found
    });
    let (ref_found, reference_took) = timed(|| {
        let mut found = 0usize;
        for _ in 0..PASSES {
            for key in &keys {
                found += usize::from(black_box(reference.get(key.as_str()).cloned()).is_some());
            }
        }
        found
    });
    debug_assert_eq!(found, ref_found);
    speed_row(report, "store-get", found, took, reference_took, "get_by_key() of every key in shuffled order, 10 passes, Arc cloned; reference: std HashMap get + Arc clone");
}

/// `by_index` on three indexes of different selectivity.
fn by_index_speed(report: &mut Report, store: &ThreadSafeStore<ConfigMap>) -> Result<(), String> {
    let err = |e: kcontrol_indexer::StoreError| e.to_string();
    store
        .add_indexer("shard", |cm: &ConfigMap| {
            cm.labels().get("shard").cloned().into_iter().collect()
        })
        .map_err(err)?;
    store
        .add_indexer("uid", |cm: &ConfigMap| {
            cm.uid().map(str::to_owned).into_iter().collect()
        })
        .map_err(err)?;
    let namespaces = vec![fixtures::NAMESPACE.to_owned()];
    let shards: Vec<String> = (0..16).map(|s| format!("s{s:02}")).collect();
    let uids = shuffled(store.list_index_values("uid").map_err(err)?);
    let cases: [(&str, &[String], usize, &str); 3] = [
        (
            NAMESPACE_INDEX,
            &namespaces,
            20,
            "namespace index, value \"bench\": every lookup returns all 100000 objects",
        ),
        (
            "shard",
            &shards,
            4,
            "label index on `shard`: 16 values, each lookup returns 6250 objects",
        ),
        (
            "uid",
            &uids,
            10,
            "unique index on metadata.uid: each lookup returns one object (shuffled order); reference for every index: a std HashMap<String, Vec<Arc<_>>> lookup + Vec clone",
        ),
    ];
    for (index, values, passes, what) in cases {
        let (result, took) = timed(|| -> Result<usize, String> {
            let mut objects = 0usize;
            for _ in 0..passes {
                for value in values {
                    objects += black_box(store.by_index(index, value).map_err(err)?).len();
                }
            }
            Ok(objects)
        });
        let objects = result?;
        // Keys of their own (as any map has), not borrowed from the queries.
        let mut reference: HashMap<String, Vec<Arc<ConfigMap>>> = HashMap::new();
        for value in store.list_index_values(index).map_err(err)? {
            let objects = store.by_index(index, &value).map_err(err)?;
            reference.insert(value, objects);
        }
        let (_, reference_took) = timed(|| {
            for _ in 0..passes {
                for value in values {
                    black_box(reference.get(value.as_str()).cloned());
                }
            }
        });
        let lookups = passes * values.len();
        let [r1, r2, r3, r4, r5] = rates(lookups, took, reference_took);
        report.row(row([
            ("scenario", json!("store-by-index")),
            ("index", json!(index)),
            ("lookups", json!(lookups)),
            ("objects_per_lookup", json!(objects / lookups.max(1))),
            r1,
            ("objects_per_sec", json!(rate(objects, took.wall))),
            r2,
            ("cpu_objects_per_sec", json!(rate(objects, took.cpu))),
            r3,
            r4,
            r5,
            ("measured", Value::from(what)),
        ]));
    }
    Ok(())
}
