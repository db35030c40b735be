//! [`PendingBuffer`]: a listener's unbounded FIFO of notifications that
//! gives memory back once its consumer catches up.
//!
//! A slow handler may let thousands of notifications pile up; once it has
//! worked through them, keeping the grown allocation would pin memory for
//! the life of the informer (client-go's first ring buffer only ever grew).
//! This one shrinks when it is at most a quarter full, to twice what it
//! holds (never below [`NORMAL_CAPACITY`]), so each element is moved at
//! most a constant number of times on average.

use std::collections::VecDeque;

/// The capacity a buffer keeps even when empty: room for a burst without
/// reallocating.
pub(crate) const NORMAL_CAPACITY: usize = 64;

/// An unbounded FIFO that shrinks back as it drains.
#[derive(Debug)]
pub(crate) struct PendingBuffer<T> {
    items: VecDeque<T>,
}

impl<T> Default for PendingBuffer<T> {
    fn default() -> Self {
        Self {
            items: VecDeque::new(),
        }
    }
}

impl<T> PendingBuffer<T> {
    /// Appends at the back.
    pub(crate) fn push(&mut self, item: T) {
        self.items.push_back(item);
    }

    /// Takes the front item, shrinking the allocation when it is mostly empty.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let item = self.items.pop_front()?;
        let capacity = self.items.capacity();
        if capacity > NORMAL_CAPACITY && self.items.len() <= capacity / 4 {
            self.items
                .shrink_to((self.items.len() * 2).max(NORMAL_CAPACITY));
        }
        Some(item)
    }

    /// How many items wait.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing waits.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Drops everything waiting and the allocation.
    pub(crate) fn clear(&mut self) {
        self.items = VecDeque::new();
    }

    /// The allocated capacity, in items.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.items.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_across_growth() {
        let mut b = PendingBuffer::default();
        let mut next_out = 0u32;
        for round in 0..50u32 {
            for i in 0..round * 7 {
                b.push(round * 1000 + i);
            }
            for _ in 0..round * 3 {
                let v = b.pop().unwrap();
                assert!(v >= next_out, "out of order: {v} after {next_out}");
                next_out = v;
            }
        }
        let mut last = next_out;
        while let Some(v) = b.pop() {
            assert!(v >= last);
            last = v;
        }
        assert!(b.is_empty());
    }

    #[test]
    fn shrinks_back_once_drained() {
        let mut b = PendingBuffer::default();
        for i in 0..100_000 {
            b.push(i);
        }
        assert!(b.capacity() >= 100_000);
        for i in 0..100_000 {
            assert_eq!(b.pop(), Some(i));
            // never more than 4x over what it holds (plus the floor)
            assert!(b.capacity() <= (b.len() * 4).max(NORMAL_CAPACITY * 4) + 1);
        }
        assert_eq!(b.len(), 0);
        assert!(b.capacity() <= NORMAL_CAPACITY * 4);
        b.push(1);
        b.clear();
        assert_eq!(b.capacity(), 0);
    }
}
