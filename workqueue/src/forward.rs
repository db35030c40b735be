//! The methods that [`crate::DelayingQueue`] and [`crate::RateLimitingQueue`]
//! share with the queue they wrap, written out as their own inherent
//! methods (composition, not `Deref`: Rust API guidelines, C-DEREF). Each
//! calls the method of the same name on the wrapped queue, so the three
//! types answer to client-go's names alike and need no trait in scope.
//!
//! No `Deref` from one queue type to another:
//!
//! ```compile_fail
//! use kcontrol_workqueue::{DelayingQueue, RateLimitingQueue};
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
//! let delaying: &DelayingQueue<String> = &*queue;
//! ```
//!
//! and no rate limiter in a config that a plain queue would ignore:
//!
//! ```compile_fail
//! use kcontrol_workqueue::{default_controller_rate_limiter, Queue, QueueConfig};
//! let config = QueueConfig::new().rate_limiter(default_controller_rate_limiter());
//! let queue: Queue<String> = Queue::with_config(config);
//! ```

/// [`crate::Queue`]'s methods, on a type with `fn queue(&self) -> &Queue<T>`.
macro_rules! queue_methods {
    () => {
        /// The queue's name ("" when unnamed); see [`Queue::name`](crate::Queue::name).
        pub fn name(&self) -> &str {
            self.queue().name()
        }

        /// Adds an item (client-go `Add`); see [`Queue::add`](crate::Queue::add).
        #[inline]
        pub fn add(&self, item: T) {
            self.queue().add(item);
        }

        /// Adds a borrowed item, cloning it only if it is queued; see
        /// [`Queue::add_ref`](crate::Queue::add_ref).
        #[inline]
        pub fn add_ref<Q>(&self, item: &Q)
        where
            T: ::std::borrow::Borrow<Q>,
            Q: ?Sized + ::std::hash::Hash + Eq + ToOwned<Owned = T>,
        {
            self.queue().add_ref(item);
        }

        /// Takes the next item, blocking the calling thread while the queue
        /// is empty (client-go `Get`); see [`Queue::get`](crate::Queue::get).
        pub fn get(&self) -> Option<T> {
            self.queue().get()
        }

        /// Takes the next item without blocking; see
        /// [`Queue::try_get`](crate::Queue::try_get).
        pub fn try_get(&self) -> $crate::TryGet<T> {
            self.queue().try_get()
        }

        /// Takes the next item, blocking at most `timeout`; see
        /// [`Queue::get_timeout`](crate::Queue::get_timeout).
        pub fn get_timeout(&self, timeout: ::std::time::Duration) -> $crate::TryGet<T> {
            self.queue().get_timeout(timeout)
        }

        /// Takes the next item in an async task; see
        /// [`Queue::get_async`](crate::Queue::get_async).
        pub fn get_async(&self) -> $crate::Get<'_, T> {
            self.queue().get_async()
        }

        /// A stream of items for async consumers; see
        /// [`Queue::stream`](crate::Queue::stream).
        pub fn stream(&self) -> $crate::ItemStream<T> {
            self.queue().stream()
        }

        /// Ends the processing of an item (client-go `Done`); see
        /// [`Queue::done`](crate::Queue::done).
        #[inline]
        pub fn done(&self, item: &T) {
            self.queue().done(item);
        }

        /// Number of items waiting to be handed out; see
        /// [`Queue::len`](crate::Queue::len).
        pub fn len(&self) -> usize {
            self.queue().len()
        }

        /// Whether no item is waiting; see [`Queue::is_empty`](crate::Queue::is_empty).
        pub fn is_empty(&self) -> bool {
            self.queue().is_empty()
        }

        /// Number of items being processed; see
        /// [`Queue::processing_len`](crate::Queue::processing_len).
        pub fn processing_len(&self) -> usize {
            self.queue().processing_len()
        }

        /// Starts shutting down (client-go `ShutDown`); see
        /// [`Queue::shut_down`](crate::Queue::shut_down).
        pub fn shut_down(&self) {
            self.queue().shut_down();
        }

        /// Shuts down, then blocks until no item is being processed
        /// (client-go `ShutDownWithDrain`); see
        /// [`Queue::shut_down_with_drain`](crate::Queue::shut_down_with_drain).
        pub fn shut_down_with_drain(&self) {
            self.queue().shut_down_with_drain();
        }

        /// [`shut_down_with_drain`](Self::shut_down_with_drain) waiting at
        /// most `timeout`; see
        /// [`Queue::shut_down_with_drain_timeout`](crate::Queue::shut_down_with_drain_timeout).
        pub fn shut_down_with_drain_timeout(&self, timeout: ::std::time::Duration) -> bool {
            self.queue().shut_down_with_drain_timeout(timeout)
        }

        /// [`shut_down_with_drain`](Self::shut_down_with_drain) for async
        /// tasks; see
        /// [`Queue::shut_down_with_drain_async`](crate::Queue::shut_down_with_drain_async).
        pub fn shut_down_with_drain_async(&self) -> $crate::Drain<'_, T> {
            self.queue().shut_down_with_drain_async()
        }

        /// Whether the queue is shutting down (client-go `ShuttingDown`);
        /// see [`Queue::is_shutting_down`](crate::Queue::is_shutting_down).
        pub fn is_shutting_down(&self) -> bool {
            self.queue().is_shutting_down()
        }
    };
}

pub(crate) use queue_methods;
