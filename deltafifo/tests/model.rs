//! DF1–DF7 against a plain sequential model: random sequences of add,
//! update, delete (objects and tombstones), replace (whole lists, and
//! streams that finish or are aborted, with pops in between), resync, pop
//! (the processor succeeding, failing, or asking for a requeue, sometimes
//! queueing a change while it runs) and close. The processor updates a
//! known-objects store the way an informer does; the model keeps its own.
//! After every step every observable is compared: each popped key with its
//! delta list (kinds, the very objects, tombstone keys) and
//! `is_in_initial_list`, every error, `len`, `list_keys`, each key's queued
//! deltas, `has_synced`, `is_closed`, `last_sync_resource_version` and the
//! store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::{cm, nameless, Store};
use kcontrol_deltafifo::{
    Delta, DeltaFifo, DeltaType, Deltas, FifoError, PopError, ProcessError, ReplaceStream,
};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{DeletedFinalStateUnknown, KnownObjects, ObjectOrTombstone};
use proptest::prelude::*;

const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];

/// What the processor of a pop does.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    Ok,
    Requeue,
    Failed,
}

/// What a processor queues while it runs.
#[derive(Clone, Copy, Debug)]
enum During {
    Update,
    StreamAdd,
}

/// One step. Names are indexes into `NAMES`; `None` is a nameless object.
#[derive(Clone, Debug)]
enum Op {
    Add(Option<usize>),
    Update(Option<usize>),
    Delete(Option<usize>),
    DeleteTombstone(usize),
    Replace(Vec<Option<usize>>),
    BeginStream,
    StreamAdd(Option<usize>),
    FinishStream,
    AbortStream,
    Resync,
    Pop {
        outcome: Outcome,
        /// A change the processor queues while it runs: an update, or (if a
        /// stream is open) a streamed object.
        while_processing: Option<(usize, During)>,
    },
    Close,
}

fn name() -> impl Strategy<Value = Option<usize>> {
    prop_oneof![9 => (0..NAMES.len()).prop_map(Some), 1 => Just(None)]
}

fn op() -> impl Strategy<Value = Op> {
    let outcome = prop_oneof![6 => Just(Outcome::Ok), 2 => Just(Outcome::Requeue), 1 => Just(Outcome::Failed)];
    prop_oneof![
        4 => name().prop_map(Op::Add),
        4 => name().prop_map(Op::Update),
        3 => name().prop_map(Op::Delete),
        1 => (0..NAMES.len()).prop_map(Op::DeleteTombstone),
        2 => prop::collection::vec(prop_oneof![19 => (0..NAMES.len()).prop_map(Some), 1 => Just(None)], 0..5)
            .prop_map(Op::Replace),
        2 => Just(Op::BeginStream),
        4 => name().prop_map(Op::StreamAdd),
        1 => Just(Op::FinishStream),
        1 => Just(Op::AbortStream),
        1 => Just(Op::Resync),
        8 => (outcome, prop::option::weighted(0.25, (0..NAMES.len(), prop_oneof![Just(During::Update), Just(During::StreamAdd)])))
            .prop_map(|(outcome, while_processing)| Op::Pop { outcome, while_processing }),
        1 => Just(Op::Close),
    ]
}

/// An error, as far as the model tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrKind {
    Key,
    Closed,
    InProgress,
}

fn fifo_err(e: FifoError) -> ErrKind {
    match e {
        FifoError::Key(_) => ErrKind::Key,
        FifoError::Closed => ErrKind::Closed,
        FifoError::ReplaceInProgress => ErrKind::InProgress,
        other => panic!("unexpected error {other}"),
    }
}

/// A delta as the model records it: kind, object, tombstone key if any.
#[derive(Clone, Debug)]
struct MDelta {
    kind: DeltaType,
    obj: Arc<ConfigMap>,
    tombstone: Option<String>,
}

impl MDelta {
    fn of(delta: &Delta<ConfigMap>) -> Self {
        let tombstone = match delta {
            Delta::Deleted(ObjectOrTombstone::Tombstone(t)) => Some(t.key.clone()),
            _ => None,
        };
        Self {
            kind: delta.kind(),
            obj: Arc::clone(delta.object()),
            tombstone,
        }
    }

    fn same(&self, other: &MDelta) -> bool {
        self.kind == other.kind
            && Arc::ptr_eq(&self.obj, &other.obj)
            && self.tombstone == other.tombstone
    }
}

fn same_list(a: &[MDelta], b: &[MDelta]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
}

