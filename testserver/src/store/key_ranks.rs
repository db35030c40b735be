//! An order-statistics index of one resource's keys: how many stored keys
//! sort before a bound, in O(log n). A page of a list uses it to count the
//! items after the page (`remainingItemCount`) without walking them.
//!
//! The keys are kept sorted in chunks of at most [`MAX_CHUNK`]; a Fenwick
//! tree over the chunk lengths sums the chunks before a position. Only
//! splitting, merging or dropping a chunk rebuilds the tree (once per
//! hundreds of writes), every other insert or remove adjusts it in
//! O(log n).

/// Keys a chunk holds at most; small under test so that every unit test
/// splits, merges and drops chunks.
const MAX_CHUNK: usize = if cfg!(test) { 4 } else { 512 };

/// A chunk this short is merged into a neighbour when both fit in one.
const MIN_CHUNK: usize = MAX_CHUNK / 4;

/// The sorted set of a resource's keys, with ranks.
#[derive(Debug, Default)]
pub(crate) struct KeyRanks {
    /// Non-empty, sorted chunks, each sorting before the next.
    chunks: Vec<Vec<Box<str>>>,
    /// Fenwick tree over the chunk lengths: entry `j - 1` holds the sum of
    /// the chunks `j - (j & -j) .. j`.
    sums: Vec<usize>,
    len: usize,
}

impl KeyRanks {
    /// Adds `key`; false when it was already there.
    pub(crate) fn insert(&mut self, key: &str) -> bool {
        let last = self.chunks.len().saturating_sub(1);
        let i = self.chunk_for(key).min(last);
        let Some(chunk) = self.chunks.get_mut(i) else {
            self.chunks.push(vec![key.into()]);
            self.len = 1;
            self.rebuild();
            return true;
        };
        let Err(pos) = chunk.binary_search_by(|k| (**k).cmp(key)) else {
            return false;
        };
        chunk.insert(pos, key.into());
        self.len += 1;
        if chunk.len() > MAX_CHUNK {
            let tail = chunk.split_off(chunk.len() / 2);
            self.chunks.insert(i + 1, tail);
            self.rebuild();
        } else {
            self.adjust(i, true);
        }
        true
    }

    /// Removes `key`; false when it was not there.
    pub(crate) fn remove(&mut self, key: &str) -> bool {
        let i = self.chunk_for(key);
        let Some(chunk) = self.chunks.get_mut(i) else {
            return false;
        };
        let Ok(pos) = chunk.binary_search_by(|k| (**k).cmp(key)) else {
            return false;
        };
        chunk.remove(pos);
        self.len -= 1;
        let short = chunk.len();
        if short == 0 {
            self.chunks.remove(i);
            self.rebuild();
        } else if short < MIN_CHUNK && self.merge_around(i) {
            self.rebuild();
        } else {
            self.adjust(i, false);
        }
        true
    }

