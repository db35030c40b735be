//! The latency table of one row: when each numbered write was sent, and
//! how long after it the handler saw it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;

/// Send times of `total` numbered writes and the latencies seen so far.
pub struct Latencies {
    base: Instant,
    sent: Vec<AtomicU64>,
    seen: Mutex<Vec<u64>>,
}

impl Latencies {
    /// A table for writes `0..total`.
    pub fn new(total: usize) -> Self {
        Self {
            base: Instant::now(),
            sent: (0..total).map(|_| AtomicU64::new(0)).collect(),
            seen: Mutex::new(Vec::with_capacity(total)),
        }
    }

    /// Sends `writes` at `rate` a second: waits until each one is due,
    /// stamps its send time, then hands it to `send` with its number.
    pub fn pace<T>(
        &self,
        rate: u64,
        writes: impl Iterator<Item = T>,
        mut send: impl FnMut(usize, T) -> Result<(), String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        let step = Duration::from_nanos(1_000_000_000 / rate);
        for ((seq, write), at) in writes.enumerate().zip(&self.sent) {
            let due = start + step * u32::try_from(seq).unwrap_or(u32::MAX);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            at.store(self.nanos(), Ordering::SeqCst);
            send(seq, write)?;
        }
        Ok(())
    }

    /// Records the latency of the write `cm` carries (its `data.seq`).
    pub fn record(&self, cm: &ConfigMap) {
        let now = self.nanos();
        if let Some(at) = seq_of(cm).and_then(|seq| self.sent.get(seq)) {
            let latency = now.saturating_sub(at.load(Ordering::SeqCst)) / 1_000;
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(latency);
            }
        }
    }

    /// Whether every write has been seen.
    pub fn all_seen(&self) -> bool {
        self.seen
            .lock()
            .map(|s| s.len() >= self.sent.len())
            .unwrap_or(true)
    }

    /// The latencies in microseconds, sorted.
    pub fn take(&self) -> Vec<u64> {
        let mut all = self
            .seen
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        all.sort_unstable();
        all
    }

    /// Nanoseconds since the table was made.
    fn nanos(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The `seq` data value of a written object.
fn seq_of(cm: &ConfigMap) -> Option<usize> {
    cm.data.as_ref()?.get("seq")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(seq: usize) -> ConfigMap {
        ConfigMap {
            data: Some([("seq".to_owned(), seq.to_string())].into()),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn records_each_paced_write_once_seen() {
        let lat = Latencies::new(3);
        let mut order = Vec::new();
        let paced = lat.pace(1_000_000, 0..3, |seq, w| {
            order.push((seq, w));
            Ok(())
        });
        assert_eq!(paced, Ok(()));
        assert_eq!(order, [(0, 0), (1, 1), (2, 2)]);
        lat.record(&numbered(2));
        lat.record(&numbered(0));
        assert!(!lat.all_seen());
        lat.record(&numbered(1));
        assert!(lat.all_seen());
        let all = lat.take();
        assert_eq!(all.len(), 3);
        assert!(all.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn ignores_objects_without_a_known_seq() {
        let lat = Latencies::new(1);
        lat.record(&ConfigMap::default());
        lat.record(&numbered(7));
        assert!(!lat.all_seen());
        assert!(lat.take().is_empty());
    }

    #[test]
    fn stops_at_the_first_failed_send() {
        let lat = Latencies::new(3);
        let mut sent = 0;
        let out = lat.pace(1_000_000, 0..3, |seq, _| {
            sent += 1;
            if seq == 1 {
                Err("closed".to_owned())
            } else {
                Ok(())
            }
        });
        assert_eq!(out, Err("closed".to_owned()));
        assert_eq!(sent, 2);
    }
}
