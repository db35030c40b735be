//! Queue metrics (WQ7), shaped like client-go's `workqueue` metrics: a
//! [`MetricsProvider`] makes, for each named queue, the seven metrics
//! below; the queue updates them as items move.
//!
//! | metric | kind | meaning |
//! |---|---|---|
//! | depth | gauge | items waiting to be handed out (dirty items) |
//! | adds | counter | adds that made an item dirty |
//! | queue latency | histogram (seconds) | time from first add to `get` |
//! | work duration | histogram (seconds) | time from `get` to `done` |
//! | unfinished work | settable gauge (seconds) | sum of the ages of all items being processed, updated every 500 ms |
//! | longest running processor | settable gauge (seconds) | age of the oldest item being processed, updated every 500 ms |
//! | retries | counter | `add_after` / `add_rate_limited` calls |
//!
//! Queues without a name or without a provider record nothing and pay
//! nothing on the hot path (not even a clock read).

#[cfg(feature = "prometheus")]
pub mod prometheus;
pub(crate) mod recorder;

/// A gauge that goes up and down.
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge set to a value.
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A counter.
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A distribution of observed values (seconds, for queue metrics).
pub trait HistogramMetric: Send + Sync {
    /// Records one value.
    fn observe(&self, value: f64);
}

/// Makes the metrics of one named queue. Each method is called once per
/// queue, with the queue's name; each defaults to a metric that records
/// nothing, so a provider implements only the ones it keeps.
pub trait MetricsProvider: Send + Sync {
    /// Items waiting.
    fn new_depth_metric(&self, _name: &str) -> Box<dyn GaugeMetric> {
        Box::new(NoopMetric)
    }
    /// Adds that made an item dirty.
    fn new_adds_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(NoopMetric)
    }
    /// Seconds from add to `get`.
    fn new_latency_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(NoopMetric)
    }
    /// Seconds from `get` to `done`.
    fn new_work_duration_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(NoopMetric)
    }
    /// Sum of the ages of items being processed, in seconds.
    fn new_unfinished_work_seconds_metric(&self, _name: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(NoopMetric)
    }
    /// Age of the oldest item being processed, in seconds.
    fn new_longest_running_processor_seconds_metric(
        &self,
        _name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(NoopMetric)
    }
    /// Retries (`add_after` calls).
    fn new_retries_metric(&self, _name: &str) -> Box<dyn CounterMetric> {
        Box::new(NoopMetric)
    }
}

/// A metric that records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopMetric;

impl GaugeMetric for NoopMetric {
    fn inc(&self) {}
    fn dec(&self) {}
}

impl SettableGaugeMetric for NoopMetric {
    fn set(&self, _value: f64) {}
}

impl CounterMetric for NoopMetric {
    fn inc(&self) {}
}

impl HistogramMetric for NoopMetric {
    fn observe(&self, _value: f64) {}
}

/// A provider whose metrics record nothing. A queue configured with no
/// provider records nothing at all and costs less still.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopMetricsProvider;

impl MetricsProvider for NoopMetricsProvider {}
