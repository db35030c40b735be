//! Model test (WQ1, WQ2, WQ4, WQ5): random sequences of add / add_ref /
//! try_get / done / add_after / clock steps / shut_down, run against a
//! `DelayingQueue` on a fake clock and against a plain sequential model of
//! client-go's rules; every observable result must match: the item (or
//! emptiness, or shutdown) of each get, `len`, `processing_len`,
//! `scheduled_len` and `is_shutting_down` after every step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use kcontrol_workqueue::{DelayingQueue, FakeClock, QueueConfig, TryGet};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    AddRef(u8),
    Get,
    Done(u8),
    AddAfter(u8, u8),
    Step(u8),
    ShutDown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..8).prop_map(Op::Add),
        2 => (0u8..8).prop_map(Op::AddRef),
        4 => Just(Op::Get),
        3 => (0u8..8).prop_map(Op::Done),
        3 => (0u8..8, 0u8..5).prop_map(|(k, d)| Op::AddAfter(k, d)),
        2 => (0u8..4).prop_map(Op::Step),
        1 => Just(Op::ShutDown),
    ]
}

fn key(k: u8) -> String {
    format!("ns/k{k}")
}

/// client-go's rules, sequentially, with time in milliseconds.
#[derive(Default)]
struct Model {
    queue: VecDeque<String>,
    /// Waiting, or being processed and added again.
    dirty: HashSet<String>,
    processing: HashSet<String>,
    shutting_down: bool,
    now: u64,
    seq: u64,
    /// key -> (due, scheduling order)
    scheduled: HashMap<String, (u64, u64)>,
}

impl Model {
    fn add(&mut self, k: String) {
        if self.shutting_down || self.dirty.contains(&k) {
            return;
        }
        self.dirty.insert(k.clone());
        if !self.processing.contains(&k) {
            self.queue.push_back(k);
        }
    }

    fn release_due(&mut self) {
        let due: BTreeMap<(u64, u64), String> = self
            .scheduled
            .iter()
            .filter(|(_, (at, _))| *at <= self.now)
            .map(|(k, at)| (*at, k.clone()))
            .collect();
        for k in due.into_values() {
            self.scheduled.remove(&k);
            self.add(k);
        }
    }

    fn get(&mut self) -> TryGet<String> {
        match self.queue.pop_front() {
            Some(k) => {
                self.dirty.remove(&k);
                self.processing.insert(k.clone());
                TryGet::Item(k)
            }
            None if self.shutting_down => TryGet::ShutDown,
            None => TryGet::Empty,
        }
    }

    fn done(&mut self, k: &str) {
        if self.processing.remove(k) && self.dirty.contains(k) {
            self.queue.push_back(k.to_owned());
        }
    }