    /// Number of keys for which `before` holds, where `before` holds for
    /// every key sorting before one for which it holds (as for
    /// [`slice::partition_point`]): the rank of the first key it rejects.
    pub(crate) fn partition_point(&self, before: impl Fn(&str) -> bool) -> usize {
        let i = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|k| before(k)));
        match self.chunks.get(i) {
            Some(chunk) => self.sum_before(i) + chunk.partition_point(|k| before(k)),
            None => self.len,
        }
    }

    /// The chunk `key` belongs in: the first whose last key is not
    /// smaller (`chunks.len()` when every key is smaller).
    fn chunk_for(&self, key: &str) -> usize {
        self.chunks
            .partition_point(|c| c.last().is_some_and(|k| &**k < key))
    }

    /// Merges the short chunk `i` into a neighbour when both fit in one
    /// chunk; true when merged.
    fn merge_around(&mut self, i: usize) -> bool {
        let fits = |a: usize, b: usize| {
            let len = |j: usize| self.chunks.get(j).map_or(usize::MAX / 2, Vec::len);
            len(a) + len(b) <= MAX_CHUNK
        };
        let (into, from) = if fits(i, i + 1) {
            (i, i + 1)
        } else if i > 0 && fits(i - 1, i) {
            (i - 1, i)
        } else {
            return false;
        };
        let moved = self.chunks.remove(from);
        match self.chunks.get_mut(into) {
            Some(chunk) => chunk.extend(moved),
            None => self.chunks.insert(into, moved),
        }
        true
    }

    /// Sum of the lengths of the chunks before chunk `i`.
    fn sum_before(&self, i: usize) -> usize {
        let mut j = i;
        let mut sum = 0;
        while j > 0 {
            sum += self.sums.get(j - 1).copied().unwrap_or(0);
            j &= j - 1;
        }
        sum
    }

    /// Chunk `i` grew (`grow`) or shrank by one key.
    fn adjust(&mut self, i: usize, grow: bool) {
        let mut j = i + 1;
        while let Some(s) = self.sums.get_mut(j - 1) {
            *s = if grow { *s + 1 } else { s.saturating_sub(1) };
            j += j & j.wrapping_neg();
        }
    }

    /// Rebuilds the Fenwick tree after the chunks were split, merged or
    /// dropped (linear in the number of chunks).
    fn rebuild(&mut self) {
        self.sums.clear();
        self.sums.extend(self.chunks.iter().map(Vec::len));
        for j in 1..=self.sums.len() {
            let parent = j + (j & j.wrapping_neg());
            let own = self.sums.get(j - 1).copied().unwrap_or(0);
            if let Some(p) = self.sums.get_mut(parent - 1) {
                *p += own;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Against a `BTreeSet`: after any sequence of inserts and removes, the
    //! rank of every bound is the number of keys before it.

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn key(k: u16) -> String {
        format!("k{k:03}")
    }

    fn check(ranks: &KeyRanks, model: &BTreeSet<String>) -> Result<(), TestCaseError> {
        prop_assert_eq!(ranks.len, model.len());
        let flat: Vec<&str> = ranks.chunks.iter().flatten().map(|k| &**k).collect();
        let want: Vec<&str> = model.iter().map(String::as_str).collect();
        prop_assert_eq!(flat, want);
        prop_assert!(ranks
            .chunks
            .iter()
            .all(|c| !c.is_empty() && c.len() <= MAX_CHUNK));
        for bound in (0..=200).map(key) {
            let below = model.iter().filter(|k| **k < bound).count();
            prop_assert_eq!(ranks.partition_point(|k| k < bound.as_str()), below);
            let at_most = model.iter().filter(|k| **k <= bound).count();
            prop_assert_eq!(ranks.partition_point(|k| k <= bound.as_str()), at_most);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn ranks_match_a_sorted_set(ops in proptest::collection::vec((any::<bool>(), 0u16..200), 1..400)) {
            let mut ranks = KeyRanks::default();
            let mut model = BTreeSet::new();
            for (insert, k) in ops {
                let k = key(k);
                if insert {
                    prop_assert_eq!(ranks.insert(&k), model.insert(k.clone()));
                } else {
                    prop_assert_eq!(ranks.remove(&k), model.remove(&k));
                }
            }
            check(&ranks, &model)?;
        }
    }

    #[test]
    fn empties_and_refills() -> Result<(), TestCaseError> {
        let mut ranks = KeyRanks::default();
        let mut model = BTreeSet::new();
        for round in 0..2 {
            for k in (0..50).map(|k| key(k * 3 + round)) {
                ranks.insert(&k);
                model.insert(k);
            }
            check(&ranks, &model)?;
            for k in (0..50).rev().map(|k| key(k * 3 + round)) {
                ranks.remove(&k);
                model.remove(&k);
            }
            check(&ranks, &model)?;
            prop_assert!(ranks.chunks.is_empty());
        }
        Ok(())
    }
}
