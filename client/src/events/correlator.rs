//! The event correlator (client-go's `EventCorrelator`): before an event is
//! written it is
//!
//! 1. aggregated: when ten events about one object differ only by message
//!    within ten minutes, the next ones become one event whose message
//!    says it was combined from similar events;
//! 2. counted: an event seen before (same source, object, type, reason and
//!    message) becomes a patch of the earlier Event's `count`,
//!    `lastTimestamp` and `message` instead of a new Event;
//! 3. spam-filtered: see [`SpamFilter`](super::spam::SpamFilter).
//!
//! All three remember a bounded number of keys (LRU). The correlator is
//! owned by the writer task, so it needs no lock.

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use lru::LruCache;
use serde_json::{json, Value};

use super::keys::{aggregate_key, event_key};
use super::spam::SpamFilter;

/// Prefix of an aggregated event's message.
pub(crate) const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// Tuning of the correlator; the defaults are client-go's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CorrelatorOptions {
    /// Keys remembered by each of the aggregator, the counter and the spam
    /// filter (default 4096).
    pub lru_size: NonZeroUsize,
    /// Events one source may record about one object at once (default 25).
    pub spam_burst: u32,
    /// Refill rate of that budget in events per second (default 1/300: one
    /// every five minutes).
    pub spam_qps: f64,
    /// Distinct messages with the same reason about one object before they
    /// are combined (default 10).
    pub aggregate_max_events: usize,
    /// Window in which those messages count as similar (default 10 min).
    pub aggregate_interval: Duration,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        Self {
            lru_size: NonZeroUsize::new(4096).unwrap_or(NonZeroUsize::MIN),
            spam_burst: 25,
            spam_qps: 1.0 / 300.0,
            aggregate_max_events: 10,
            aggregate_interval: Duration::from_secs(600),
        }
    }
}

/// What the correlator decided about one event.
#[derive(Debug)]
pub(crate) struct Correlated {
    /// The event to write (named after the earlier occurrence when it repeats one).
    pub event: Event,
    /// A merge patch of the earlier Event, when this repeats one.
    pub patch: Option<Value>,
    /// The spam filter dropped it: write nothing.
    pub skip: bool,
}

#[derive(Debug)]
struct AggregateRecord {
    messages: HashSet<String>,
    last: Instant,
}

#[derive(Clone, Debug)]
struct EventLog {
    count: i32,
    first_timestamp: Option<Time>,
    name: String,
    resource_version: Option<String>,
}

/// Aggregation, counting and spam filtering of events.
#[derive(Debug)]
pub(crate) struct Correlator {
    options: CorrelatorOptions,
    aggregates: LruCache<String, AggregateRecord>,
    logs: LruCache<String, EventLog>,
    spam: SpamFilter,
}

impl Correlator {
    pub(crate) fn new(options: CorrelatorOptions) -> Self {
        Self {
            options,
            aggregates: LruCache::new(options.lru_size),
            logs: LruCache::new(options.lru_size),
            spam: SpamFilter::new(options.lru_size, options.spam_burst, options.spam_qps),
        }
    }

    /// Aggregates, counts and filters `event`, observed at `now`.
    pub(crate) fn correlate(&mut self, event: Event, now: Instant) -> Correlated {
        let (event, key) = self.aggregate(event, now);
        let (event, patch) = self.observe(event, key);
        let skip = !self.spam.allow(&event, now);
        Correlated { event, patch, skip }
    }

    /// Remembers what the server stored for an event, so the next repeat
    /// patches the right name and count.
    pub(crate) fn update_state(&mut self, stored: &Event) {
        let Some(name) = stored.metadata.name.clone() else {
            return;
        };
        self.logs.put(
            event_key(stored),
            EventLog {
                count: stored.count.unwrap_or(1),
                first_timestamp: stored.first_timestamp.clone(),
                name,
                resource_version: stored.metadata.resource_version.clone(),
            },
        );
    }

    /// Step 1: the event itself, or a combined one once too many similar
    /// messages arrived; and the key it is counted under.
    fn aggregate(&mut self, event: Event, now: Instant) -> (Event, String) {
        let group = aggregate_key(&event);
        let message = event.message.clone().unwrap_or_default();
        let interval = self.options.aggregate_interval;
        let record = self
            .aggregates
            .get_or_insert_mut(group.clone(), || AggregateRecord {
                messages: HashSet::new(),
                last: now,
            });
        if now.saturating_duration_since(record.last) > interval {
            record.messages.clear();
        }
        record.messages.insert(message);
        record.last = now;
        if record.messages.len() < self.options.aggregate_max_events {
            let key = event_key(&event);
            return (event, key);
        }
        // Keep the set from growing past the threshold.
        if let Some(any) = record.messages.iter().next().cloned() {
            record.messages.remove(&any);
        }
        let mut combined = event;
        combined.message = Some(format!(
            "{COMBINED_PREFIX}{}",
            combined.message.as_deref().unwrap_or("")
        ));
        combined.count = Some(1);
        combined.first_timestamp = combined.last_timestamp.clone();
        (combined, group)
    }

