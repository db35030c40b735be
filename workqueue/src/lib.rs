//! A deduplicating, delaying, rate-limited work queue with client-go
//! semantics (`k8s.io/client-go/util/workqueue`), for controllers written
//! in Rust.
//!
//! - [`Queue`]: items are deduplicated while they wait, handed out in the
//!   order they were first added, never to two workers at once; an item
//!   added while it is processed is queued again when it is `done`.
//! - [`DelayingQueue`]: adds an item after a delay (`add_after`), with its
//!   own timer thread, so it needs no async runtime.
//! - [`RateLimitingQueue`]: retries wait what a [`RateLimiter`] says
//!   (`add_rate_limited`, `forget`, `num_requeues`); by default
//!   [`default_controller_rate_limiter`].
//! - Consumers are OS threads ([`Queue::get`] blocks) and async tasks
//!   ([`Queue::get_async`], [`Queue::stream`]) — on the same queue at once.
//! - Metrics through [`MetricsProvider`] (Prometheus with the `prometheus`
//!   feature), [`parallelize`] for fan-out work.
//!
//! A worker loop, as a controller runs it:
//!
//! ```
//! use std::thread;
//! use kcontrol_workqueue::RateLimitingQueue;
//!
//! fn reconcile(key: &str) -> Result<(), String> {
//!     if key.ends_with("bad") { Err("not yet".into()) } else { Ok(()) }
//! }
//!
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
//! let workers: Vec<_> = (0..2)
//!     .map(|_| {
//!         let queue = queue.clone();
//!         thread::spawn(move || {
//!             while let Some(key) = queue.get() {
//!                 match reconcile(&key) {
//!                     Ok(()) => queue.forget(&key),
//!                     Err(_) if queue.num_requeues(&key) < 3 => queue.add_rate_limited(key.clone()),
//!                     Err(_) => queue.forget(&key), // give up
//!                 }
//!                 queue.done(&key);
//!             }
//!         })
//!     })
//!     .collect();
//! for key in ["default/a", "default/b", "default/bad"] {
//!     queue.add(key.to_owned());
//! }
//! // ... later, on the way out:
//! # while !queue.is_empty() || queue.processing_len() > 0 || queue.scheduled_len() > 0 {
//! #     thread::sleep(std::time::Duration::from_millis(5));
//! # }
//! queue.shut_down_with_drain();
//! for w in workers {
//!     w.join().unwrap();
//! }
//! ```

mod clock;
mod config;
mod delaying_queue;
mod forward;
mod get;
mod hints;
mod housekeeper;
pub mod metrics;
mod parallelize;
mod positions;
mod queue;
pub mod rate_limiter;
mod rate_limiting_queue;
mod schedule;
mod shared;
mod state;
mod sync;
mod waiters;

use std::hash::Hash;

pub use clock::{Clock, FakeClock, RealClock};
pub use config::QueueConfig;
pub use delaying_queue::DelayingQueue;
pub use get::{Drain, Get, ItemStream};
pub use metrics::{MetricsProvider, NoopMetricsProvider};
pub use parallelize::{parallelize, parallelize_until, parallelize_with, ParallelizeOptions};
pub use queue::{Queue, TryGet};
pub use rate_limiter::{
    default_controller_rate_limiter, default_item_based_rate_limiter, BucketRateLimiter,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter,
    RateLimiterError, WithMaxWaitRateLimiter,
};
pub use rate_limiting_queue::RateLimitingQueue;

/// What a queue can hold: any `Hash + Eq + Clone + Send + Sync + 'static`
/// type (implemented for all of them). Items are cloned once when handed
/// out, so cheap clones (`String` keys, `Arc`s) suit best.
pub trait Item: Hash + Eq + Clone + Send + Sync + 'static {}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Item for T {}