fn record(deltas: &Deltas<ConfigMap>) -> Vec<MDelta> {
    deltas.iter().map(MDelta::of).collect()
}

#[derive(Clone, Debug)]
struct MEntry {
    key: String,
    deltas: Vec<MDelta>,
    initial: bool,
}

#[derive(Debug)]
struct MStream {
    /// Keys queued or known when the stream began, not listed since: the
    /// ones its finish deletes (a key first queued by another producer
    /// during the stream comes after the replace).
    unlisted: BTreeSet<String>,
    initial: bool,
}

/// The contract, written as plainly as possible.
#[derive(Debug, Default)]
struct Model {
    has_known: bool,
    replace_kind: Option<DeltaType>,
    queue: Vec<MEntry>,
    store: BTreeMap<String, Arc<ConfigMap>>,
    populated: bool,
    stream: Option<MStream>,
    closed: bool,
    last_rv: Option<String>,
}

impl Model {
    fn entry(&mut self, key: &str) -> Option<&mut MEntry> {
        self.queue.iter_mut().find(|e| e.key == key)
    }

    fn queued(&self, key: &str) -> bool {
        self.queue.iter().any(|e| e.key == key)
    }

    /// DF1 + DF2.
    fn append(deltas: &mut Vec<MDelta>, d: MDelta) {
        if let Some(last) = deltas.last_mut() {
            if last.kind == DeltaType::Deleted && d.kind == DeltaType::Deleted {
                if last.tombstone.is_some() {
                    *last = d;
                }
                return;
            }
        }
        deltas.push(d);
    }

    fn push(&mut self, key: &str, d: MDelta, initial: bool) {
        match self.entry(key) {
            Some(e) => {
                Self::append(&mut e.deltas, d);
                e.initial |= initial;
            }
            None => self.queue.push(MEntry {
                key: key.to_owned(),
                deltas: vec![d],
                initial,
            }),
        }
    }

    fn has_synced(&self) -> bool {
        self.populated
            && !self.stream.as_ref().is_some_and(|s| s.initial)
            && self.queue.iter().all(|e| !e.initial)
    }

    fn change(
        &mut self,
        kind: DeltaType,
        key: Option<&str>,
        obj: &Arc<ConfigMap>,
    ) -> Result<(), ErrKind> {
        let key = key.ok_or(ErrKind::Key)?;
        if self.closed {
            return Err(ErrKind::Closed);
        }
        let initial = !self.populated;
        self.populated = true;
        let d = MDelta {
            kind,
            obj: Arc::clone(obj),
            tombstone: None,
        };
        self.push(key, d, initial);
        Ok(())
    }

    fn delete(
        &mut self,
        key: Option<&str>,
        obj: &Arc<ConfigMap>,
        tombstone: bool,
    ) -> Result<(), ErrKind> {
        let key = key.ok_or(ErrKind::Key)?;
        if self.closed {
            return Err(ErrKind::Closed);
        }
        let initial = !self.populated;
        self.populated = true;
        let known = self.has_known && self.store.contains_key(key);
        if !known && !self.queued(key) {
            return Ok(()); // DF3
        }
        let d = MDelta {
            kind: DeltaType::Deleted,
            obj: Arc::clone(obj),
            tombstone: tombstone.then(|| key.to_owned()),
        };
        self.push(key, d, initial);
        Ok(())
    }

    fn begin(&mut self) -> Result<(), ErrKind> {
        if self.closed {
            return Err(ErrKind::Closed);
        }
        if self.stream.is_some() {
            return Err(ErrKind::InProgress);
        }
        let mut unlisted: BTreeSet<String> = self.queue.iter().map(|e| e.key.clone()).collect();
        if self.has_known {
            unlisted.extend(self.store.keys().cloned());
        }
        self.stream = Some(MStream {
            unlisted,
            initial: !self.populated,
        });
        Ok(())
    }

    fn stream_add(&mut self, key: Option<&str>, obj: &Arc<ConfigMap>) -> Result<(), ErrKind> {
        let key = key.ok_or(ErrKind::Key)?;
        if self.closed {
            return Err(ErrKind::Closed);
        }
        let (initial, kind) = (
            self.stream.as_ref().unwrap().initial,
            self.replace_kind.unwrap(),
        );
        self.push(
            key,
            MDelta {
                kind,
                obj: Arc::clone(obj),
                tombstone: None,
            },
            initial,
        );
        self.stream.as_mut().unwrap().unlisted.remove(key);
        Ok(())
    }

