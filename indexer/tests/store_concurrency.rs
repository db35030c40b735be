//! IX4 under load: 8 threads, 1,000,000 operations in total (2 writers, 6
//! readers) on one store. Every read checks what it got against the index
//! it came from, and readers regularly check the whole store under one read
//! lock. A reader never waits for another reader.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{meta_namespace_key, Object, ThreadSafeStore, NAMESPACE_INDEX};

const THREADS: usize = 8;
const WRITERS: usize = 2;
const TOTAL_OPS: usize = 1_000_000;
const NAMESPACES: u64 = 16;
const NAMES: u64 = 32;
const SHARDS: u64 = 8;

/// xorshift64*: a small deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn object(ns: u64, name: u64, shard: u64, version: u64) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.meta_mut().namespace = Some(format!("ns-{ns}"));
    cm.meta_mut().name = Some(format!("cm-{name}"));
    cm.meta_mut().resource_version = Some(version.to_string());
    let labels = BTreeMap::from([("shard".to_owned(), format!("s{shard}"))]);
    cm.meta_mut().labels = Some(labels);
    Arc::new(cm)
}

fn shard_of(cm: &ConfigMap) -> Vec<String> {
    cm.labels().get("shard").cloned().into_iter().collect()
}

fn writer(store: &ThreadSafeStore<ConfigMap>, seed: u64, ops: usize) {
    let mut rng = Rng(seed);
    for i in 0..ops {
        let (ns, name) = (rng.below(NAMESPACES), rng.below(NAMES));
        match rng.below(100) {
            0..=59 => {
                let shard = rng.below(SHARDS);
                store.add(object(ns, name, shard, i as u64)).unwrap();
            }
            60..=98 => {
                store.delete_by_key(&format!("ns-{ns}/cm-{name}"));
            }
            _ if i % 2_000 == 99 => {
                let list: Vec<_> = (0..50)
                    .map(|j| object(rng.below(NAMESPACES), j, rng.below(SHARDS), i as u64))
                    .collect();
                store.replace(list).unwrap();
            }
            _ => {
                store
                    .update(object(ns, name, rng.below(SHARDS), i as u64))
                    .unwrap();
            }
        }
    }
}

fn reader(store: &ThreadSafeStore<ConfigMap>, seed: u64, ops: usize) -> usize {
    let mut rng = Rng(seed);
    let mut seen = 0;
    for i in 0..ops {
        match rng.below(4) {
            0 => {
                let (ns, name) = (rng.below(NAMESPACES), rng.below(NAMES));
                let key = format!("ns-{ns}/cm-{name}");
                if let Some(obj) = store.get_by_key(&key) {
                    assert_eq!(meta_namespace_key(obj.as_ref()).unwrap(), key);
                    seen += 1;
                }
            }
            1 => {
                let ns = format!("ns-{}", rng.below(NAMESPACES));
                for obj in store.by_index(NAMESPACE_INDEX, &ns).unwrap() {
                    assert_eq!(
                        obj.namespace(),
                        Some(ns.as_str()),
                        "stale namespace index entry"
                    );
                    seen += 1;
                }
            }
            2 => {
                let shard = format!("s{}", rng.below(SHARDS));
                let objs = store.by_index("shard", &shard).unwrap();
                for obj in &objs {
                    assert_eq!(obj.labels()["shard"], shard, "stale shard index entry");
                }
                seen += objs.len();
            }
            _ => {
                let shard = format!("s{}", rng.below(SHARDS));
                let keys = store.index_keys("shard", &shard).unwrap();
                let mut unique = keys.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(unique.len(), keys.len(), "a key listed twice");
            }
        }
        if i % 5_000 == 0 {
            store.check_consistency().unwrap();
        }
    }
    seen
}

#[test]
fn ix4_concurrent_readers_and_writers_see_consistent_indexes() {
    let store = Arc::new(ThreadSafeStore::new());
    store.add_indexer("shard", shard_of).unwrap();
    let per_thread = TOTAL_OPS / THREADS;
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (Arc::clone(&store), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                let seed = 0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1);
                if t < WRITERS {
                    writer(&store, seed, per_thread);
                    0
                } else {
                    reader(&store, seed, per_thread)
                }
            })
        })
        .collect();
    let seen: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    store.check_consistency().unwrap();
    assert!(seen > 0, "readers saw no objects");
    assert!(!store.is_empty());
}

/// A reader holding the read lock does not stop another reader: the first
/// one (inside its filter, so under the lock) waits for the second to finish
/// a read. If readers excluded each other this would never complete; the
/// wait is bounded so the test fails instead of hanging.
#[test]
fn ix4_readers_do_not_block_each_other() {
    let store = Arc::new(ThreadSafeStore::new());
    store.add(object(1, 1, 1, 1)).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let overlapped = AtomicBool::new(false);
    thread::scope(|s| {
        let first = store.list_filtered(|_| {
            let store = Arc::clone(&store);
            let done_tx = done_tx.clone();
            s.spawn(move || {
                let got = store.get_by_key("ns-1/cm-1").is_some();
                let _ = done_tx.send(got);
            });
            let second = done_rx.recv_timeout(Duration::from_secs(30));
            overlapped.store(second == Ok(true), Ordering::SeqCst);
            true
        });
        assert_eq!(first.len(), 1);
    });
    assert!(
        overlapped.load(Ordering::SeqCst),
        "second reader did not run while the first held the lock"
    );
}
