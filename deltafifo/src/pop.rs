//! Popping (DF7): wait for a queued key (blocking an OS thread, or as a
//! tokio task), hand its whole delta list to a processor, requeue it if the
//! processor asks.

use std::pin::pin;
use std::time::Instant;

use kcontrol_indexer::KubeObject;
use parking_lot::MutexGuard;

use crate::delta::Deltas;
use crate::error::{PopError, ProcessError};
use crate::fifo::{DeltaFifo, State};
use crate::queue::Entry;
use crate::reentry::ProcessorScope;

impl<K: KubeObject> DeltaFifo<K> {
    /// Blocks the calling thread until a key is queued, then hands its deltas
    /// (oldest first) to `process` with `is_in_initial_list` (whether the
    /// entry belongs to the initial population, see
    /// [`has_synced`](Self::has_synced)), and returns what it returns.
    ///
    /// Keys come out in the order they were first queued. The processor runs
    /// while no other processor of this FIFO runs, and while `delete`,
    /// `resync` and replace `finish` wait: that is what keeps a known-objects
    /// store updated by the processor in step with the queue. Keep it short
    /// (update a store, hand notifications to buffers); it may call
    /// [`add`](Self::add) and [`update`](Self::update), while `delete`,
    /// `resync`, replace `finish` and `pop` fail there with a
    /// `CalledFromProcessor` error.
    ///
    /// If the processor returns [`ProcessError::Requeue`], the deltas are
    /// queued again: at the back, or, if changes for the key were queued
    /// while it ran, in front of those (no change is lost), and `pop` returns
    /// [`PopError::Requeued`]. [`ProcessError::Failed`] drops them and returns
    /// [`PopError::Failed`]. A processor that panics loses its deltas (as if
    /// it had failed) and the panic goes on to the caller; the FIFO stays
    /// usable.
    ///
    /// Returns [`PopError::Closed`] once the FIFO is closed and empty.
    pub fn pop<T, E, F>(&self, process: F) -> Result<T, PopError<E>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<T, ProcessError<E>>,
    {
        if self.check_not_in_processor().is_err() {
            return Err(PopError::CalledFromProcessor);
        }
        let taken = self.take_blocking()?;
        self.run(taken, process)
    }

    /// [`pop`](Self::pop) for tokio tasks: waits without blocking the
    /// runtime, then runs the processor on the task's thread (taking the
    /// processing lock, which another processor holds only briefly).
    /// Cancel-safe: a dropped future pops nothing.
    pub async fn pop_async<T, E, F>(&self, process: F) -> Result<T, PopError<E>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<T, ProcessError<E>>,
    {
        if self.check_not_in_processor().is_err() {
            return Err(PopError::CalledFromProcessor);
        }
        let taken = self.take_async().await?;
        self.run(taken, process)
    }

