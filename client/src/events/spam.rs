//! The per-object spam filter (client-go's `EventSourceObjectSpamFilter`):
//! each source + involved object has a token bucket (by default a burst of
//! 25 events, refilled at one event every five minutes), kept in an LRU so
//! memory stays bounded however many objects a controller touches.

use std::num::NonZeroUsize;
use std::time::Instant;

use k8s_openapi::api::core::v1::Event;
use lru::LruCache;

use super::keys::spam_key;

/// A token bucket refilled continuously at `qps` up to `burst`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Limits how many events a source may record about one object.
#[derive(Debug)]
pub(crate) struct SpamFilter {
    buckets: LruCache<String, Bucket>,
    burst: f64,
    qps: f64,
}

impl SpamFilter {
    /// A filter allowing `burst` events per object at once, refilled at
    /// `qps` events a second, remembering `capacity` objects.
    pub(crate) fn new(capacity: NonZeroUsize, burst: u32, qps: f64) -> Self {
        Self {
            buckets: LruCache::new(capacity),
            burst: f64::from(burst.max(1)),
            qps: if qps.is_finite() && qps > 0.0 {
                qps
            } else {
                0.0
            },
        }
    }

    /// Whether `event` may be written now; takes a token when it may.
    pub(crate) fn allow(&mut self, event: &Event, now: Instant) -> bool {
        let key = spam_key(event);
        let burst = self.burst;
        let bucket = self.buckets.get_or_insert_mut(key, || Bucket {
            tokens: burst,
            last: now,
        });
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.qps).min(self.burst);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use std::time::Duration;

    fn event(name: &str, message: &str) -> Event {
        Event {
            involved_object: ObjectReference {
                kind: Some("Foo".into()),
                namespace: Some("ns".into()),
                name: Some(name.into()),
                ..Default::default()
            },
            source: Some(EventSource {
                component: Some("c".into()),
                host: None,
            }),
            message: Some(message.into()),
            ..Default::default()
        }
    }

    fn filter() -> SpamFilter {
        SpamFilter::new(NonZeroUsize::new(16).unwrap(), 25, 1.0 / 300.0)
    }

    #[test]
    fn burst_then_one_every_five_minutes_per_object() {
        let mut f = filter();
        let t0 = Instant::now();
        for i in 0..25 {
            assert!(f.allow(&event("a", &format!("m{i}")), t0), "event {i}");
        }
        assert!(!f.allow(&event("a", "m25"), t0));
        // another object has its own budget
        assert!(f.allow(&event("b", "m"), t0));
        // a little under five minutes later: still nothing
        assert!(!f.allow(&event("a", "x"), t0 + Duration::from_secs(299)));
        // the token that refilled by five minutes is taken, then none again
        assert!(f.allow(&event("a", "x"), t0 + Duration::from_secs(301)));
        assert!(!f.allow(&event("a", "x"), t0 + Duration::from_secs(302)));
        // never more than the burst, however long the pause
        let later = t0 + Duration::from_secs(86_400);
        let allowed = (0..100)
            .filter(|_| f.allow(&event("a", "y"), later))
            .count();
        assert_eq!(allowed, 25);
    }

    #[test]
    fn the_lru_forgets_the_least_recent_object() {
        let mut f = SpamFilter::new(NonZeroUsize::new(2).unwrap(), 1, 1e-9);
        let t = Instant::now();
        assert!(f.allow(&event("a", ""), t));
        assert!(!f.allow(&event("a", ""), t));
        assert!(f.allow(&event("b", ""), t));
        assert!(f.allow(&event("c", ""), t)); // evicts a
        assert!(f.allow(&event("a", ""), t)); // a starts afresh
    }

    #[test]
    fn the_key_ignores_reason_type_and_message() {
        let mut a = event("x", "one");
        a.reason = Some("R1".into());
        let mut b = event("x", "two");
        b.type_ = Some("Warning".into());
        assert_eq!(spam_key(&a), spam_key(&b));
        assert_ne!(spam_key(&a), spam_key(&event("y", "one")));
    }
}