    /// Step 2: a repeat takes the earlier Event's name and count + 1, and
    /// becomes a patch.
    fn observe(&mut self, mut event: Event, key: String) -> (Event, Option<Value>) {
        let mut patch = None;
        if let Some(last) = self.logs.get(&key).filter(|l| l.count > 0) {
            event.metadata.name = Some(last.name.clone());
            event.metadata.resource_version = last.resource_version.clone();
            event.first_timestamp = last.first_timestamp.clone();
            event.count = Some(last.count.saturating_add(1));
            patch = Some(json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            }));
        }
        if let Some(name) = event.metadata.name.clone() {
            self.logs.put(
                key,
                EventLog {
                    count: event.count.unwrap_or(1),
                    first_timestamp: event.first_timestamp.clone(),
                    name,
                    resource_version: event.metadata.resource_version.clone(),
                },
            );
        }
        (event, patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn event(name: &str, obj: &str, reason: &str, message: &str) -> Event {
        let now = Time(crate::events::wall_clock_now());
        Event {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Foo".into()),
                namespace: Some("ns".into()),
                name: Some(obj.into()),
                uid: Some(format!("uid-{obj}")),
                ..Default::default()
            },
            source: Some(EventSource {
                component: Some("ctl".into()),
                host: None,
            }),
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            ..Default::default()
        }
    }

    #[test]
    fn repeats_become_patches_of_the_first_event() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let t = Instant::now();
        let first = c.correlate(event("foo.1", "foo", "Synced", "ok"), t);
        assert!(first.patch.is_none() && !first.skip);
        assert_eq!(first.event.metadata.name.as_deref(), Some("foo.1"));
        // the server stored it with a resourceVersion
        let mut stored = first.event.clone();
        stored.metadata.resource_version = Some("7".into());
        c.update_state(&stored);

        let second = c.correlate(event("foo.2", "foo", "Synced", "ok"), t);
        assert_eq!(second.event.metadata.name.as_deref(), Some("foo.1"));
        assert_eq!(second.event.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(second.event.count, Some(2));
        assert_eq!(second.event.first_timestamp, first.event.first_timestamp);
        let patch = second.patch.unwrap();
        assert_eq!(patch["count"], 2);
        assert_eq!(patch["message"], "ok");
        assert!(patch["lastTimestamp"].is_string());

        let third = c.correlate(event("foo.3", "foo", "Synced", "ok"), t);
        assert_eq!(third.event.count, Some(3));

        // a different message, reason or object is a new event
        for other in [
            event("x.1", "foo", "Synced", "other"),
            event("x.2", "foo", "Other", "ok"),
            event("x.3", "bar", "Synced", "ok"),
        ] {
            let r = c.correlate(other, t);
            assert!(r.patch.is_none(), "{:?}", r.event.metadata.name);
        }
    }

    #[test]
    fn ten_similar_messages_are_combined() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let t = Instant::now();
        for i in 0..9 {
            let r = c.correlate(
                event(&format!("e{i}"), "foo", "Failed", &format!("m{i}")),
                t,
            );
            assert_eq!(r.event.message.as_deref(), Some(format!("m{i}").as_str()));
        }
        let tenth = c.correlate(event("e9", "foo", "Failed", "m9"), t);
        assert_eq!(
            tenth.event.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        assert!(tenth.patch.is_none());
        // the next similar one counts on the combined event
        let eleventh = c.correlate(event("e10", "foo", "Failed", "m10"), t);
        assert_eq!(eleventh.event.metadata.name.as_deref(), Some("e9"));
        assert_eq!(eleventh.event.count, Some(2));
        assert_eq!(
            eleventh.patch.unwrap()["message"],
            "(combined from similar events): m10"
        );
        // after the window, messages are distinct again
        let later = t + Duration::from_secs(601);
        let fresh = c.correlate(event("e11", "foo", "Failed", "m11"), later);
        assert_eq!(fresh.event.message.as_deref(), Some("m11"));
    }

    #[test]
    fn spam_is_skipped_but_still_counted() {
        let options = CorrelatorOptions {
            spam_burst: 2,
            ..Default::default()
        };
        let mut c = Correlator::new(options);
        let t = Instant::now();
        assert!(!c.correlate(event("a", "foo", "R", "m"), t).skip);
        assert!(!c.correlate(event("b", "foo", "R", "m"), t).skip);
        let third = c.correlate(event("c", "foo", "R", "m"), t);
        assert!(third.skip);
        let fourth = c.correlate(event("d", "foo", "R", "m"), t + Duration::from_secs(301));
        assert!(!fourth.skip);
        assert_eq!(
            fourth.event.count,
            Some(4),
            "skipped occurrences still count"
        );
    }
}
