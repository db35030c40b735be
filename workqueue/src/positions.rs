//! The table that finds a waiting item's place in the queue, for
//! deduplication (WQ1): open addressing over cache-line buckets of 8-byte
//! entries, each the top bits of an item's hash and its queue position
//! modulo 2^32.
//!
//! Why not a general hash table: a queue of a million distinct keys does
//! not fit in a cache, and an add of a new key then pays for every cache
//! line it touches, one after the other (the queue lock orders them). A
//! SwissTable keeps its control bytes apart from its entries, two lines
//! per insert; here a lookup and an insert touch one bucket, one line,
//! unless the bucket overflowed.
//!
//! An entry is never removed on its own. Once its position has left the
//! queue it is stale: lookups step over it and inserts reuse it. Only a
//! rebuild empties slots: it keeps the live entries alone, in a table
//! where they fill at most half the slots. An insert rebuilds when the
//! non-empty slots would pass 7/8 (grow or sweep) or when the table has
//! more than eight slots per waiting item (shrink after a burst), so that
//! at every insert the table has at most eight slots per waiting item, plus
//! two buckets. Because slots are filled in order and emptied only by a
//! rebuild, an empty slot ends every probe.

/// Entries per bucket: 64 bytes, one cache line.
const SLOTS: usize = 8;

/// An unused slot. Every entry has [`MARK`] set, so none is 0.
const EMPTY: u64 = 0;

/// Set in every entry, below the hash bits it keeps.
const MARK: u64 = 1 << 32;

/// One cache line of entries; filled from the front.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Bucket([u64; SLOTS]);

impl Bucket {
    /// Puts `entry` in the first empty slot; false if there is none.
    fn place(&mut self, entry: u64) -> bool {
        let empty = self.0.iter_mut().find(|s| **s == EMPTY);
        empty.map(|s| *s = entry).is_some()
    }
}

/// Where each waiting item sits; see the module documentation.
#[derive(Default)]
pub(crate) struct Positions {
    buckets: Vec<Bucket>,
    /// Slots that are not empty (stale ones included).
    used: usize,
}

/// The bits of an entry that come from the hash, with [`MARK`]: equal for
/// an item's entry and a lookup of the item.
#[inline]
fn tag(hash: u64) -> u64 {
    (hash | MARK) >> 32
}

/// The entry of the item whose hash is `hash` at absolute position `pos`.
#[inline]
fn entry(hash: u64, pos: u64) -> u64 {
    (tag(hash) << 32) | (pos & 0xffff_ffff)
}

/// The first bucket of the probe for entries whose tag is `tag`, in a
/// table of `buckets` buckets (a power of two): Fibonacci hashing of the
/// tag, so that a rebuild finds it from the entry alone and every bit of
/// the tag picks the bucket (two entries in one bucket still differ in
/// their tags).
#[inline]
fn home(tag: u64, buckets: usize) -> usize {
    let spread = (tag as u32).wrapping_mul(0x9e37_79b9);
    (u64::from(spread) >> (32 - buckets.trailing_zeros().min(32))) as usize
}

/// The queue index an entry points at, if it is still in the queue
/// (`head` is the absolute position of the queue's front).
#[inline]
fn index(entry: u64, head: u64, len: usize) -> Option<usize> {
    let index = (entry as u32).wrapping_sub(head as u32) as usize;
    (index < len).then_some(index)
}

impl Positions {
    /// The queue index of the item whose hash is `hash`, if it is
    /// waiting; `is_item(i)` says whether the item at index `i` is it.
    #[inline]
    pub(crate) fn find(
        &self,
        hash: u64,
        head: u64,
        len: usize,
        is_item: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let (buckets, tag) = (self.buckets.len(), tag(hash));
        if buckets == 0 {
            return None;
        }
        let mut b = home(tag, buckets);
        for _ in 0..buckets {
            for &e in &self.buckets[b].0 {
                if e == EMPTY {
                    return None;
                }
                if e >> 32 == tag {
                    match index(e, head, len) {
                        Some(i) if is_item(i) => return Some(i),
                        _ => {}
                    }
                }
            }
            b = (b + 1) & (buckets - 1);
        }
        None
    }

    /// Records the item whose hash is `hash` at absolute position
    /// `head + len`, the back of a queue of `len` items that does not hold
    /// it yet.
    #[inline]
    pub(crate) fn insert(&mut self, hash: u64, head: u64, len: usize) {
        let slots = self.capacity();
        if (self.used + 1) * 8 > slots * 7 || slots > 8 * (len + 1) + 2 * SLOTS {
            self.rebuild(head, len);
        }
        let new = entry(hash, head + len as u64);
        let buckets = self.buckets.len();
        let mut b = home(tag(hash), buckets);
        loop {
            for slot in &mut self.buckets[b].0 {
                if *slot == EMPTY {
                    self.used += 1;
                    *slot = new;
                    return;
                }
                if index(*slot, head, len).is_none() {
                    *slot = new;
                    return;
                }
            }
            b = (b + 1) & (buckets - 1);
        }
    }

