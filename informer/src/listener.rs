//! [`Listener`]: one registered handler with its own unbounded buffer and
//! its own tokio task, or its own OS thread for a plain handler that may
//! block (IN1), its initial-list tracking (IN4's per-handler `has_synced`)
//! and its resync schedule.
//!
//! The informer's processing loop only ever appends to a listener's buffer
//! (a short mutex hold, never a wait on the handler); the listener's task
//! (or thread) takes notifications one at a time and calls the handler
//! with no lock held. A handler that only enqueues, as controllers' do,
//! runs on a task: no thread per registration. One that may block (as Go
//! handlers may) asks for a thread of its own (`HandlerOptions::blocking`),
//! which keeps it from holding up the async runtime, the informer, or any
//! other handler.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use parking_lot::{Condvar, Mutex};
use tokio::sync::{oneshot, Notify};

use crate::async_handler::AsyncResourceEventHandler;
use crate::buffer::PendingBuffer;
use crate::error::InformerError;
use crate::handler::ResourceEventHandler;
use crate::metrics::InformerMetrics;
use crate::notification::Notification;
use crate::synced::HasSynced;

/// A handler's sync state: synced once the informer has synced (upstream)
/// and every initial-list add queued for this handler has been handled
/// (client-go's `synctrack.SingleFileTracker`).
pub(crate) struct HandlerSync {
    /// Initial-list adds queued but not yet handled.
    pending_initial: AtomicI64,
    /// The informer's own sync state.
    upstream: Arc<dyn HasSynced>,
    /// `handler_synced` was reported to the metrics.
    reported: AtomicBool,
    name: Arc<str>,
    metrics: Option<Arc<dyn InformerMetrics>>,
}

impl HandlerSync {
    pub(crate) fn new(
        name: Arc<str>,
        upstream: Arc<dyn HasSynced>,
        metrics: Option<Arc<dyn InformerMetrics>>,
    ) -> Self {
        Self {
            pending_initial: AtomicI64::new(0),
            upstream,
            reported: AtomicBool::new(false),
            name,
            metrics,
        }
    }

    /// Reports `handler_synced` once, the first time it is called while
    /// synced. Called by the handler's thread when its last pending initial
    /// add is handled, and by the informer when it syncs: whichever comes
    /// last sees both conditions true.
    pub(crate) fn report_if_synced(&self) {
        if self.reported.load(Ordering::Acquire) || !self.has_synced() {
            return;
        }
        if !self.reported.swap(true, Ordering::AcqRel) {
            tracing::debug!(handler = %self.name, "event handler synced");
            if let Some(m) = &self.metrics {
                m.handler_synced(&self.name);
            }
        }
    }

    fn initial_queued(&self) {
        self.pending_initial.fetch_add(1, Ordering::SeqCst);
    }

    fn initial_handled(&self) {
        let left = self.pending_initial.fetch_sub(1, Ordering::SeqCst) - 1;
        if left < 0 {
            // Cannot happen: every decrement follows its increment.
            tracing::error!(handler = %self.name, "initial-list tracking went negative");
            self.pending_initial.fetch_max(0, Ordering::SeqCst);
        }
        if left <= 0 {
            self.report_if_synced();
        }
    }
}

impl HasSynced for HandlerSync {
    fn has_synced(&self) -> bool {
        // Upstream first: once it is true, every initial add has been
        // counted, so a zero count read after it is final.
        self.upstream.has_synced() && self.pending_initial.load(Ordering::SeqCst) <= 0
    }
}

/// When a listener wants its next resync.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResyncSchedule {
    /// The period asked for (after the 1 s minimum and, when added after
    /// start, the informer's check period were applied).
    pub(crate) requested: Duration,
    /// The period in force: `requested`, raised to the check period, or zero
    /// when the informer does not resync.
    pub(crate) period: Duration,
    /// The earliest time of the next resync.
    pub(crate) next: Instant,
}

impl ResyncSchedule {
    pub(crate) fn new(requested: Duration, check: Duration, now: Instant) -> Self {
        let period = effective_resync_period(requested, check);
        Self {
            requested,
            period,
            next: now + period,
        }
    }

    /// Whether a resync is due at `now`.
    pub(crate) fn is_due(&self, now: Instant) -> bool {
        !self.period.is_zero() && now >= self.next
    }
}