    /// DF4 deletions, DF5 accounting.
    fn finish(&mut self, rv: &str) -> Result<(), ErrKind> {
        let stream = self.stream.take().unwrap();
        if self.closed {
            return Err(ErrKind::Closed);
        }
        for key in &stream.unlisted {
            if let Some(e) = self.queue.iter_mut().find(|e| &e.key == key) {
                let obj = Arc::clone(&e.deltas.last().unwrap().obj);
                let d = MDelta {
                    kind: DeltaType::Deleted,
                    obj,
                    tombstone: Some(e.key.clone()),
                };
                Self::append(&mut e.deltas, d);
                e.initial |= stream.initial;
                continue;
            }
            let known = self.has_known.then(|| self.store.get(key)).flatten();
            if let Some(obj) = known.map(Arc::clone) {
                let d = MDelta {
                    kind: DeltaType::Deleted,
                    obj,
                    tombstone: Some(key.clone()),
                };
                self.push(key, d, stream.initial);
            }
        }
        self.populated = true;
        self.last_rv = Some(rv.to_owned());
        Ok(())
    }

    /// DF6.
    fn resync(&mut self) -> Result<(), ErrKind> {
        if self.closed {
            return Err(ErrKind::Closed);
        }
        if !self.has_known {
            return Ok(());
        }
        let known: Vec<(String, Arc<ConfigMap>)> = self
            .store
            .iter()
            .map(|(k, o)| (k.clone(), Arc::clone(o)))
            .collect();
        for (key, obj) in known {
            if !self.queued(&key) {
                self.push(
                    &key,
                    MDelta {
                        kind: DeltaType::Sync,
                        obj,
                        tombstone: None,
                    },
                    false,
                );
            }
        }
        Ok(())
    }

    fn apply(&mut self, entry: &MEntry) {
        for d in &entry.deltas {
            if d.kind == DeltaType::Deleted {
                self.store.remove(&entry.key);
            } else {
                self.store.insert(entry.key.clone(), Arc::clone(&d.obj));
            }
        }
    }

    /// Requeue: in front of changes queued meanwhile, else at the back.
    fn requeue(&mut self, mut entry: MEntry) {
        match self.queue.iter().position(|e| e.key == entry.key) {
            Some(i) => {
                let newer = std::mem::take(&mut self.queue[i].deltas);
                for d in newer {
                    Self::append(&mut entry.deltas, d);
                }
                entry.initial |= self.queue[i].initial;
                self.queue[i] = entry;
            }
            None => self.queue.push(entry),
        }
    }
}

