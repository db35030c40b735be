//! DF7 under real concurrency: popper threads and tokio tasks together,
//! with producers running at the same time.
//!
//! - every change is delivered exactly once, in order per key, and a key is
//!   never handed to two processors at once (requeues included);
//! - a reflector-like producer (watch events, streaming relists, some
//!   aborted) plus a resync thread, with poppers updating the known-objects
//!   store, converges to exactly the server's state;
//! - each queued key wakes a waiting popper (no lost wake-up).
//!
//! (`close` waking every blocked popper is a unit test in `src/pop.rs`: it
//! waits until the poppers are parked, which only the crate can see.)
//!
//! The micro-sleeps below only shape interleavings (a processor holding a
//! key while producers queue it again, producers pacing their rounds, a
//! resync thread spread over the run, a processor lingering so a deletion
//! lands while it runs); the assertions hold however they fall, so none is
//! a wait that a slow machine could outrun. The one poll for an event (the
//! DF3 processor looking for the producer's `deleting` flag) gives up
//! harmlessly: the deletion then simply comes later.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{cm, Store};
use kcontrol_deltafifo::{DeltaFifo, Deltas, PopError, ProcessError};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{KnownObjects, Object};

/// No test waits longer than this for a thread or task.
const DEADLINE: Duration = Duration::from_secs(60);

type Processor = Arc<dyn Fn(&Deltas<ConfigMap>) -> Result<(), ProcessError<()>> + Send + Sync>;

/// Starts `threads` popper threads and `tasks` popper tasks that pop until
/// the FIFO reports `Closed`; each sends `()` on the returned channel when done.
fn start_poppers(
    fifo: &Arc<DeltaFifo<ConfigMap>>,
    runtime: &tokio::runtime::Runtime,
    threads: usize,
    tasks: usize,
    process: &Processor,
) -> mpsc::Receiver<()> {
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..threads {
        let (fifo, process, done) = (Arc::clone(fifo), Arc::clone(process), done_tx.clone());
        thread::spawn(move || {
            while !matches!(fifo.pop(|d, _| process(d)), Err(PopError::Closed)) {}
            done.send(()).unwrap();
        });
    }
    for _ in 0..tasks {
        let (fifo, process, done) = (Arc::clone(fifo), Arc::clone(process), done_tx.clone());
        runtime.spawn(async move {
            while !matches!(
                fifo.pop_async(|d, _| process(d)).await,
                Err(PopError::Closed)
            ) {}
            done.send(()).unwrap();
        });
    }
    done_rx
}

