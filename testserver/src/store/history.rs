//! The bounded event history of one resource: kube-apiserver's watch cache
//! window. Watchers read it with their own cursor (a sequence number), so a
//! writer never waits for a watcher; a watcher whose cursor falls out of the
//! window has missed events and is closed.

use super::object::{StoredObject, WatchEventType};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::Arc;

/// One change, as every watcher of the resource sees it.
#[derive(Debug)]
pub struct Event {
    /// ADDED, MODIFIED or DELETED.
    pub kind: WatchEventType,
    /// The resourceVersion the change was written at.
    pub rv: u64,
    /// Position in the resource's history.
    pub seq: u64,
    /// The object after the change (for DELETED: the last state, with the
    /// deletion's resourceVersion).
    pub object: Arc<StoredObject>,
    /// The object before the change.
    pub prev: Option<Arc<StoredObject>>,
    /// The encoded watch frame, `{"type":..,"object":..}\n`.
    pub frame: Bytes,
}

/// Ring of recent events plus the resourceVersion below which history is gone.
#[derive(Debug)]
pub(crate) struct History {
    events: VecDeque<Arc<Event>>,
    first_seq: u64,
    capacity: usize,
    /// Every event with rv greater than this is retained.
    floor_rv: u64,
}

/// A watcher asked for events that were already evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Evicted;

impl History {
    pub(crate) fn new(capacity: usize, start_rv: u64) -> Self {
        Self {
            events: VecDeque::new(),
            first_seq: 0,
            capacity: capacity.max(1),
            floor_rv: start_rv,
        }
    }

    /// Sequence number the next event will get.
    pub(crate) fn next_seq(&self) -> u64 {
        self.first_seq + self.events.len() as u64
    }

    /// All events with rv > floor are retained; a watch or exact read from
    /// an older rv is too old. Mirrors the watch cache's "oldest - 1".
    pub(crate) fn floor_rv(&self) -> u64 {
        self.floor_rv
    }

    /// The rv of the newest event, if any is retained.
    pub(crate) fn last_rv(&self) -> Option<u64> {
        self.events.back().map(|e| e.rv)
    }

    pub(crate) fn push(
        &mut self,
        kind: WatchEventType,
        object: Arc<StoredObject>,
        prev: Option<Arc<StoredObject>>,
        frame: Bytes,
    ) -> Arc<Event> {
        let ev = Arc::new(Event {
            kind,
            rv: object.resource_version(),
            seq: self.next_seq(),
            object,
            prev,
            frame,
        });
        self.events.push_back(ev.clone());
        while self.events.len() > self.capacity {
            self.events.pop_front();
            self.first_seq += 1;
            if let Some(front) = self.events.front() {
                self.floor_rv = self.floor_rv.max(front.rv.saturating_sub(1));
            }
        }
        ev
    }

    /// Drops every retained event; history now starts at `rv`.
    pub(crate) fn compact(&mut self, rv: u64) {
        self.first_seq = self.next_seq();
        self.events.clear();
        self.floor_rv = self.floor_rv.max(rv);
    }

    /// The sequence number of the first event newer than `rv`, or the
    /// floor when `rv` is older than the window.
    pub(crate) fn seq_after(&self, rv: u64) -> Result<u64, u64> {
        if rv < self.floor_rv {
            return Err(self.floor_rv);
        }
        let idx = self.events.partition_point(|e| e.rv <= rv);
        Ok(self.first_seq + idx as u64)
    }

    /// Up to `max` events starting at `seq`.
    pub(crate) fn events_from(&self, seq: u64, max: usize) -> Result<Vec<Arc<Event>>, Evicted> {
        if seq < self.first_seq {
            return Err(Evicted);
        }
        let start = usize::try_from(seq - self.first_seq).unwrap_or(usize::MAX);
        Ok(self.events.iter().skip(start).take(max).cloned().collect())
    }

    /// Events with rv > `rv`, oldest first (for reading an older state).
    pub(crate) fn events_after(&self, rv: u64) -> impl Iterator<Item = &Arc<Event>> {
        let idx = self.events.partition_point(|e| e.rv <= rv);
        self.events.iter().skip(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::object::from_value;
    use super::*;
    use serde_json::json;

    fn obj(rv: u64) -> Arc<StoredObject> {
        Arc::new(
            from_value(json!({"metadata": {"name": "a"}}), rv, "a".into())
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    #[test]
    fn evicts_oldest_and_moves_floor() {
        let mut h = History::new(2, 5);
        for rv in [6, 8, 11] {
            h.push(WatchEventType::Modified, obj(rv), None, Bytes::new());
        }
        // 6 evicted; the oldest kept is 8, so the floor is 7 (kube's oldest-1)
        assert_eq!(h.floor_rv(), 7);
        assert_eq!(h.seq_after(6), Err(7));
        assert_eq!(h.seq_after(7), Ok(1));
        assert_eq!(h.seq_after(8), Ok(2));
        assert!(matches!(h.events_from(0, 10), Err(Evicted)));
        assert_eq!(h.events_from(1, 10).map(|v| v.len()), Ok(2));
        h.compact(20);
        assert_eq!(h.seq_after(19), Err(20));
        assert_eq!(h.seq_after(20), Ok(3));
    }
}