/// Runs one sequence against the FIFO and the model.
fn run(ops: Vec<Op>, has_known: bool, emit_replaced: bool) -> Result<(), TestCaseError> {
    let store = Arc::new(Store::default());
    let mut builder = DeltaFifo::<ConfigMap>::builder().emit_delta_type_replaced(emit_replaced);
    if has_known {
        builder = builder.known_objects(Arc::clone(&store) as Arc<dyn KnownObjects<ConfigMap>>);
    }
    let fifo = builder.build();
    let mut model = Model {
        has_known,
        replace_kind: Some(if emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        }),
        ..Model::default()
    };
    let mut stream: Option<ReplaceStream<'_, ConfigMap>> = None;
    let mut rv = 0u64;
    let mut next = |name: Option<usize>| {
        rv += 1;
        match name {
            Some(i) => (Some(format!("ns/{}", NAMES[i])), cm(NAMES[i], rv), rv),
            None => (None, nameless(rv), rv),
        }
    };

    for (step, op) in ops.into_iter().enumerate() {
        let ctx = format!("step {step}: {op:?}");
        match op {
            Op::Add(n) | Op::Update(n) => {
                let (key, obj, _) = next(n);
                let (real, kind) = match op {
                    Op::Add(_) => (fifo.add(Arc::clone(&obj)), DeltaType::Added),
                    _ => (fifo.update(Arc::clone(&obj)), DeltaType::Updated),
                };
                let want = model.change(kind, key.as_deref(), &obj);
                prop_assert_eq!(real.map_err(fifo_err), want, "{}", ctx);
            }
            Op::Delete(n) => {
                let (key, obj, _) = next(n);
                let real = fifo.delete(Arc::clone(&obj)).map_err(fifo_err);
                prop_assert_eq!(real, model.delete(key.as_deref(), &obj, false), "{}", ctx);
            }
            Op::DeleteTombstone(n) => {
                let (key, obj, _) = next(Some(n));
                let key = key.unwrap();
                let t = DeletedFinalStateUnknown {
                    key: key.clone(),
                    obj: Arc::clone(&obj),
                };
                let real = fifo.delete_tombstone(t).map_err(fifo_err);
                prop_assert_eq!(real, model.delete(Some(&key), &obj, true), "{}", ctx);
            }
            Op::Replace(names) => {
                let items: Vec<_> = names.into_iter().map(&mut next).collect();
                let list: Vec<Arc<ConfigMap>> =
                    items.iter().map(|(_, o, _)| Arc::clone(o)).collect();
                let real = fifo.replace(list, format!("list-{step}")).map_err(fifo_err);
                let want = if items.iter().any(|(k, _, _)| k.is_none()) {
                    Err(ErrKind::Key)
                } else {
                    model.begin().and_then(|()| {
                        for (k, o, _) in &items {
                            model.stream_add(k.as_deref(), o)?;
                        }
                        model.finish(&format!("list-{step}"))
                    })
                };
                prop_assert_eq!(real, want, "{}", ctx);
            }
            Op::BeginStream => {
                if stream.is_some() {
                    // a second stream while one is alive is refused
                    let real = fifo.begin_replace().map(|_| ()).map_err(fifo_err);
                    prop_assert_eq!(real, model.begin(), "{}", ctx);
                    continue;
                }
                let real = fifo.begin_replace().map_err(fifo_err);
                let want = model.begin();
                prop_assert_eq!(real.as_ref().map(|_| ()).map_err(|e| *e), want, "{}", ctx);
                stream = real.ok();
            }
            Op::StreamAdd(n) => {
                let Some(s) = stream.as_mut() else { continue };
                let (key, obj, _) = next(n);
                let real = s.add(Arc::clone(&obj)).map_err(fifo_err);
                prop_assert_eq!(real, model.stream_add(key.as_deref(), &obj), "{}", ctx);
            }
            Op::FinishStream => {
                let Some(s) = stream.take() else { continue };
                let real = s.finish(format!("stream-{step}")).map_err(fifo_err);
                prop_assert_eq!(real, model.finish(&format!("stream-{step}")), "{}", ctx);
            }
            Op::AbortStream => {
                if stream.take().is_some() {
                    model.stream = None;
                }
            }
            Op::Resync => {
                prop_assert_eq!(fifo.resync().map_err(fifo_err), model.resync(), "{}", ctx);
            }
            Op::Pop {
                outcome,
                while_processing,
            } => {
                if model.queue.is_empty() && !model.closed {
                    continue; // it would block: len() agrees, checked below
                }
                let during = while_processing.map(|(n, how)| (next(Some(n)), how));
                let mut during_result = None;
                let real = fifo.pop(|deltas, initial| {
                    if let Some(((_, obj, _), how)) = &during {
                        during_result = match (how, stream.as_mut()) {
                            (During::Update, _) => {
                                Some(fifo.update(Arc::clone(obj)).map_err(fifo_err))
                            }
                            (During::StreamAdd, Some(s)) => {
                                Some(s.add(Arc::clone(obj)).map_err(fifo_err))
                            }
                            (During::StreamAdd, None) => None,
                        };
                    }
                    match outcome {
                        Outcome::Ok => {
                            store.apply(deltas);
                            Ok((deltas.key().to_owned(), record(deltas), initial))
                        }
                        Outcome::Requeue => Err(ProcessError::Requeue((
                            deltas.key().to_owned(),
                            record(deltas),
                            initial,
                        ))),
                        Outcome::Failed => Err(ProcessError::Failed((
                            deltas.key().to_owned(),
                            record(deltas),
                            initial,
                        ))),
                    }
                });
                if model.queue.is_empty() {
                    prop_assert!(
                        matches!(real, Err(PopError::Closed)),
                        "{}: {:?}",
                        ctx,
                        real.map(|r| r.0)
                    );
                    continue;
                }
                let entry = model.queue.remove(0);
                let want_during = during.as_ref().and_then(|((k, obj, _), how)| match how {
                    During::Update => Some(model.change(DeltaType::Updated, k.as_deref(), obj)),
                    During::StreamAdd if model.stream.is_some() => {
                        Some(model.stream_add(k.as_deref(), obj))
                    }
                    During::StreamAdd => None,
                });
                prop_assert_eq!(during_result, want_during, "{}", ctx);
                let (key, deltas, initial) = match (real, outcome) {
                    (Ok(got), Outcome::Ok) => {
                        model.apply(&entry);
                        got
                    }
                    (Err(PopError::Requeued(got)), Outcome::Requeue) => {
                        model.requeue(entry.clone());
                        got
                    }
                    (Err(PopError::Failed(got)), Outcome::Failed) => got,
                    (other, _) => {
                        return Err(TestCaseError::fail(format!("{ctx}: pop gave {other:?}")))
                    }
                };
                prop_assert_eq!(&key, &entry.key, "{}", ctx);
                prop_assert!(
                    same_list(&deltas, &entry.deltas),
                    "{}: popped {:?}, model {:?}",
                    ctx,
                    deltas,
                    entry.deltas
                );
                prop_assert_eq!(initial, entry.initial, "{}: is_in_initial_list", ctx);
            }
            Op::Close => {
                fifo.close();
                model.closed = true;
            }
        }
        compare(&fifo, &store, &model, &ctx)?;
    }
    Ok(())
}