fn wait_for(done: &mpsc::Receiver<()>, count: usize, what: &str) {
    for i in 0..count {
        done.recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("{what}: only {i} of {count} finished in time"));
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn rv_of(obj: &ConfigMap) -> u64 {
    obj.resource_version().unwrap().parse().unwrap()
}

#[test]
fn df7_every_change_is_delivered_once_in_order_and_keys_are_never_shared() {
    const PRODUCERS: usize = 4;
    const KEYS: usize = 40;
    const CHANGES: u64 = 40;

    let fifo = DeltaFifo::<ConfigMap>::builder().build();
    let runtime = runtime();
    let delivered: Arc<Mutex<BTreeMap<String, Vec<u64>>>> = Arc::default();
    let in_process: Arc<Mutex<HashSet<String>>> = Arc::default();
    let running = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));

    let process: Processor = {
        let (delivered, in_process, running, calls) = (
            delivered.clone(),
            in_process.clone(),
            running.clone(),
            calls.clone(),
        );
        Arc::new(move |deltas| {
            let key = deltas.key().to_owned();
            assert!(
                in_process.lock().unwrap().insert(key.clone()),
                "{key} handed to two processors"
            );
            assert_eq!(
                running.fetch_add(1, Ordering::SeqCst),
                0,
                "two processors ran at once"
            );
            let call = calls.fetch_add(1, Ordering::Relaxed);
            let requeue = call % 7 == 3;
            if requeue {
                // Let producers queue the key again meanwhile, so requeues
                // merge with newer changes.
                thread::sleep(Duration::from_micros(200));
            }
            if !requeue {
                let mut delivered = delivered.lock().unwrap();
                let list = delivered.entry(key.clone()).or_default();
                list.extend(deltas.iter().map(|d| rv_of(d.object())));
            }
            running.fetch_sub(1, Ordering::SeqCst);
            in_process.lock().unwrap().remove(&key);
            if requeue {
                Err(ProcessError::Requeue(()))
            } else {
                Ok(())
            }
        })
    };
    let done = start_poppers(&fifo, &runtime, 3, 3, &process);

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let fifo = Arc::clone(&fifo);
            thread::spawn(move || {
                for rv in 0..CHANGES {
                    // Pace the rounds so they overlap with processing.
                    thread::sleep(Duration::from_micros(20));
                    for k in 0..KEYS {
                        let obj = cm(&format!("p{p}-k{k}"), rv);
                        if rv == 0 {
                            fifo.add(obj).unwrap();
                        } else {
                            fifo.update(obj).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    // pops drain what is queued (requeues included) before reporting Closed
    fifo.close();
    wait_for(&done, 6, "poppers");

    assert!(fifo.is_empty());
    let delivered = delivered.lock().unwrap();
    assert_eq!(delivered.len(), PRODUCERS * KEYS);
    let expected: Vec<u64> = (0..CHANGES).collect();
    for (key, rvs) in delivered.iter() {
        assert_eq!(rvs, &expected, "{key}: lost, repeated or reordered changes");
    }
    assert!(calls.load(Ordering::Relaxed) >= PRODUCERS * KEYS);
}

/// A tiny deterministic generator (the test must not depend on timing, only
/// the interleaving does).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

#[test]
fn df3_df4_df6_concurrent_watch_relists_and_resyncs_converge_to_the_server_state() {
    const NAMES: u64 = 60;
    const STEPS: u64 = 6_000;

    let store = Arc::new(Store::default());
    let fifo = DeltaFifo::<ConfigMap>::builder()
        .known_objects(Arc::clone(&store) as Arc<dyn KnownObjects<ConfigMap>>)
        .build();
    let runtime = runtime();
    let calls = Arc::new(AtomicUsize::new(0));
    let process: Processor = {
        let (store, calls) = (Arc::clone(&store), Arc::clone(&calls));
        Arc::new(move |deltas| {
            if calls.fetch_add(1, Ordering::Relaxed) % 11 == 5 {
                return Err(ProcessError::Requeue(()));
            }
            store.apply(deltas);
            Ok(())
        })
    };
    let done = start_poppers(&fifo, &runtime, 2, 2, &process);

    let stop = Arc::new(AtomicBool::new(false));
    let resyncer = {
        let (fifo, stop) = (Arc::clone(&fifo), Arc::clone(&stop));
        thread::spawn(move || {
            // at least one resync whatever the timing (a loaded machine may
            // run the whole relist schedule before this thread starts)
            let mut resyncs = 0u32;
            while fifo.resync().is_ok() {
                resyncs += 1;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                thread::sleep(Duration::from_micros(200));
            }
            resyncs
        })
    };

    // The reflector: a server whose state it mirrors into the FIFO.
    let mut server: BTreeMap<String, u64> = BTreeMap::new();
    let mut rng = Lcg(7);
    let mut rv = 0u64;
    let relist = |server: &BTreeMap<String, u64>, abort_after: Option<usize>, rv: u64| {
        let mut stream = fifo.begin_replace().unwrap();
        for (i, (name, obj_rv)) in server.iter().enumerate() {
            if abort_after == Some(i) {
                return; // dropped: the relist failed halfway
            }
            stream.add(cm(name, *obj_rv)).unwrap();
        }
        stream.finish(rv.to_string()).unwrap();
    };
    for step in 0..STEPS {
        rv += 1;
        let name = format!("n{}", rng.next(NAMES));
        match (server.contains_key(&name), rng.next(3)) {
            (false, _) => {
                server.insert(name.clone(), rv);
                fifo.add(cm(&name, rv)).unwrap();
            }
            (true, 0) => {
                server.remove(&name);
                fifo.delete(cm(&name, rv)).unwrap();
            }
            (true, _) => {
                server.insert(name.clone(), rv);
                fifo.update(cm(&name, rv)).unwrap();
            }
        }
        if step % 500 == 250 {
            // a missed watch window: the server changes unseen, then a relist
            for _ in 0..5 {
                rv += 1;
                let name = format!("n{}", rng.next(NAMES));
                if rng.next(2) == 0 {
                    server.remove(&name);
                } else {
                    server.insert(name, rv);
                }
            }
            let abort = (rng.next(3) == 0).then(|| rng.next(NAMES) as usize);
            relist(&server, abort, rv);
        }
    }
    relist(&server, None, rv);
    stop.store(true, Ordering::Relaxed);
    let resyncs = resyncer.join().unwrap();
    fifo.close();
    wait_for(&done, 4, "poppers");

    let stored: BTreeMap<String, u64> = store
        .snapshot()
        .into_iter()
        .map(|(key, obj)| (key.trim_start_matches("ns/").to_owned(), rv_of(&obj)))
        .collect();
    assert_eq!(stored, server, "the store diverged from the server");
    assert!(fifo.has_synced());
    assert_eq!(fifo.last_sync_resource_version(), Some(rv.to_string()));
    assert!(resyncs > 0);
}

/// Adds items one at a time, waiting (bounded) for each to be popped
/// before the next: a lost wakeup leaves an item unpopped and fails.
fn each_item_wakes_a_waiting_popper(threads: usize, tasks: usize) {
    let fifo = DeltaFifo::<ConfigMap>::builder().build();
    let runtime = runtime();
    let (popped_tx, popped_rx) = mpsc::channel();
    let popped_tx = Mutex::new(popped_tx);
    let process: Processor = Arc::new(move |d| {
        popped_tx.lock().unwrap().send(d.key().to_owned()).unwrap();
        Ok(())
    });
    let done = start_poppers(&fifo, &runtime, threads, tasks, &process);
    for i in 0..300 {
        let key = format!("k{i}");
        fifo.add(cm(&key, 1)).unwrap();
        let got = popped_rx
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("{key} was queued but no popper woke up"));
        assert_eq!(got, format!("ns/{key}"));
    }
    fifo.close();
    wait_for(&done, threads + tasks, "poppers");
    assert!(popped_rx.try_recv().is_err(), "an item was popped twice");
}

#[test]
fn df7_each_queued_key_wakes_a_waiting_thread() {
    each_item_wakes_a_waiting_popper(4, 0);
}

#[test]
fn df7_each_queued_key_wakes_a_waiting_task() {
    each_item_wakes_a_waiting_popper(0, 4);
}

#[test]
fn df7_each_queued_key_wakes_a_waiting_thread_or_task() {
    each_item_wakes_a_waiting_popper(3, 3);
}

#[test]
fn df3_a_deletion_arriving_while_its_add_is_processed_is_not_lost() {
    // The deletion comes after a popper took the object and before it
    // stored it: it must wait for the processor, not be taken for the
    // deletion of an unknown object (DF3).
    let store = Arc::new(Store::default());
    let fifo = DeltaFifo::<ConfigMap>::builder()
        .known_objects(Arc::clone(&store) as Arc<dyn KnownObjects<ConfigMap>>)
        .build();
    let runtime = runtime();
    let (taken_tx, taken_rx) = mpsc::channel::<()>();
    let deleting = Arc::new(AtomicBool::new(false));
    let process: Processor = {
        let (store, deleting) = (Arc::clone(&store), Arc::clone(&deleting));
        let taken_tx = Mutex::new(taken_tx);
        Arc::new(move |deltas| {
            if deltas.newest().kind() == kcontrol_deltafifo::DeltaType::Added {
                taken_tx.lock().unwrap().send(()).unwrap();
                // Wait (bounded) until the producer is about to delete, then
                // a little more so the deletion runs while this one does.
                for _ in 0..2_000 {
                    if deleting.load(Ordering::SeqCst) {
                        break;
                    }
                    thread::sleep(Duration::from_micros(50));
                }
                thread::sleep(Duration::from_micros(300));
            }
            store.apply(deltas);
            Ok(())
        })
    };
    let done = start_poppers(&fifo, &runtime, 1, 1, &process);
    for i in 0..60 {
        let name = format!("k{i}");
        deleting.store(false, Ordering::SeqCst);
        fifo.add(cm(&name, 1)).unwrap();
        taken_rx
            .recv_timeout(DEADLINE)
            .expect("the add was never popped");
        deleting.store(true, Ordering::SeqCst);
        fifo.delete(cm(&name, 2)).unwrap();
    }
    fifo.close();
    wait_for(&done, 2, "poppers");
    assert_eq!(
        store.snapshot().keys().collect::<Vec<_>>(),
        Vec::<&String>::new()
    );
}
