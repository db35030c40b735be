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
    ///
    /// Bottom-up: the hole left at the root moves down along the smallest
    /// children to a leaf, then the last entry rises from there (usually
    /// not at all: it came from the bottom). That saves the comparison
    /// with the moving entry on every level, and moves instead of swaps.
    pub(crate) fn pop(&mut self) -> Option<E> {
        let last = self.v.pop()?;
        let Some(&top) = self.v.first() else {
            return Some(last);
        };
        let n = self.v.len();
        let mut hole = 0;
        // Invariant: hole < n; every index read is below n.
        loop {
            let child = 4 * hole + 1;
            if child >= n {
                break;
            }
            let min = if child + 4 <= n {
                let a = if self.v[child + 1] < self.v[child] {
                    child + 1
                } else {
                    child
                };
                let b = if self.v[child + 3] < self.v[child + 2] {
                    child + 3
                } else {
                    child + 2
                };
                if self.v[b] < self.v[a] {
                    b
                } else {
                    a
                }
            } else {
                let mut min = child;
                for c in child + 1..n {
                    if self.v[c] < self.v[min] {
                        min = c;
                    }
                }
                min
            };
            self.v[hole] = self.v[min];
            hole = min;
        }
        while hole > 0 {
            let parent = (hole - 1) / 4;
            if last < self.v[parent] {
                self.v[hole] = self.v[parent];
                hole = parent;
            } else {
                break;
            }
        }
        self.v[hole] = last;
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
