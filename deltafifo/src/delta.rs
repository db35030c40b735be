//! The change records a [`DeltaFifo`](crate::DeltaFifo) queues: [`DeltaType`],
//! [`Delta`] and the per-key list [`Deltas`], with the collapse of two
//! deletions in a row (DF2).

use std::fmt;
use std::sync::Arc;

use kcontrol_indexer::ObjectOrTombstone;

/// The kind of a change, as client-go names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created (a watch `ADDED` event).
    Added,
    /// The object changed (a watch `MODIFIED` event).
    Updated,
    /// The object was deleted, or a relist found it gone.
    Deleted,
    /// A relist (or a WatchList initial event) listed the object; it may or
    /// may not have changed since it was last seen.
    Replaced,
    /// A periodic resync re-announced an object already known (also used
    /// instead of `Replaced` when `emit_delta_type_replaced` is off).
    Sync,
}

impl DeltaType {
    /// The client-go spelling: `"Added"`, `"Updated"`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "Added",
            Self::Updated => "Updated",
            Self::Deleted => "Deleted",
            Self::Replaced => "Replaced",
            Self::Sync => "Sync",
        }
    }
}

impl fmt::Display for DeltaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change to one object.
///
/// Only a deletion can carry a tombstone ([`ObjectOrTombstone::Tombstone`],
/// queued by a relist that found the object gone): the type says so, and a
/// consumer hands `Deleted`'s payload to `on_delete` without any runtime
/// type check. Every other kind carries the object itself.
#[derive(Debug)]
pub enum Delta<K> {
    /// The object was created.
    Added(Arc<K>),
    /// The object changed; this is its new state.
    Updated(Arc<K>),
    /// The object was deleted: its final state, or a tombstone with the last
    /// state known when the deletion was missed.
    Deleted(ObjectOrTombstone<K>),
    /// A relist listed the object.
    Replaced(Arc<K>),
    /// A resync re-announced the object.
    Sync(Arc<K>),
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(Arc::clone(o)),
            Self::Updated(o) => Self::Updated(Arc::clone(o)),
            Self::Deleted(o) => Self::Deleted(o.clone()),
            Self::Replaced(o) => Self::Replaced(Arc::clone(o)),
            Self::Sync(o) => Self::Sync(Arc::clone(o)),
        }
    }
}

impl<K> Delta<K> {
    /// A delta of the given kind for an object (a `Deleted` one carries the
    /// object itself, not a tombstone).
    pub fn new(kind: DeltaType, object: Arc<K>) -> Self {
        match kind {
            DeltaType::Added => Self::Added(object),
            DeltaType::Updated => Self::Updated(object),
            DeltaType::Deleted => Self::Deleted(ObjectOrTombstone::Object(object)),
            DeltaType::Replaced => Self::Replaced(object),
            DeltaType::Sync => Self::Sync(object),
        }
    }

    /// The kind of change.
    pub fn kind(&self) -> DeltaType {
        match self {
            Self::Added(_) => DeltaType::Added,
            Self::Updated(_) => DeltaType::Updated,
            Self::Deleted(_) => DeltaType::Deleted,
            Self::Replaced(_) => DeltaType::Replaced,
            Self::Sync(_) => DeltaType::Sync,
        }
    }

    /// The object: its state after the change, or for a deletion its final
    /// (or, in a tombstone, last known) state.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Added(o) | Self::Updated(o) | Self::Replaced(o) | Self::Sync(o) => o,
            Self::Deleted(o) => o.object(),
        }
    }

    /// Consumes the delta, keeping its object (the last known state for a tombstone).
    pub fn into_object(self) -> Arc<K> {
        match self {
            Self::Added(o) | Self::Updated(o) | Self::Replaced(o) | Self::Sync(o) => o,
            Self::Deleted(ObjectOrTombstone::Object(o)) => o,
            Self::Deleted(ObjectOrTombstone::Tombstone(t)) => t.obj,
        }
    }

    /// Whether this is a deletion carrying a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Deleted(o) if o.is_tombstone())
    }
}

/// Every change queued for one key since it was last popped, oldest first.
///
/// Never empty: the newest delta is always there, so [`Deltas::newest`]
/// needs no `Option`.
#[derive(Debug)]
pub struct Deltas<K> {
    key: Arc<str>,
    older: Vec<Delta<K>>,
    newest: Delta<K>,
}

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        Self {
            key: Arc::clone(&self.key),
            older: self.older.clone(),
            newest: self.newest.clone(),
        }
    }
}

impl<K> Deltas<K> {
    /// A list of one delta for `key`.
    pub(crate) fn new(key: Arc<str>, first: Delta<K>) -> Self {
        Self {
            key,
            older: Vec::new(),
            newest: first,
        }
    }

    /// The key every delta in the list belongs to.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The key, shared.
    pub(crate) fn shared_key(&self) -> &Arc<str> {
        &self.key
    }

    /// The most recent change.
    pub fn newest(&self) -> &Delta<K> {
        &self.newest
    }

    /// The earliest change still queued.
    pub fn oldest(&self) -> &Delta<K> {
        self.older.first().unwrap_or(&self.newest)
    }

    /// How many deltas the list holds (at least one).
    pub fn len(&self) -> usize {
        self.older.len() + 1
    }

