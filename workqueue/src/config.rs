//! [`QueueConfig`]: how to build a named queue (client-go's
//! `TypedRateLimitingQueueConfig`): its name, metrics provider, clock and,
//! for a rate-limiting queue, its rate limiter.

use std::fmt;
use std::sync::Arc;

use crate::clock::{Clock, RealClock};
use crate::metrics::recorder::Recorder;
use crate::metrics::MetricsProvider;
use crate::rate_limiter::RateLimiter;
use crate::Item;

/// Settings of a queue; every one is optional.
///
/// ```
/// use kcontrol_workqueue::{QueueConfig, RateLimitingQueue};
///
/// let queue: RateLimitingQueue<String> =
///     RateLimitingQueue::with_config(QueueConfig::new().name("foos"));
/// assert_eq!(queue.name(), "foos");
/// # queue.shut_down();
/// ```
pub struct QueueConfig<T> {
    pub(crate) name: String,
    pub(crate) metrics_provider: Option<Arc<dyn MetricsProvider>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) rate_limiter: Option<Arc<dyn RateLimiter<T>>>,
}

impl<T> Default for QueueConfig<T> {
    fn default() -> Self {
        Self {
            name: String::new(),
            metrics_provider: None,
            clock: Arc::new(RealClock),
            rate_limiter: None,
        }
    }
}

impl<T> fmt::Debug for QueueConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueConfig")
            .field("name", &self.name)
            .field("metrics", &self.metrics_provider.is_some())
            .field("clock", &self.clock)
            .field("rate_limiter", &self.rate_limiter.is_some())
            .finish()
    }
}

impl<T: Item> QueueConfig<T> {
    /// Unnamed, no metrics, the real clock, the default rate limiter.
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

    /// The rate limiter of a [`crate::RateLimitingQueue`] (default:
    /// [`crate::default_controller_rate_limiter`]).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.rate_limiter = Some(Arc::new(limiter));
        self
    }

    /// The rate limiter, already shared.
    pub fn shared_rate_limiter(mut self, limiter: Arc<dyn RateLimiter<T>>) -> Self {
        self.rate_limiter = Some(limiter);
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
