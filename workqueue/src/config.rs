//! [`QueueConfig`]: how to build a named queue (client-go's
//! `TypedQueueConfig`): its name, metrics provider and clock. A
//! rate-limiting queue's limiter is an argument of its own constructor
//! (as in client-go), so no queue can be given one it would ignore.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::clock::{Clock, RealClock};
use crate::metrics::recorder::Recorder;
use crate::metrics::MetricsProvider;
use crate::Item;

/// Settings of a queue; every one is optional.
///
/// ```
/// use kcontrol_workqueue::{default_controller_rate_limiter, QueueConfig, RateLimitingQueue};
///
/// let queue: RateLimitingQueue<String> = RateLimitingQueue::with_config(
///     default_controller_rate_limiter(),
///     QueueConfig::new().name("foos"),
/// );
/// assert_eq!(queue.name(), "foos");
/// # queue.shut_down();
/// ```
pub struct QueueConfig<T> {
    pub(crate) name: String,
    pub(crate) metrics_provider: Option<Arc<dyn MetricsProvider>>,
    pub(crate) clock: Arc<dyn Clock>,
    item: PhantomData<fn(T)>,
}

impl<T> Default for QueueConfig<T> {
    fn default() -> Self {
        Self {
            name: String::new(),
            metrics_provider: None,
            clock: Arc::new(RealClock),
            item: PhantomData,
        }
    }
}

impl<T> fmt::Debug for QueueConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueConfig")
            .field("name", &self.name)
            .field("metrics", &self.metrics_provider.is_some())
            .field("clock", &self.clock)
            .finish()
    }
}

impl<T: Item> QueueConfig<T> {
    /// Unnamed, no metrics, the real clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the queue (metrics are labelled with it; a queue without a
    /// name records no metrics, as in client-go).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Records metrics through `provider` (named queues only).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics_provider = Some(provider);
        self
    }

    /// Reads time from `clock` (delays, metrics), e.g. a
    /// [`crate::FakeClock`] in tests.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub(crate) fn retries_metric(&self) -> Option<Box<dyn crate::metrics::CounterMetric>> {
        let provider = self.metrics_provider.as_ref()?;
        if self.name.is_empty() {
            return None;
        }
        Some(provider.new_retries_metric(&self.name))
    }

    pub(crate) fn recorder(&self) -> Option<Recorder<T>> {
        let provider = self.metrics_provider.as_ref()?;
        if self.name.is_empty() {
            return None;
        }
        Some(Recorder::new(
            provider.as_ref(),
            &self.name,
            Arc::clone(&self.clock),
        ))
    }
}
