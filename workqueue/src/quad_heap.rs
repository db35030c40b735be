//! A 4-ary min-heap of small `Copy` entries: half the depth of a binary
//! heap and children side by side in memory, so popping from a heap of
//! 100,000 due times touches about half the cache lines `BinaryHeap` does.

/// A min-heap: `pop` returns the smallest entry.
pub(crate) struct QuadHeap<E> {
    v: Vec<E>,
}

impl<E> Default for QuadHeap<E> {
    fn default() -> Self {
        Self { v: Vec::new() }
    }
}

impl<E: Ord + Copy> QuadHeap<E> {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.v.len()
    }

    /// The smallest entry.
    pub(crate) fn peek(&self) -> Option<&E> {
        self.v.first()
    }

    /// Adds an entry.
    pub(crate) fn push(&mut self, e: E) {
        self.v.push(e);
        let mut i = self.v.len() - 1;
        // Invariant: i < len and parent(i) < i.
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.v[i] < self.v[parent] {
                self.v.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
    }

    /// Removes and returns the smallest entry.
    pub(crate) fn pop(&mut self) -> Option<E> {
        let last = self.v.pop()?;
        let Some(first) = self.v.first_mut() else {
            return Some(last);
        };
        let top = std::mem::replace(first, last);
        let n = self.v.len();
        let mut i = 0;
        // Invariant: i < n; every index compared is below n.
        loop {
            let child = 4 * i + 1;
            if child >= n {
                break;
            }
            let end = (child + 4).min(n);
            let mut min = child;
            for c in child + 1..end {
                if self.v[c] < self.v[min] {
                    min = c;
                }
            }
            if self.v[min] < self.v[i] {
                self.v.swap(i, min);
                i = min;
            } else {
                break;
            }
        }
        Some(top)
    }

    /// Replaces the contents.
    pub(crate) fn rebuild(&mut self, entries: impl Iterator<Item = E>) {
        self.v.clear();
        for e in entries {
            self.push(e);
        }
    }

    /// Removes everything and frees the memory.
    pub(crate) fn clear(&mut self) {
        self.v = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Pops come out sorted, interleaved with pushes, like `BinaryHeap`.
        #[test]
        fn behaves_like_a_sorted_multiset(ops in prop::collection::vec(prop::option::of(0u32..50), 0..400)) {
            let mut heap = QuadHeap::default();
            let mut model = std::collections::BinaryHeap::new();
            for op in ops {
                match op {
                    Some(x) => {
                        heap.push(x);
                        model.push(std::cmp::Reverse(x));
                    }
                    None => prop_assert_eq!(heap.pop(), model.pop().map(|r| r.0)),
                }
                prop_assert_eq!(heap.peek().copied(), model.peek().map(|r| r.0));
                prop_assert_eq!(heap.len(), model.len());
            }
            while let Some(x) = heap.pop() {
                prop_assert_eq!(Some(x), model.pop().map(|r| r.0));
            }
            prop_assert!(model.is_empty());
        }
    }
}