    /// Blocks until an entry is taken (with the processing lock held), or
    /// returns `Closed` once closed and empty.
    fn take_blocking<E>(&self) -> Result<Taken<'_, K>, PopError<E>> {
        let mut st = self.state.lock();
        loop {
            while !st.queue.is_empty() {
                match self.take_front(st) {
                    Ok(taken) => return Ok(taken),
                    Err(back) => st = back,
                }
            }
            if st.closed {
                return Err(PopError::Closed);
            }
            st.thread_waiters += 1;
            self.wake_threads.wait(&mut st);
            st.thread_waiters -= 1;
        }
    }

    /// [`take_blocking`](Self::take_blocking) for tasks.
    async fn take_async<E>(&self) -> Result<Taken<'_, K>, PopError<E>> {
        loop {
            let mut notified = pin!(self.wake_tasks.notified());
            {
                let mut st = self.state.lock();
                while !st.queue.is_empty() {
                    match self.take_front(st) {
                        Ok(taken) => return Ok(taken),
                        Err(back) => st = back,
                    }
                }
                if st.closed {
                    return Err(PopError::Closed);
                }
                // Registered before the lock is released: a producer that
                // queues after this sees the waiter and wakes it.
                notified.as_mut().enable();
                st.task_waiters += 1;
            }
            let waiting = TaskWaiter { fifo: self };
            notified.await;
            drop(waiting);
        }
    }

    /// Takes the front entry with the processing lock, given the state lock
    /// and a non-empty queue. When another processor runs, waits for it
    /// (releasing the state lock, to keep the lock order) and gives the state
    /// lock back if the queue emptied meanwhile.
    fn take_front<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<K>>,
    ) -> Result<Taken<'a, K>, MutexGuard<'a, State<K>>> {
        // `try_lock` never waits, so taking it under the state lock cannot
        // deadlock; it is the usual case with one popper.
        let processing = match self.processing.try_lock() {
            Some(processing) => processing,
            None => {
                drop(st);
                let processing = self.processing.lock();
                st = self.state.lock();
                processing
            }
        };
        match st.queue.take_front() {
            Some(entry) => Ok(Taken {
                _processing: processing,
                entry,
            }),
            None => {
                drop(processing);
                Err(st)
            }
        }
    }

    /// Runs `process` on a taken entry, then requeues it or accounts for it
    /// before the processing lock is released.
    fn run<T, E, F>(&self, taken: Taken<'_, K>, process: F) -> Result<T, PopError<E>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<T, ProcessError<E>>,
    {
        let Taken {
            _processing: processing,
            entry,
        } = taken;
        let started = self.metrics.as_ref().map(|_| Instant::now());
        let outcome = {
            let _scope = ProcessorScope::enter(self.id());
            let mut unwinding = PanicAccounting {
                fifo: self,
                initial: entry.initial,
                armed: true,
            };
            let outcome = process(&entry.deltas, entry.initial);
            unwinding.armed = false;
            outcome
        };
        let requeue = matches!(outcome, Err(ProcessError::Requeue(_)));
        let mut depth = None;
        let mut leftover = None;
        if requeue || entry.initial || self.metrics.is_some() {
            let mut st = self.state.lock();
            if requeue {
                let new = st.queue.requeue(entry);
                self.wake(&st, usize::from(new));
            } else {
                st.queue.finished(entry.initial);
                leftover = Some(entry);
            }
            depth = Some(st.queue.len());
        } else {
            leftover = Some(entry);
        }
        drop(processing);
        // The deltas (and any object only they kept alive) go outside the locks.
        drop(leftover);
        if let (Some(metrics), Some(started), Some(depth)) = (&self.metrics, started, depth) {
            metrics.processed(started.elapsed(), requeue);
            metrics.depth(depth);
        }
        match outcome {
            Ok(value) => Ok(value),
            Err(ProcessError::Requeue(e)) => Err(PopError::Requeued(e)),
            Err(ProcessError::Failed(e)) => Err(PopError::Failed(e)),
        }
    }
}

/// An entry taken from the queue, with the processing lock that covers it
/// until it is processed and accounted for.
struct Taken<'a, K> {
    _processing: MutexGuard<'a, ()>,
    entry: Entry<K>,
}

/// Accounts for an entry whose processor panicked: it is dropped like a
/// failed one, so `has_synced` is not held back forever.
struct PanicAccounting<'a, K: KubeObject> {
    fifo: &'a DeltaFifo<K>,
    initial: bool,
    /// Cleared when the processor returns.
    armed: bool,
}

impl<K: KubeObject> Drop for PanicAccounting<'_, K> {
    fn drop(&mut self) {
        if self.armed {
            tracing::error!("DeltaFIFO processor panicked; its deltas are dropped");
            self.fifo.state.lock().queue.finished(self.initial);
        }
    }
}

/// Un-counts a waiting task however its wait ends (woken or cancelled).
struct TaskWaiter<'a, K: KubeObject> {
    fifo: &'a DeltaFifo<K>,
}

