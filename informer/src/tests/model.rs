//! The processing loop against a model: random adds, updates, deletions
//! (watched or found missing by a relist, i.e. tombstones), relists with
//! changed and unchanged objects, resyncs, and handlers added and removed
//! at random points, all while the informer runs. Afterwards the store
//! holds exactly the model's objects, and every active handler's view,
//! rebuilt from its notifications alone, equals the store; no handler ever
//! got a notification that contradicts what it was told before.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::resync_clock::ManualClock;
use crate::HandlerRegistration;

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    Update(u8),
    Delete(u8),
    /// Relist these keys; `true`: with a new version, else unchanged if known.
    Replace(Vec<(u8, bool)>),
    /// Move the clock 10 s, then the reflector's resync check.
    Resync,
    /// A handler with this resync period, in units of 10 s.
    AddHandler(u8),
    /// Remove the handler at this position (modulo the active ones).
    RemoveHandler(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..8u8).prop_map(Op::Add),
        6 => (0..8u8).prop_map(Op::Update),
        3 => (0..8u8).prop_map(Op::Delete),
        2 => proptest::collection::vec((0..8u8, any::<bool>()), 0..8).prop_map(Op::Replace),
        2 => Just(Op::Resync),
        2 => (0..3u8).prop_map(Op::AddHandler),
        1 => any::<usize>().prop_map(Op::RemoveHandler),
    ]
}

fn name(k: u8) -> String {
    format!("k{k}")
}

fn run(ops: &[Op], handlers_before_start: u8) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let c = clock.clock();
    let mut h = Harness::new(|b| b.resync_period(Duration::from_secs(10)).clock(c));
    let mut active: Vec<(Arc<Recorder>, HandlerRegistration)> = Vec::new();
    let add_handler = |h: &Harness, active: &mut Vec<_>, tens: u8| {
        let r = Recorder::new();
        let reg = h
            .informer
            .add_event_handler_with_resync_period(
                Arc::clone(&r),
                Duration::from_secs(10 * u64::from(tens)),
            )
            .unwrap();
        active.push((r, reg));
    };
    for i in 0..handlers_before_start {
        add_handler(&h, &mut active, i % 3);
    }
    let fifo = h.start();
    let mut model: BTreeMap<String, String> = BTreeMap::new();
    let mut version = 0u64;
    let mut next = || {
        version += 1;
        version.to_string()
    };
    for op in ops {
        match op {
            Op::Add(k) | Op::Update(k) => {
                let v = next();
                let obj = cm("ns", &name(*k), &v);
                if matches!(op, Op::Add(_)) {
                    fifo.add(obj).unwrap();
                } else {
                    fifo.update(obj).unwrap();
                }
                model.insert(format!("ns/{}", name(*k)), v);
            }
            Op::Delete(k) => {
                fifo.delete(cm("ns", &name(*k), &next())).unwrap();
                model.remove(&format!("ns/{}", name(*k)));
            }
            Op::Replace(list) => {
                let mut listed = BTreeMap::new();
                for (k, bump) in list {
                    let key = format!("ns/{}", name(*k));
                    let v = match model.get(&key) {
                        Some(v) if !bump => v.clone(),
                        _ => next(),
                    };
                    listed.insert(key, (name(*k), v));
                }
                let rv = next();
                fifo.replace(listed.values().map(|(n, v)| cm("ns", n, v)), rv)
                    .unwrap();
                model = listed.into_iter().map(|(k, (_, v))| (k, v)).collect();
            }
            Op::Resync => {
                clock.advance(Duration::from_secs(10));
                h.source.resync_tick();
            }
            Op::AddHandler(tens) => add_handler(&h, &mut active, *tens),
            Op::RemoveHandler(i) => {
                if !active.is_empty() {
                    let (r, reg) = active.remove(i % active.len());
                    h.informer.remove_event_handler(&reg).unwrap();
                    prop_assert!(r.errors().is_empty(), "{:?}", r.errors());
                }
            }
        }
    }
    let recorders: Vec<&Recorder> = active.iter().map(|(r, _)| r.as_ref()).collect();
    h.barrier(&recorders);
    let store = h.store_view();
    prop_assert_eq!(&store, &model);
    prop_assert!(h.informer.store().check_consistency().is_ok());
    for (r, reg) in &active {
        prop_assert!(r.errors().is_empty(), "{:?}", r.errors());
        prop_assert_eq!(&r.view(), &store);
        eventually_blocking("the registration to sync", || reg.has_synced());
    }
    h.stop();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn processing_loop_matches_the_model(
        ops in proptest::collection::vec(op(), 1..60),
        before in 0..3u8,
    ) {
        run(&ops, before)?;
    }
}
