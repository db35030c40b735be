//! The FIFO's data structure without locking: keys in first-queued order,
//! each with its [`Deltas`] (a key is queued once, DF1), and the count of
//! entries that belong to the initial population (for `has_synced`, DF5).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use foldhash::fast::RandomState;

use kcontrol_indexer::{DeletedFinalStateUnknown, ObjectOrTombstone};

use crate::delta::{Delta, Deltas};

/// One queued key: its changes, and whether it belongs to the initial
/// population (the first replace, or the first add/update/delete).
#[derive(Debug)]
pub(crate) struct Entry<K> {
    pub(crate) deltas: Deltas<K>,
    pub(crate) initial: bool,
}

/// Keys in FIFO order with their deltas.
///
/// Invariant: `order` and `items` hold the same keys, each once; every
/// `Deltas` holds at least one delta (by construction).
#[derive(Debug)]
pub(crate) struct Queue<K> {
    order: VecDeque<Arc<str>>,
    /// Seeded foldhash, as the store's maps: keys come from the server.
    items: HashMap<Arc<str>, Entry<K>, RandomState>,
    /// Entries flagged `initial`, queued or being processed.
    initial_pending: usize,
}

impl<K> Default for Queue<K> {
    fn default() -> Self {
        Self {
            order: VecDeque::new(),
            items: HashMap::default(),
            initial_pending: 0,
        }
    }
}

impl<K> Queue<K> {
    /// Appends `delta` to the key's list, queueing the key at the back if it
    /// was not queued. Returns the shared key and whether it was newly queued.
    pub(crate) fn push<Q>(&mut self, key: Q, delta: Delta<K>, initial: bool) -> (Arc<str>, bool)
    where
        Q: AsRef<str> + Into<Arc<str>>,
    {
        if let Some(entry) = self.items.get_mut(key.as_ref()) {
            entry.deltas.push(delta);
            if initial && !entry.initial {
                entry.initial = true;
                self.initial_pending += 1;
            }
            return (Arc::clone(entry.deltas.shared_key()), false);
        }
        let shared: Arc<str> = key.into();
        self.order.push_back(Arc::clone(&shared));
        self.initial_pending += usize::from(initial);
        let deltas = Deltas::new(Arc::clone(&shared), delta);
        self.items
            .insert(Arc::clone(&shared), Entry { deltas, initial });
        (shared, true)
    }

    /// Takes the entry at the front of the queue.
    pub(crate) fn take_front(&mut self) -> Option<Entry<K>> {
        while let Some(key) = self.order.pop_front() {
            if let Some(entry) = self.items.remove(&key) {
                return Some(entry);
            }
            tracing::error!(key = %key, "DeltaFIFO invariant broken: queued key without deltas; skipped");
        }
        None
    }

    /// Accounts for a taken entry that will not come back.
    pub(crate) fn finished(&mut self, initial: bool) {
        if initial {
            self.initial_pending = self.initial_pending.saturating_sub(1);
        }
    }

    /// Puts a taken entry back. If the key was queued again meanwhile, the
    /// returned deltas go in front of the newer ones and the key keeps its
    /// place; otherwise the key goes to the back. Returns whether the key was
    /// newly queued.
    pub(crate) fn requeue(&mut self, mut entry: Entry<K>) -> bool {
        let key = Arc::clone(entry.deltas.shared_key());
        match self.items.remove(&key) {
            Some(newer) => {
                if newer.initial && entry.initial {
                    // Two initial entries became one.
                    self.initial_pending = self.initial_pending.saturating_sub(1);
                }
                entry.initial |= newer.initial;
                entry.deltas.append(newer.deltas);
                self.items.insert(key, entry);
                false
            }
            None => {
                self.order.push_back(Arc::clone(&key));
                self.items.insert(key, entry);
                true
            }
        }
    }

    /// Appends a tombstone deletion (with the newest queued object as last
    /// known state) to the key's deltas if it is queued (DF4, a key queued
    /// but not listed). Returns whether it was.
    pub(crate) fn tombstone(&mut self, key: &str, initial: bool) -> bool {
        let Some(entry) = self.items.get_mut(key) else {
            return false;
        };
        let tombstone = DeletedFinalStateUnknown {
            key: key.to_owned(),
            obj: Arc::clone(entry.deltas.newest().object()),
        };
        entry
            .deltas
            .push(Delta::Deleted(ObjectOrTombstone::Tombstone(tombstone)));
        if initial && !entry.initial {
            entry.initial = true;
            self.initial_pending += 1;
        }
        true
    }

    /// The entry queued for a key.
    pub(crate) fn get(&self, key: &str) -> Option<&Entry<K>> {
        self.items.get(key)
    }

    /// Whether a key is queued.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.items.contains_key(key)
    }

    /// Queued keys in FIFO order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.order.iter()
    }

    /// Number of queued keys.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Entries of the initial population not yet processed.
    pub(crate) fn initial_pending(&self) -> usize {
        self.initial_pending
    }
}