/// Every observable of the FIFO against the model.
fn compare(
    fifo: &DeltaFifo<ConfigMap>,
    store: &Store,
    model: &Model,
    ctx: &str,
) -> Result<(), TestCaseError> {
    let keys: Vec<String> = model.queue.iter().map(|e| e.key.clone()).collect();
    prop_assert_eq!(fifo.len(), keys.len(), "{}: len", ctx);
    prop_assert_eq!(fifo.list_keys(), keys, "{}: list_keys", ctx);
    for e in &model.queue {
        let got = fifo
            .get_by_key(&e.key)
            .map(|d| record(&d))
            .unwrap_or_default();
        prop_assert!(
            same_list(&got, &e.deltas),
            "{}: {} queued {:?}, model {:?}",
            ctx,
            e.key,
            got,
            e.deltas
        );
    }
    prop_assert_eq!(fifo.has_synced(), model.has_synced(), "{}: has_synced", ctx);
    prop_assert_eq!(fifo.is_closed(), model.closed, "{}: is_closed", ctx);
    prop_assert_eq!(
        fifo.last_sync_resource_version(),
        model.last_rv.clone(),
        "{}: rv",
        ctx
    );
    let real = store.snapshot();
    prop_assert_eq!(
        real.keys().collect::<Vec<_>>(),
        model.store.keys().collect::<Vec<_>>(),
        "{}: store",
        ctx
    );
    for (k, o) in &model.store {
        prop_assert!(Arc::ptr_eq(o, &real[k]), "{}: store object of {}", ctx, k);
    }
    Ok(())
}

/// Steps that stay longer before the first replace finishes, on two keys:
/// aborted first streams, resyncs and requeues that merge with changes
/// queued while processing (the corners of the initial-population count).
fn initial_phase_op() -> impl Strategy<Value = Op> {
    let two = || prop_oneof![19 => (0..2usize).prop_map(Some), 1 => Just(None)];
    let outcome = prop_oneof![
        Just(Outcome::Ok),
        Just(Outcome::Requeue),
        Just(Outcome::Failed)
    ];
    let during = prop_oneof![1 => Just(During::Update), 3 => Just(During::StreamAdd)];
    prop_oneof![
        1 => two().prop_map(Op::Update),
        1 => two().prop_map(Op::Delete),
        3 => Just(Op::BeginStream),
        6 => two().prop_map(Op::StreamAdd),
        1 => Just(Op::FinishStream),
        2 => Just(Op::AbortStream),
        2 => Just(Op::Resync),
        8 => (outcome, prop::option::weighted(0.6, (0..2usize, during)))
            .prop_map(|(outcome, while_processing)| Op::Pop { outcome, while_processing }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// DF5 (and DF7 requeues) around the first replace, with a
    /// known-objects store.
    #[test]
    fn df5_initial_population_matches_the_model(ops in prop::collection::vec(initial_phase_op(), 0..60)) {
        run(ops, true, true)?;
    }

    /// DF1–DF7 with a known-objects store, Replaced deltas on replace.
    #[test]
    fn df1_to_df7_match_the_model_with_known_objects(ops in prop::collection::vec(op(), 0..80)) {
        run(ops, true, true)?;
    }

    /// DF1–DF7 without a known-objects store (only queued keys are known),
    /// Sync deltas on replace.
    #[test]
    fn df1_to_df7_match_the_model_without_known_objects(ops in prop::collection::vec(op(), 0..80)) {
        run(ops, false, false)?;
    }
}
