//! The interner of compact maps: label and annotation keys and short values
//! are shared (`Arc<str>`) between every object that holds them.
//!
//! Bounded: past [`MAX_ENTRIES`] the strings no object holds any more are
//! dropped from the table, and if it is still full new strings are simply
//! not interned (each object then owns its copy). So hostile input cannot
//! grow it without bound.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

/// Values longer than this are never interned: long values (data, most
/// annotations) are rarely shared.
pub(crate) const MAX_INTERNED_LEN: usize = 32;

/// Longer strings are never interned (a label key is at most 317 bytes).
const MAX_KEY_LEN: usize = 320;

/// How many strings the table holds at most.
const MAX_ENTRIES: usize = 1 << 16;

static TABLE: LazyLock<Mutex<HashSet<Arc<str>, foldhash::fast::RandomState>>> =
    LazyLock::new(|| Mutex::new(HashSet::default()));

/// The shared copy of `s` (interned if short enough and there is room).
pub(crate) fn intern(s: &str) -> Arc<str> {
    if s.len() > MAX_INTERNED_LEN {
        return Arc::from(s);
    }
    intern_any(s)
}

/// The shared copy of `s` whatever its length (keys), if there is room.
pub(crate) fn intern_any(s: &str) -> Arc<str> {
    if s.len() > MAX_KEY_LEN {
        return Arc::from(s);
    }
    let mut table = TABLE.lock();
    if let Some(shared) = table.get(s) {
        return Arc::clone(shared);
    }
    if table.len() >= MAX_ENTRIES {
        table.retain(|a| Arc::strong_count(a) > 1);
        if table.len() >= MAX_ENTRIES {
            return Arc::from(s);
        }
    }
    let shared: Arc<str> = Arc::from(s);
    table.insert(Arc::clone(&shared));
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
        let long = "x".repeat(MAX_INTERNED_LEN + 1);
        assert!(!Arc::ptr_eq(&intern(&long), &intern(&long)));
    }
}