    fn add_after(&mut self, k: String, delay: u64) {
        if self.shutting_down {
            return;
        }
        if delay == 0 {
            self.add(k);
            return;
        }
        let due = self.now + delay;
        match self.scheduled.get(&k) {
            Some((at, _)) if *at <= due => {}
            _ => {
                self.scheduled.insert(k, (due, self.seq));
                self.seq += 1;
            }
        }
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = Arc::new(FakeClock::new());
    let queue: DelayingQueue<String> =
        DelayingQueue::with_config(QueueConfig::new().clock(clock.clone()));
    let mut model = Model::default();
    for (step, op) in ops.into_iter().enumerate() {
        model.release_due();
        match op.clone() {
            Op::Add(k) => {
                queue.add(key(k));
                model.add(key(k));
            }
            Op::AddRef(k) => {
                queue.add_ref(key(k).as_str());
                model.add(key(k));
            }
            Op::Get => {
                let got = queue.try_get();
                let expected = model.get();
                prop_assert_eq!(got, expected, "step {} {:?}", step, op);
            }
            Op::Done(k) => {
                queue.done(&key(k));
                model.done(&key(k));
            }
            Op::AddAfter(k, d) => {
                queue.add_after(key(k), Duration::from_millis(u64::from(d)));
                model.add_after(key(k), u64::from(d));
            }
            Op::Step(ms) => {
                clock.step(Duration::from_millis(u64::from(ms)));
                model.now += u64::from(ms);
            }
            Op::ShutDown => {
                queue.shut_down();
                model.shutting_down = true;
                model.scheduled.clear();
            }
        }
        model.release_due();
        prop_assert_eq!(
            queue.len(),
            model.queue.len(),
            "len after step {} {:?}",
            step,
            op
        );
        prop_assert_eq!(
            queue.processing_len(),
            model.processing.len(),
            "processing after step {}",
            step
        );
        prop_assert_eq!(
            queue.scheduled_len(),
            model.scheduled.len(),
            "scheduled after step {}",
            step
        );
        prop_assert_eq!(queue.is_shutting_down(), model.shutting_down);
    }
    // Drain: the queue hands out exactly what the model still holds.
    loop {
        let got = queue.try_get();
        let expected = model.get();
        prop_assert_eq!(&got, &expected);
        match got {
            TryGet::Item(k) => {
                queue.done(&k);
                model.done(&k);
            }
            TryGet::Empty | TryGet::ShutDown => break,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// WQ1 (dedup, FIFO by first add), WQ2 (dirty while processing, requeued
    /// once on done), WQ4 (adds dropped after shutdown, queued items still
    /// handed out), WQ5 (add_after: zero delay adds now, earlier time wins,
    /// release in due order), and harmless misuse (done of an item that is
    /// not being processed, double done): the queue behaves as the model.
    #[test]
    fn wq1_wq2_wq4_wq5_queue_matches_sequential_model(ops in prop::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}

#[test]
fn wq5_same_item_scheduled_twice_keeps_the_earlier_time() {
    let clock = Arc::new(FakeClock::new());
    let queue: DelayingQueue<&str> =
        DelayingQueue::with_config(QueueConfig::new().clock(clock.clone()));
    queue.add_after("a", Duration::from_secs(10));
    queue.add_after("a", Duration::from_secs(5));
    queue.add_after("a", Duration::from_secs(20));
    queue.add_after("b", Duration::from_secs(7));
    assert_eq!(queue.scheduled_len(), 2);
    clock.step(Duration::from_secs(5));
    assert_eq!(queue.try_get(), TryGet::Item("a"));
    assert_eq!(queue.try_get(), TryGet::Empty);
    clock.step(Duration::from_secs(30));
    assert_eq!(queue.try_get(), TryGet::Item("b"));
    assert_eq!(queue.try_get(), TryGet::Empty);
    assert_eq!(queue.scheduled_len(), 0);
}

/// WQ1 with the lock-free path: an add of a hot item that returned without
/// the lock stays ahead of everything queued after it (a requeue on `done`,
/// a plain add), and the queue counts it at once.
#[test]
fn wq1_fifo_by_first_add_across_lock_free_adds() {
    let queue: kcontrol_workqueue::Queue<String> = kcontrol_workqueue::Queue::new();
    let (x, y, z) = ("x".to_owned(), "y".to_owned(), "z".to_owned());
    // make x hot, then gone: its hint stays published, idle
    queue.add(x.clone());
    queue.add(x.clone());
    let got = queue.get().unwrap();
    queue.done(&got);
    // y is processed and dirty
    queue.add(y.clone());
    let got_y = queue.get().unwrap();
    queue.add(y.clone());
    queue.add(y.clone());
    // x comes back (lock-free claim), then y's done requeues y, then z
    queue.add_ref("x");
    queue.done(&got_y);
    queue.add(z.clone());
    assert_eq!(queue.len(), 3);
    assert_eq!(queue.try_get(), TryGet::Item(x));
    assert_eq!(queue.try_get(), TryGet::Item(y));
    assert_eq!(queue.try_get(), TryGet::Item(z));
}