/// The resync period a listener gets: none if it asked for none or if the
/// informer never resyncs, else at least the informer's check period
/// (client-go's `determineResyncPeriod`).
pub(crate) fn effective_resync_period(requested: Duration, check: Duration) -> Duration {
    if requested.is_zero() {
        return Duration::ZERO;
    }
    if check.is_zero() {
        tracing::info!(
            ?requested,
            "the handler's resync period is ignored: this informer does not resync"
        );
        return Duration::ZERO;
    }
    requested.max(check)
}

struct State<K> {
    buffer: PendingBuffer<Notification<K>>,
    stopped: bool,
}

/// What a listener calls, and where.
pub(crate) enum HandlerKind<K> {
    /// A plain handler on its own OS thread (it may block).
    Thread(Box<dyn ResourceEventHandler<K>>),
    /// A plain handler on its own tokio task (it does not block).
    Inline(Box<dyn ResourceEventHandler<K>>),
    /// An async handler on its own tokio task.
    Task(Box<dyn AsyncResourceEventHandler<K>>),
}

/// One handler, its buffer and its worker thread or task.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    handler: HandlerKind<K>,
    state: Mutex<State<K>>,
    /// Wakes the worker thread.
    wake: Condvar,
    /// Wakes the worker task (a stored permit covers a notification added
    /// between its look at the buffer and its wait).
    task_wake: Notify,
    pub(crate) sync: Arc<HandlerSync>,
    pub(crate) resync: Arc<Mutex<ResyncSchedule>>,
    metrics: Option<Arc<dyn InformerMetrics>>,
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        id: u64,
        name: Arc<str>,
        handler: HandlerKind<K>,
        sync: Arc<HandlerSync>,
        resync: ResyncSchedule,
        metrics: Option<Arc<dyn InformerMetrics>>,
    ) -> Self {
        Self {
            id,
            name,
            handler,
            state: Mutex::new(State {
                buffer: PendingBuffer::default(),
                stopped: false,
            }),
            wake: Condvar::new(),
            task_wake: Notify::new(),
            sync,
            resync: Arc::new(Mutex::new(resync)),
            metrics,
        }
    }

    /// Starts the worker thread, or the worker task on the current tokio
    /// runtime for an async handler. The receiver completes when it has
    /// ended (after [`stop`](Self::stop), once the handler returns).
    pub(crate) fn spawn(
        self: &Arc<Self>,
        informer: &str,
    ) -> Result<oneshot::Receiver<()>, InformerError> {
        let (done_tx, done_rx) = oneshot::channel();
        let this = Arc::clone(self);
        match &self.handler {
            HandlerKind::Thread(_) => {
                // A NUL would make the name invalid (and `spawn` panic).
                let name = format!("{informer}/{}", self.name).replace('\0', "");
                let spawned = std::thread::Builder::new().name(name).spawn(move || {
                    this.work();
                    drop(this);
                    let _ = done_tx.send(());
                });
                spawned.map_err(|source| InformerError::Spawn {
                    handler: self.name.to_string(),
                    source,
                })?;
            }
            HandlerKind::Task(_) | HandlerKind::Inline(_) => {
                let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
                    InformerError::NoRuntimeForHandler {
                        handler: self.name.to_string(),
                    }
                })?;
                runtime.spawn(async move {
                    this.work_async().await;
                    drop(this);
                    let _ = done_tx.send(());
                });
            }
        }
        Ok(done_rx)
    }

    /// Wakes the worker thread or task.
    fn wake_worker(&self) {
        match self.handler {
            HandlerKind::Thread(_) => {
                self.wake.notify_all();
            }
            HandlerKind::Task(_) | HandlerKind::Inline(_) => self.task_wake.notify_one(),
        }
    }

    /// Appends a notification; never waits for the handler. Returns `false`
    /// (dropping it) once the listener is stopped.
    pub(crate) fn add(&self, notification: Notification<K>) -> bool {
        let kind = notification.kind();
        let depth = {
            let mut st = self.state.lock();
            if st.stopped {
                return false;
            }
            if notification.is_initial_add() {
                self.sync.initial_queued();
            }
            st.buffer.push(notification);
            self.wake_worker();
            st.buffer.len()
        };
        if let Some(m) = &self.metrics {
            m.notification_queued(&self.name, kind);
            m.pending(&self.name, depth);
        }
        true
    }

    /// Stops the listener: what is pending is dropped and the thread ends
    /// once the handler returns from the notification it is handling.
    pub(crate) fn stop(&self) {
        let mut st = self.state.lock();
        st.stopped = true;
        st.buffer.clear();
        self.wake_worker();
        drop(st);
        if let Some(m) = &self.metrics {
            m.pending(&self.name, 0);
            m.handler_registered(&self.name, false);
        }
    }

    /// Notifications waiting (not counting the one being handled).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.state.lock().buffer.len()
    }

    /// The worker thread's loop.
    fn work(&self) {
        let HandlerKind::Thread(handler) = &self.handler else {
            return;
        };
        while let Some((notification, depth)) = self.next() {
            if let Some(m) = &self.metrics {
                m.pending(&self.name, depth);
            }
            self.deliver(handler.as_ref(), notification);
        }
        tracing::debug!(handler = %self.name, "event handler stopped");
    }

    /// Waits for the next notification; `None` once stopped.
    fn next(&self) -> Option<(Notification<K>, usize)> {
        let mut st = self.state.lock();
        loop {
            if st.stopped {
                return None;
            }
            if let Some(n) = st.buffer.pop() {
                return Some((n, st.buffer.len()));
            }
            self.wake.wait(&mut st);
        }
    }

    /// The worker task's loop, for an async handler or a plain one.
    async fn work_async(&self) {
        loop {
            let next = {
                let mut st = self.state.lock();
                if st.stopped {
                    break;
                }
                st.buffer.pop().map(|n| (n, st.buffer.len()))
            };
            match next {
                Some((notification, depth)) => {
                    if let Some(m) = &self.metrics {
                        m.pending(&self.name, depth);
                    }
                    match &self.handler {
                        HandlerKind::Task(handler) => {
                            self.deliver_async(handler.as_ref(), notification).await;
                        }
                        HandlerKind::Inline(handler) => {
                            self.deliver(handler.as_ref(), notification);
                            // a long backlog must not hold the runtime's
                            // thread: yield once the task's budget is spent
                            tokio::task::consume_budget().await;
                        }
                        HandlerKind::Thread(_) => return,
                    }
                }
                None => self.task_wake.notified().await,
            }
        }
        tracing::debug!(handler = %self.name, "event handler task stopped");
    }

    /// Calls the handler. A panic is caught and logged, and counts as
    /// handled: the handler goes on with the next notification.
    fn deliver(&self, handler: &dyn ResourceEventHandler<K>, notification: Notification<K>) {
        let started = self.metrics.as_ref().map(|_| Instant::now());
        let outcome = catch_unwind(AssertUnwindSafe(|| match &notification {
            Notification::Add { obj, initial } => handler.on_add(obj, *initial),
            Notification::Update { old, new } => handler.on_update(old, new),
            Notification::Delete(obj) => handler.on_delete(obj),
        }));
        self.handled(notification, started, outcome.err());
    }

    /// [`deliver`](Self::deliver) for an async handler: a panic while
    /// building or polling its future is caught the same way.
    async fn deliver_async(
        &self,
        handler: &dyn AsyncResourceEventHandler<K>,
        notification: Notification<K>,
    ) {
        let started = self.metrics.as_ref().map(|_| Instant::now());
        let call = catch_unwind(AssertUnwindSafe(|| match &notification {
            Notification::Add { obj, initial } => handler.on_add(Arc::clone(obj), *initial),
            Notification::Update { old, new } => {
                handler.on_update(Arc::clone(old), Arc::clone(new))
            }
            Notification::Delete(obj) => handler.on_delete(obj.clone()),
        }));
        let outcome = match call {
            Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        self.handled(notification, started, outcome.err());
    }

    /// After a call: logs a panic, counts an initial add as handled,
    /// records the metrics.
    fn handled(
        &self,
        notification: Notification<K>,
        started: Option<Instant>,
        panic: Option<Box<dyn Any + Send>>,
    ) {
        let kind = notification.kind();
        let initial = notification.is_initial_add();
        let panicked = panic.is_some();
        if let Some(panic) = panic {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            tracing::error!(handler = %self.name, %kind, %message, "event handler panicked");
        }
        drop(notification);
        if initial {
            self.sync.initial_handled();
        }
        if let (Some(m), Some(started)) = (&self.metrics, started) {
            m.notification_handled(&self.name, kind, started.elapsed(), panicked);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synced::SyncedFn;
    use kcontrol_indexer::ObjectOrTombstone;
    use std::sync::mpsc;

    struct Recorder(Mutex<mpsc::Sender<String>>);

    impl ResourceEventHandler<u32> for Recorder {
        fn on_add(&self, obj: &Arc<u32>, initial: bool) {
            if **obj == 13 {
                panic!("unlucky");
            }
            let _ = self.0.lock().send(format!("add {obj} {initial}"));
        }
        fn on_update(&self, old: &Arc<u32>, new: &Arc<u32>) {
            let _ = self.0.lock().send(format!("update {old} {new}"));
        }
        fn on_delete(&self, obj: &ObjectOrTombstone<u32>) {
            let _ = self.0.lock().send(format!("delete {}", obj.object()));
        }
    }

    /// The same recorder, async: 13 panics while polling, 14 while
    /// building the future.
    struct AsyncRecorder(Mutex<mpsc::Sender<String>>);

    impl AsyncResourceEventHandler<u32> for AsyncRecorder {
        fn on_add(&self, obj: Arc<u32>, initial: bool) -> crate::HandlerFuture<'_> {
            assert_ne!(*obj, 14, "unlucky too");
            Box::pin(async move {
                tokio::task::yield_now().await;
                if *obj == 13 {
                    panic!("unlucky");
                }
                let _ = self.0.lock().send(format!("add {obj} {initial}"));
            })
        }
        fn on_update(&self, old: Arc<u32>, new: Arc<u32>) -> crate::HandlerFuture<'_> {
            Box::pin(async move {
                let _ = self.0.lock().send(format!("update {old} {new}"));
            })
        }
        fn on_delete(&self, obj: ObjectOrTombstone<u32>) -> crate::HandlerFuture<'_> {
            Box::pin(async move {
                let _ = self.0.lock().send(format!("delete {}", obj.object()));
            })
        }
    }

    fn listener(upstream: bool) -> (Arc<Listener<u32>>, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        listener_of(
            upstream,
            HandlerKind::Thread(Box::new(Recorder(Mutex::new(tx)))),
            rx,
        )
    }

    fn async_listener(upstream: bool) -> (Arc<Listener<u32>>, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        listener_of(
            upstream,
            HandlerKind::Task(Box::new(AsyncRecorder(Mutex::new(tx)))),
            rx,
        )
    }

    fn listener_of(
        upstream: bool,
        handler: HandlerKind<u32>,
        rx: mpsc::Receiver<String>,
    ) -> (Arc<Listener<u32>>, mpsc::Receiver<String>) {
        let sync = Arc::new(HandlerSync::new(
            "h".into(),
            Arc::new(SyncedFn(move || upstream)),
            None,
        ));
        let l = Arc::new(Listener::new(
            1,
            "h".into(),
            handler,
            sync,
            ResyncSchedule::new(Duration::ZERO, Duration::ZERO, Instant::now()),
            None,
        ));
        (l, rx)
    }

    /// IN1 for async handlers: in order, on a task, surviving panics both
    /// while the future is built and while it runs; the task ends on stop.
    #[test]
    fn an_async_handler_gets_the_same_notifications_on_a_task() {
        let (l, rx) = async_listener(true);
        assert!(
            matches!(
                l.spawn("test"),
                Err(InformerError::NoRuntimeForHandler { .. })
            ),
            "an async handler needs a runtime"
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let done = runtime.block_on(async { l.spawn("test") }).unwrap();
        let worker = std::thread::spawn(move || runtime.block_on(done));
        for n in [1, 13, 14] {
            l.add(Notification::Add {
                obj: Arc::new(n),
                initial: true,
            });
        }
        l.add(Notification::Update {
            old: Arc::new(1),
            new: Arc::new(2),
        });
        l.add(Notification::Delete(ObjectOrTombstone::Object(Arc::new(2))));
        assert_eq!(recv(&rx), "add 1 true");
        assert_eq!(recv(&rx), "update 1 2");
        assert_eq!(recv(&rx), "delete 2");
        // both panicking initial adds counted as handled (the last event
        // recorded came after them)
        assert!(l.sync.has_synced());
        l.stop();
        worker.join().unwrap().unwrap();
        assert!(rx.try_recv().is_err());
        assert_eq!(Arc::strong_count(&l), 1, "the task let go of the listener");
    }

    /// IN1 for a plain handler on a task (the default on a runtime): in
    /// order, surviving a panic, a long backlog yielding to the other tasks
    /// of a one-thread runtime; the task ends on stop.
    #[test]
    fn a_plain_handler_on_a_task_gets_the_same_notifications() {
        let (tx, rx) = mpsc::channel();
        let (l, rx) = listener_of(
            true,
            HandlerKind::Inline(Box::new(Recorder(Mutex::new(tx)))),
            rx,
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let backlog = 1000;
        for n in [1, 13] {
            l.add(Notification::Add {
                obj: Arc::new(n),
                initial: true,
            });
        }
        for n in 0..backlog {
            l.add(Notification::Update {
                old: Arc::new(n),
                new: Arc::new(n + 1),
            });
        }
        let (ticked_tx, ticked_rx) = mpsc::channel();
        let watched = Arc::clone(&l);
        let done = {
            let _runtime = runtime.enter();
            let done = l.spawn("test").unwrap();
            // spawned after the handler's task, on the runtime's one
            // thread: it runs amid the backlog only if the task yields
            tokio::spawn(async move {
                let _ = ticked_tx.send(watched.pending());
            });
            done
        };
        let worker = std::thread::spawn(move || runtime.block_on(done));
        assert_eq!(recv(&rx), "add 1 true");
        let mut order = Vec::new();
        for _ in 0..backlog {
            order.push(recv(&rx));
        }
        let want: Vec<String> = (0..backlog)
            .map(|n| format!("update {n} {}", n + 1))
            .collect();
        assert_eq!(order, want);
        let pending_when_ticked = ticked_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            pending_when_ticked > 0,
            "the backlog did not yield to the runtime"
        );
        assert!(l.sync.has_synced(), "the panicking add counted as handled");
        l.stop();
        worker.join().unwrap().unwrap();
        assert!(rx.try_recv().is_err());
        assert_eq!(Arc::strong_count(&l), 1, "the task let go of the listener");
    }

    fn recv(rx: &mpsc::Receiver<String>) -> String {
        rx.recv_timeout(Duration::from_secs(10)).unwrap()
    }

    #[test]
    fn delivers_in_order_and_survives_a_panicking_handler() {
        let (l, rx) = listener(true);
        let done = l.spawn("test").unwrap();
        l.add(Notification::Add {
            obj: Arc::new(1),
            initial: true,
        });
        l.add(Notification::Add {
            obj: Arc::new(13),
            initial: true,
        });
        l.add(Notification::Update {
            old: Arc::new(1),
            new: Arc::new(2),
        });
        l.add(Notification::Delete(ObjectOrTombstone::Object(Arc::new(2))));
        assert_eq!(recv(&rx), "add 1 true");
        assert_eq!(recv(&rx), "update 1 2");
        assert_eq!(recv(&rx), "delete 2");
        // the panicking initial add counted as handled
        kcontrol_testserver::eventually_blocking("the panicking add counted as handled", || {
            l.sync.has_synced()
        });
        l.stop();
        assert!(!l.add(Notification::Add {
            obj: Arc::new(3),
            initial: false
        }));
        done.blocking_recv().unwrap();
        assert!(rx.try_recv().is_err());
        assert_eq!(
            Arc::strong_count(&l),
            1,
            "the thread let go of the listener"
        );
    }

    #[test]
    fn not_synced_while_initial_adds_wait_or_upstream_is_not() {
        let (l, rx) = listener(false);
        l.add(Notification::Add {
            obj: Arc::new(1),
            initial: true,
        });
        assert!(!l.sync.has_synced());
        assert_eq!(l.pending(), 1);
        let done = l.spawn("test").unwrap();
        assert_eq!(recv(&rx), "add 1 true");
        assert!(!l.sync.has_synced(), "upstream not synced");
        l.stop();
        done.blocking_recv().unwrap();
    }

    #[test]
    fn effective_periods_follow_client_go() {
        let s = Duration::from_secs;
        assert_eq!(effective_resync_period(s(0), s(10)), s(0));
        assert_eq!(effective_resync_period(s(5), s(0)), s(0));
        assert_eq!(effective_resync_period(s(5), s(10)), s(10));
        assert_eq!(effective_resync_period(s(30), s(10)), s(30));
        let now = Instant::now();
        let sched = ResyncSchedule::new(s(30), s(10), now);
        assert!(!sched.is_due(now + s(29)));
        assert!(sched.is_due(now + s(30)));
        assert!(!ResyncSchedule::new(s(0), s(10), now).is_due(now + s(1000)));
    }
}