    /// Always `false`: a `Deltas` holds at least one delta.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The deltas, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Delta<K>> {
        self.older.iter().chain(std::iter::once(&self.newest))
    }

    /// Appends a change, collapsing two deletions in a row into the more
    /// informative one (DF2): the earlier deletion is kept unless it is a
    /// tombstone, in which case the later one replaces it.
    pub(crate) fn push(&mut self, delta: Delta<K>) {
        if let (Delta::Deleted(earlier), Delta::Deleted(_)) = (&self.newest, &delta) {
            if earlier.is_tombstone() {
                self.newest = delta;
            }
            return;
        }
        let previous = std::mem::replace(&mut self.newest, delta);
        self.older.push(previous);
    }

    /// Appends every delta of `later` (same key) after these, with the same
    /// collapse rule at the seam.
    pub(crate) fn append(&mut self, later: Deltas<K>) {
        self.older.reserve(later.older.len() + 1);
        for delta in later {
            self.push(delta);
        }
    }
}

impl<K> IntoIterator for Deltas<K> {
    type Item = Delta<K>;
    type IntoIter = std::iter::Chain<std::vec::IntoIter<Delta<K>>, std::iter::Once<Delta<K>>>;

    /// The deltas, oldest first.
    fn into_iter(self) -> Self::IntoIter {
        self.older.into_iter().chain(std::iter::once(self.newest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcontrol_indexer::DeletedFinalStateUnknown;

    fn tomb(key: &str, obj: &Arc<u32>) -> Delta<u32> {
        Delta::Deleted(ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: key.into(),
            obj: Arc::clone(obj),
        }))
    }

    fn kinds(d: &Deltas<u32>) -> Vec<DeltaType> {
        d.iter().map(Delta::kind).collect()
    }

    #[test]
    fn df1_deltas_accumulate_in_order() {
        let a = Arc::new(1);
        let mut d = Deltas::new("k".into(), Delta::Added(Arc::clone(&a)));
        d.push(Delta::Updated(Arc::new(2)));
        d.push(Delta::Replaced(Arc::new(3)));
        d.push(Delta::Sync(Arc::new(4)));
        assert_eq!(
            kinds(&d),
            [
                DeltaType::Added,
                DeltaType::Updated,
                DeltaType::Replaced,
                DeltaType::Sync
            ]
        );
        assert_eq!(d.len(), 4);
        assert!(Arc::ptr_eq(d.oldest().object(), &a));
        assert_eq!(**d.newest().object(), 4);
        let owned: Vec<u32> = d.into_iter().map(|d| *d.into_object()).collect();
        assert_eq!(owned, [1, 2, 3, 4]);
    }

    #[test]
    fn df2_object_deletion_wins_over_a_later_tombstone() {
        let o = Arc::new(1);
        let mut d = Deltas::new("k".into(), Delta::Deleted(ObjectOrTombstone::Object(o)));
        d.push(tomb("k", &Arc::new(2)));
        assert_eq!(d.len(), 1);
        assert!(!d.newest().is_tombstone());
        assert_eq!(**d.newest().object(), 1);
    }

    #[test]
    fn df2_later_deletion_replaces_an_earlier_tombstone() {
        let mut d = Deltas::new("k".into(), tomb("k", &Arc::new(1)));
        d.push(Delta::new(DeltaType::Deleted, Arc::new(2)));
        assert_eq!(d.len(), 1);
        assert!(!d.newest().is_tombstone());
        assert_eq!(**d.newest().object(), 2);

        // two tombstones: the later one is kept
        let mut d = Deltas::new("k".into(), tomb("k", &Arc::new(1)));
        d.push(tomb("k", &Arc::new(2)));
        assert_eq!(d.len(), 1);
        assert_eq!(**d.newest().object(), 2);
    }

    #[test]
    fn df2_two_object_deletions_keep_the_first() {
        let mut d = Deltas::new("k".into(), Delta::Added(Arc::new(0)));
        d.push(Delta::new(DeltaType::Deleted, Arc::new(1)));
        d.push(Delta::new(DeltaType::Deleted, Arc::new(2)));
        assert_eq!(kinds(&d), [DeltaType::Added, DeltaType::Deleted]);
        assert_eq!(**d.newest().object(), 1);
    }

    #[test]
    fn append_collapses_deletions_at_the_seam() {
        let mut earlier = Deltas::new("k".into(), Delta::Added(Arc::new(0)));
        earlier.push(tomb("k", &Arc::new(1)));
        let mut later = Deltas::new("k".into(), Delta::new(DeltaType::Deleted, Arc::new(2)));
        later.push(Delta::Added(Arc::new(3)));
        earlier.append(later);
        assert_eq!(
            kinds(&earlier),
            [DeltaType::Added, DeltaType::Deleted, DeltaType::Added]
        );
        let objects: Vec<u32> = earlier.iter().map(|d| **d.object()).collect();
        assert_eq!(objects, [0, 2, 3]);
    }

    #[test]
    fn delta_type_names_match_client_go() {
        assert_eq!(DeltaType::Replaced.to_string(), "Replaced");
        assert_eq!(
            Delta::new(DeltaType::Sync, Arc::new(1)).kind(),
            DeltaType::Sync
        );
    }
}