impl<K: KubeObject> Drop for TaskWaiter<'_, K> {
    fn drop(&mut self) {
        let mut st = self.fifo.state.lock();
        st.task_waiters = st.task_waiters.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::delta::DeltaType::{Added, Replaced, Updated};
    use crate::error::FifoError;
    use crate::test_support::{cm, fifo_with, pop_one, summary, wait_for_blocked_poppers, Store};
    use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;

    fn plain() -> Arc<DeltaFifo<ConfigMap>> {
        DeltaFifo::builder().build()
    }

    #[test]
    fn df7_a_requeued_key_goes_to_the_back_with_its_deltas() {
        let fifo = plain();
        fifo.add(cm("a", 1)).unwrap();
        fifo.update(cm("a", 2)).unwrap();
        fifo.add(cm("b", 1)).unwrap();
        let r = fifo.pop(|d, _| Err::<(), _>(ProcessError::Requeue(d.len())));
        assert!(matches!(r, Err(PopError::Requeued(2))));
        assert_eq!(fifo.list_keys(), ["ns/b", "ns/a"]);
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Added, "1".into(), false), (Updated, "2".into(), false)]
        );
    }

    #[test]
    fn df7_a_requeue_goes_in_front_of_changes_queued_while_processing() {
        let fifo = plain();
        fifo.add(cm("a", 1)).unwrap();
        fifo.add(cm("b", 1)).unwrap();
        let r = fifo.pop(|_, _| {
            fifo.update(cm("b", 2)).unwrap();
            fifo.update(cm("a", 2)).unwrap(); // a is queued again meanwhile
            Err::<(), _>(ProcessError::Requeue("busy"))
        });
        assert!(matches!(r, Err(PopError::Requeued("busy"))));
        // a keeps the place it got while processing, nothing is lost
        assert_eq!(fifo.list_keys(), ["ns/b", "ns/a"]);
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Added, "1".into(), false), (Updated, "2".into(), false)]
        );
    }

    #[test]
    fn df7_a_failed_processor_drops_the_deltas() {
        let fifo = plain();
        fifo.add(cm("a", 1)).unwrap();
        let r = fifo.pop(|_, _| Err::<(), _>(ProcessError::Failed("bad")));
        assert!(matches!(r, Err(PopError::Failed("bad"))));
        assert!(fifo.is_empty());
        assert!(fifo.has_synced());
    }

    #[test]
    fn df5_a_requeued_initial_entry_keeps_has_synced_false() {
        let fifo = plain();
        fifo.replace([cm("a", 1)], "1").unwrap();
        let r = fifo.pop(|_, initial| Err::<(), _>(ProcessError::Requeue(initial)));
        assert!(matches!(r, Err(PopError::Requeued(true))));
        assert!(!fifo.has_synced());
        fifo.add(cm("b", 1)).unwrap();
        fifo.add(cm("a", 2)).unwrap();
        // a (requeued, initial) is still first; b is not initial
        let (a, initial) = pop_one(&fifo);
        assert_eq!(a.key(), "ns/a");
        assert_eq!(a.len(), 2);
        assert!(initial);
        assert!(fifo.has_synced());
        assert!(!pop_one(&fifo).1);
    }

    #[test]
    fn df5_merging_two_initial_entries_counts_them_once() {
        let fifo = plain();
        let mut stream = fifo.begin_replace().unwrap();
        stream.add(cm("a", 1)).unwrap();
        let r = fifo.pop(|_, initial| {
            assert!(initial);
            // the stream lists a again while the first entry is processed
            stream.add(cm("a", 2)).unwrap();
            Err::<(), _>(ProcessError::Requeue(()))
        });
        assert!(r.is_err());
        assert_eq!(fifo.state.lock().queue.initial_pending(), 1);
        stream.finish("2").unwrap();
        assert!(!fifo.has_synced());
        let (a, initial) = pop_one(&fifo);
        assert_eq!(
            summary(&a),
            [(Replaced, "1".into(), false), (Replaced, "2".into(), false)]
        );
        assert!(initial);
        assert!(fifo.has_synced());
    }

    #[test]
    fn df7_calls_that_would_wait_for_the_processor_fail_inside_it() {
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        fifo.add(cm("a", 1)).unwrap();
        fifo.pop(|_, _| {
            assert!(matches!(
                fifo.delete(cm("a", 2)),
                Err(FifoError::CalledFromProcessor)
            ));
            assert!(matches!(fifo.resync(), Err(FifoError::CalledFromProcessor)));
            assert!(matches!(
                fifo.begin_replace(),
                Err(FifoError::CalledFromProcessor)
            ));
            let inner = fifo.pop(|_, _| Ok::<_, ProcessError<()>>(()));
            assert!(matches!(inner, Err(PopError::CalledFromProcessor)));
            fifo.add(cm("b", 1)).unwrap();
            Ok::<_, ProcessError<()>>(())
        })
        .unwrap();
        assert_eq!(fifo.list_keys(), ["ns/b"]);
        // outside the processor they work again
        fifo.delete(cm("b", 2)).unwrap();
    }

    #[test]
    fn df7_pop_drains_a_closed_fifo_then_reports_closed() {
        let fifo = plain();
        fifo.add(cm("a", 1)).unwrap();
        fifo.close();
        assert_eq!(pop_one(&fifo).0.key(), "ns/a");
        let r = fifo.pop(|_, _| Ok::<_, ProcessError<()>>(()));
        assert!(matches!(r, Err(PopError::Closed)));
    }

    #[test]
    fn df7_close_wakes_a_blocked_pop() {
        let fifo = plain();
        let popper = {
            let fifo = Arc::clone(&fifo);
            std::thread::spawn(move || fifo.pop(|_, _| Ok::<_, ProcessError<()>>(())))
        };
        wait_for_blocked_poppers(&fifo, 1, 0);
        fifo.close();
        assert!(matches!(popper.join().unwrap(), Err(PopError::Closed)));
    }

    // multi-threaded: the test thread blocks until the task is parked
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn df7_pop_async_waits_for_a_key_and_close_wakes_it() {
        let fifo = plain();
        let task = {
            let fifo = Arc::clone(&fifo);
            tokio::spawn(async move {
                fifo.pop_async(|d, _| Ok::<_, ProcessError<()>>(d.key().to_owned()))
                    .await
            })
        };
        wait_for_blocked_poppers(&fifo, 0, 1);
        fifo.add(cm("a", 1)).unwrap();
        assert_eq!(task.await.unwrap().unwrap(), "ns/a");

        let waiting = {
            let fifo = Arc::clone(&fifo);
            tokio::spawn(async move { fifo.pop_async(|_, _| Ok::<_, ProcessError<()>>(())).await })
        };
        wait_for_blocked_poppers(&fifo, 0, 1);
        fifo.close();
        assert!(matches!(waiting.await.unwrap(), Err(PopError::Closed)));
    }

    /// DF7: `close` wakes every popper parked in an empty FIFO, threads and
    /// tasks together; the test waits until all eight are parked.
    #[test]
    fn df7_close_wakes_every_blocked_popper_threads_and_tasks() {
        let fifo = plain();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let (closed_tx, closed_rx) = std::sync::mpsc::channel();
        for _ in 0..4 {
            let (fifo, closed) = (Arc::clone(&fifo), closed_tx.clone());
            std::thread::spawn(move || {
                let r = fifo.pop(|_, _| Ok::<_, ProcessError<()>>(()));
                closed.send(matches!(r, Err(PopError::Closed))).unwrap();
            });
        }
        for _ in 0..4 {
            let (fifo, closed) = (Arc::clone(&fifo), closed_tx.clone());
            runtime.spawn(async move {
                let r = fifo.pop_async(|_, _| Ok::<_, ProcessError<()>>(())).await;
                closed.send(matches!(r, Err(PopError::Closed))).unwrap();
            });
        }
        wait_for_blocked_poppers(&fifo, 4, 4);
        assert!(
            closed_rx.try_recv().is_err(),
            "a popper returned from an empty FIFO"
        );
        fifo.close();
        for i in 0..8 {
            let closed = closed_rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("only {i} of 8 poppers woke up"));
            assert!(closed);
        }
    }

    #[tokio::test]
    async fn pop_async_is_cancel_safe() {
        let fifo = plain();
        let cancelled = tokio::time::timeout(
            Duration::from_millis(10),
            fifo.pop_async(|_, _| Ok::<_, ProcessError<()>>(())),
        )
        .await;
        assert!(cancelled.is_err());
        assert_eq!(fifo.state.lock().task_waiters, 0);
        fifo.add(cm("a", 1)).unwrap();
        assert_eq!(fifo.len(), 1, "a cancelled pop took nothing");
        let key = fifo
            .pop_async(|d, _| Ok::<_, ProcessError<()>>(d.key().to_owned()))
            .await
            .unwrap();
        assert_eq!(key, "ns/a");
    }

    #[test]
    fn df7_a_panicking_processor_leaves_the_fifo_usable() {
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        fifo.replace([cm("a", 1), cm("b", 1)], "1").unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fifo.pop(|_, _| -> Result<(), ProcessError<()>> { panic!("handler bug") })
        }));
        assert!(panicked.is_err());
        // the lock and the reentrancy marker were released on unwind
        fifo.delete(cm("b", 2)).unwrap();
        assert_eq!(fifo.list_keys(), ["ns/b"]);
        assert!(!fifo.has_synced());
        pop_one(&fifo);
        assert!(
            fifo.has_synced(),
            "the lost initial entry does not hold has_synced back"
        );
    }

    #[test]
    fn the_fifo_and_its_futures_can_cross_threads() {
        fn send_sync<T: Send + Sync>(_: &T) {}
        fn send<T: Send>(_: &T) {}
        let fifo = plain();
        send_sync(&fifo);
        let stream = fifo.begin_replace().unwrap();
        send_sync(&stream);
        drop(stream);
        let pop = fifo.pop_async(|_, _| Ok::<_, ProcessError<()>>(()));
        send(&pop);
    }
}
