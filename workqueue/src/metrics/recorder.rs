//! The per-queue bookkeeping behind the metrics: when each dirty item was
//! first added and when each item being processed was handed out. Exists
//! only for queues with metrics; called with the queue lock held.

use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hashbrown::HashMap;

use super::{CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric};
use crate::clock::Clock;

/// How often unfinished work and the longest running processor are updated.
pub(crate) const UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// The metrics of one queue and the times they are computed from.
pub(crate) struct Recorder<T> {
    clock: Arc<dyn Clock>,
    depth: Box<dyn GaugeMetric>,
    adds: Box<dyn CounterMetric>,
    latency: Box<dyn HistogramMetric>,
    work_duration: Box<dyn HistogramMetric>,
    unfinished: Box<dyn SettableGaugeMetric>,
    longest: Box<dyn SettableGaugeMetric>,
    added_at: HashMap<T, Instant>,
    started_at: HashMap<T, Instant>,
}

impl<T: Hash + Eq + Clone> Recorder<T> {
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str, clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished: provider.new_unfinished_work_seconds_metric(name),
            longest: provider.new_longest_running_processor_seconds_metric(name),
            added_at: HashMap::new(),
            started_at: HashMap::new(),
        }
    }

    /// An add made `item` dirty.
    pub(crate) fn on_add(&mut self, item: &T) {
        self.adds.inc();
        self.depth.inc();
        if !self.added_at.contains_key(item) {
            self.added_at.insert(item.clone(), self.clock.now());
        }
    }

    /// `item` was handed out.
    pub(crate) fn on_get(&mut self, item: &T) {
        let now = self.clock.now();
        self.depth.dec();
        self.started_at.insert(item.clone(), now);
        if let Some(added) = self.added_at.remove(item) {
            self.latency.observe(secs_between(added, now));
        }
    }

    /// `item` is done.
    pub(crate) fn on_done<Q>(&mut self, item: &Q)
    where
        T: std::borrow::Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        if let Some(started) = self.started_at.remove(item) {
            self.work_duration
                .observe(secs_between(started, self.clock.now()));
        }
    }

    /// Sets unfinished work and longest running processor from the items
    /// being processed.
    pub(crate) fn update_unfinished_work(&self) {
        let now = self.clock.now();
        let mut total = 0.0;
        let mut longest = 0.0f64;
        for started in self.started_at.values() {
            let age = secs_between(*started, now);
            total += age;
            longest = longest.max(age);
        }
        self.unfinished.set(total);
        self.longest.set(longest);
    }
}

fn secs_between(earlier: Instant, later: Instant) -> f64 {
    later.saturating_duration_since(earlier).as_secs_f64()
}
