//! Items waiting for their time (WQ5): a min-heap of due times and a table
//! of the scheduled items. An item scheduled twice keeps the earlier time;
//! heap entries made stale by an earlier reschedule are skipped when they
//! surface, and the heap is rebuilt when they outnumber live ones.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use hashbrown::HashTable;

/// A scheduled item.
struct Scheduled<T> {
    item: T,
    hash: u64,
    /// Nanoseconds since the heap's origin.
    due: u64,
    seq: u64,
}

/// A heap entry: due time, then scheduling order, then the item's hash
/// (24 bytes: small entries make the heap fast), smallest first.
type Entry = Reverse<(u64, u64, u64)>;

/// Scheduled items; see the module documentation.
pub(crate) struct Schedule<T> {
    /// Times are kept as nanoseconds since this instant.
    origin: Instant,
    heap: BinaryHeap<Entry>,
    table: HashTable<Scheduled<T>>,
    next_seq: u64,
}

impl<T: Eq> Schedule<T> {
    /// An empty heap measuring time from `origin`.
    pub(crate) fn new(origin: Instant) -> Self {
        Self {
            origin,
            heap: BinaryHeap::new(),
            table: HashTable::new(),
            next_seq: 0,
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Schedules `item` at `due`, or moves it earlier if it is scheduled
    /// later. Returns whether the schedule changed.
    pub(crate) fn schedule(&mut self, item: T, hash: u64, due: Instant) -> bool {
        let due = self.nanos(due);
        let seq = self.next_seq;
        match self.table.find_mut(hash, |s| s.item == item) {
            Some(s) if s.due <= due => return false,
            Some(s) => {
                s.due = due;
                s.seq = seq;
            }
            None => {
                self.table.insert_unique(
                    hash,
                    Scheduled {
                        item,
                        hash,
                        due,
                        seq,
                    },
                    |s| s.hash,
                );
            }
        }
        self.next_seq += 1;
        self.heap.push(Reverse((due, seq, hash)));
        if self.heap.len() > 2 * self.table.len() + 1024 {
            self.rebuild();
        }
        true
    }

    /// Takes the earliest item due at `now`, if any.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(T, u64)> {
        let now = self.nanos(now);
        while let Some(&Reverse((due, seq, hash))) = self.heap.peek() {
            if due > now {
                return None;
            }
            self.heap.pop();
            if let Ok(entry) = self.table.find_entry(hash, |s| s.seq == seq) {
                let (s, _) = entry.remove();
                return Some((s.item, s.hash));
            }
        }
        None
    }

    /// The earliest due time (possibly of a stale entry, which is earlier
    /// than any live one and harmless: the timer just looks again).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let Reverse((due, _, _)) = self.heap.peek()?;
        Some(crate::clock::saturating_add(
            self.origin,
            std::time::Duration::from_nanos(*due),
        ))
    }

    /// Number of scheduled items.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Forgets every scheduled item (shutdown).
    pub(crate) fn clear(&mut self) {
        self.heap = BinaryHeap::new();
        self.table = HashTable::new();
    }

    fn rebuild(&mut self) {
        self.heap = self
            .table
            .iter()
            .map(|s| Reverse((s.due, s.seq, s.hash)))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn wq5_earlier_time_wins_and_order_is_by_due_time() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut d = Schedule::<String>::new(t0);
        assert!(d.schedule("a".into(), 1, t0 + ms(30)));
        assert!(d.schedule("b".into(), 2, t0 + ms(20)));
        assert!(!d.schedule("a".into(), 1, t0 + ms(40)));
        assert!(d.schedule("a".into(), 1, t0 + ms(10)));
        assert_eq!(d.len(), 2);
        assert_eq!(d.next_due(), Some(t0 + ms(10)));
        assert!(d.pop_due(t0 + ms(5)).is_none());
        assert_eq!(d.pop_due(t0 + ms(100)).unwrap().0, "a");
        assert_eq!(d.pop_due(t0 + ms(100)).unwrap().0, "b");
        // the stale entry of "a" at 30 ms is skipped
        assert!(d.pop_due(t0 + ms(100)).is_none());
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn stale_entries_are_bounded() {
        let t0 = Instant::now();
        let mut d = Schedule::<String>::new(t0);
        for i in 0..10_000u64 {
            d.schedule("a".into(), 1, t0 + Duration::from_secs(100_000 - i));
        }
        assert!(d.heap.len() <= 1024 + 2);
        assert_eq!(d.pop_due(t0 + Duration::from_secs(100_000)).unwrap().0, "a");
    }
}