    /// Keeps the live entries alone, in a table where they fill at most
    /// half the slots, with room for one more. (An entry whose position
    /// wrapped onto one in the queue counts as live until its position
    /// leaves the queue again, so the table is sized by what it keeps.)
    #[cold]
    fn rebuild(&mut self, head: u64, len: usize) {
        let live = |e: &u64| *e != EMPTY && index(*e, head, len).is_some();
        let kept = self.buckets.iter().flat_map(|b| b.0).filter(live).count();
        let buckets = ((kept.max(len) + 1) * 2)
            .div_ceil(SLOTS)
            .next_power_of_two();
        let old = std::mem::replace(&mut self.buckets, vec![Bucket::default(); buckets]);
        for e in old.iter().flat_map(|b| b.0).filter(live) {
            let mut b = home(e >> 32, buckets);
            while !self.buckets[b].place(e) {
                b = (b + 1) & (buckets - 1);
            }
        }
        self.used = kept;
    }

    /// Forgets every entry and gives the memory back (the queue is empty).
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Slots the table has.
    pub(crate) fn capacity(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    /// Entries in the table, stale ones included (tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;

    /// A queue of item ids beside its table; the hash of id `i` is
    /// `hash(i)`, which tests make collide on purpose.
    struct Model {
        queue: VecDeque<u32>,
        head: u64,
        table: Positions,
        hash: fn(u32) -> u64,
    }

    impl Model {
        fn new(head: u64, hash: fn(u32) -> u64) -> Self {
            let table = Positions::default();
            let queue = VecDeque::new();
            Self {
                queue,
                head,
                table,
                hash,
            }
        }

        fn find(&self, id: u32) -> Option<usize> {
            let is_item = |i: usize| self.queue[i] == id;
            let (head, len) = (self.head, self.queue.len());
            self.table.find((self.hash)(id), head, len, is_item)
        }

        /// Queues `id` unless it is waiting, as the queue does.
        fn add(&mut self, id: u32) {
            if self.find(id).is_none() {
                let len = self.queue.len();
                self.table.insert((self.hash)(id), self.head, len);
                self.queue.push_back(id);
                let bound = 8 * (len + 1) + 2 * SLOTS;
                assert!(self.table.capacity() <= bound, "{}", self.table.capacity());
            }
        }

        fn pop(&mut self) {
            if self.queue.pop_front().is_some() {
                self.head += 1;
            }
        }

        fn check(&self, ids: impl Iterator<Item = u32>) {
            for id in ids {
                let expected = self.queue.iter().position(|&q| q == id);
                assert_eq!(self.find(id), expected, "id {id}");
            }
            assert!(self.table.entries() * 8 <= self.table.capacity() * 7);
        }
    }

    /// Few distinct homes and tags: buckets overflow and tags match
    /// entries of other items.
    fn colliding(id: u32) -> u64 {
        (u64::from(id % 3) << 33) | (u64::from(id % 5) << 60) | u64::from(id)
    }

    fn spread(id: u32) -> u64 {
        u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    proptest! {
        /// Finds exactly the waiting items, through overflowed buckets,
        /// stale entries, rebuilds and positions that cross 2^32.
        #[test]
        fn finds_exactly_the_waiting_items(
            ops in prop::collection::vec((any::<bool>(), 0u32..64), 1..400),
            near_wrap in any::<bool>(),
            collide in any::<bool>(),
        ) {
            let head = if near_wrap { u64::from(u32::MAX) - 100 } else { 0 };
            let hash = if collide { colliding } else { spread };
            let mut m = Model::new(head, hash);
            for (add, id) in ops {
                if add { m.add(id) } else { m.pop() }
                m.check(0..64);
            }
        }
    }

    /// After 2^32 positions, an old entry can point at a position in
    /// the queue again: lookups still compare items, and a rebuild keeps
    /// room for every entry it keeps.
    #[test]
    fn entries_whose_positions_wrapped_onto_the_queue_are_harmless() {
        let mut m = Model::new(0, colliding);
        for id in 0..40 {
            m.add(id);
        }
        for _ in 0..40 {
            m.pop();
        }
        // 2^32 - 40 more items came and went: positions 0.. are back.
        m.head = 1 << 32;
        for id in 100..200 {
            m.add(id);
            m.check((0..40).chain(100..=id));
        }
        for _ in 0..95 {
            m.pop();
        }
        m.add(300);
        m.check((0..40).chain(100..200).chain(300..301));
    }

    #[test]
    fn one_item_cycling_keeps_one_entry() {
        let mut m = Model::new(0, spread);
        for _ in 0..10_000 {
            m.add(7);
            m.pop();
        }
        assert_eq!(m.table.entries(), 1);
    }

    #[test]
    fn the_table_follows_the_queue_down_after_a_burst() {
        let mut m = Model::new(0, spread);
        for id in 0..100_000 {
            m.add(id);
        }
        let large = m.table.capacity();
        for _ in 0..100_000 - 10 {
            m.pop();
        }
        // new items reuse stale slots, then a rebuild sizes for 10 or so
        for id in 100_000..400_000 {
            m.add(id);
            m.pop();
        }
        assert!(m.table.capacity() < large / 100, "{}", m.table.capacity());
        m.check(399_990..400_000);
    }
}
