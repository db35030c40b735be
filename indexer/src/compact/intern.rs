//! The interner of compact metadata: the namespace is shared (`Arc<str>`)
//! between every object of that namespace.
//!
//! Bounded: past [`MAX_ENTRIES`] the strings no object holds any more are
//! dropped from the table, and if it is still full new strings are simply
//! not interned (each object then owns its copy; the table is pruned again
//! after a quarter of its size in calls that found it full). So hostile input cannot grow
//! it without bound nor make interning slow.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

/// Longer strings are never interned (a namespace is at most 63 bytes).
const MAX_LEN: usize = 320;

/// How many strings the table holds at most.
const MAX_ENTRIES: usize = 1 << 16;

/// The interned strings, and how many calls found the table full.
#[derive(Default)]
struct Table {
    strings: HashSet<Arc<str>, foldhash::fast::RandomState>,
    full_hits: usize,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(Table::default()));

/// The shared copy of `s` (interned if short enough and there is room).
pub(crate) fn intern(s: &str) -> Arc<str> {
    if s.len() > MAX_LEN {
        return Arc::from(s);
    }
    let mut table = TABLE.lock();
    if let Some(shared) = table.strings.get(s) {
        return Arc::clone(shared);
    }
    if table.strings.len() >= MAX_ENTRIES {
        // Prune at most once per MAX_ENTRIES / 4 calls that find the table
        // full: when it is full of strings still held, interning stays
        // O(1) amortized.
        if table.full_hits.is_multiple_of(MAX_ENTRIES / 4) {
            table.strings.retain(|a| Arc::strong_count(a) > 1);
        }
        table.full_hits = table.full_hits.wrapping_add(1);
        if table.strings.len() >= MAX_ENTRIES {
            return Arc::from(s);
        }
    }
    let shared: Arc<str> = Arc::from(s);
    table.strings.insert(Arc::clone(&shared));
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_are_shared_and_long_ones_are_not() {
        let a = intern("app.kubernetes.io/name");
        let b = intern("app.kubernetes.io/name");
        assert!(Arc::ptr_eq(&a, &b));
        let long = "x".repeat(MAX_LEN + 1);
        assert!(!Arc::ptr_eq(&intern(&long), &intern(&long)));
    }

    #[test]
    fn the_table_stays_bounded_and_keeps_strings_still_held() {
        let held = intern("held-across-pruning");
        for i in 0..MAX_ENTRIES + 1_000 {
            drop(intern(&format!("unique-{i}")));
        }
        assert!(TABLE.lock().strings.len() <= MAX_ENTRIES);
        assert!(Arc::ptr_eq(&held, &intern("held-across-pruning")));
    }
}
