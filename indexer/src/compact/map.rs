//! [`CompactMap`]: a sorted, immutable string map in one allocation.
//!
//! Layout of the buffer (empty map: no allocation):
//! `n` (u32, little-endian), then for each entry the end offsets of its key
//! and of its value in the text (two u32), then the text: every key and
//! value, in key order, back to back. The text is UTF-8 by construction
//! (it is built from `&str`s), and every offset falls between two of them.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::object::StringMap;

/// Bytes of the entry count and of each offset.
const WORD: usize = 4;

/// Labels, annotations or ConfigMap data in 16 bytes plus one allocation
/// holding the text itself: no pointer per key or value, no allocation per
/// string. Entries are sorted by key (lookups are binary searches).
///
/// Read it like k8s-openapi's `BTreeMap<String, String>`: [`get`](Self::get),
/// [`iter`](Self::iter) (sorted), [`len`](Self::len), `map["key"]`, or
/// convert it with [`to_btree_map`](Self::to_btree_map). It is immutable
/// once built (build a new one with `collect` or `From<BTreeMap>`); what it
/// gives up is in-place insertion.
///
/// ```
/// use kcontrol_indexer::compact::CompactMap;
///
/// let labels: CompactMap = serde_json::from_str(r#"{"tier":"web","app":"shop"}"#)?;
/// assert_eq!(labels.get("app"), Some("shop"));
/// assert_eq!(labels["tier"], *"web");
/// assert_eq!(labels.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["app", "tier"]);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CompactMap {
    buf: Box<[u8]>,
}

impl CompactMap {
    /// The empty map (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let mut lo = 0;
        let mut hi = self.len();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.value(mid)),
            }
        }
        None
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The entries, sorted by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        (0..self.len()).map(|i| self.entry(i))
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// The values, in key order.
    pub fn values(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.word(0)
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy as k8s-openapi's map type.
    pub fn to_btree_map(&self) -> BTreeMap<String, String> {
        StringMap::to_btree_map(self)
    }

    /// The `i`th u32 of the buffer (0 past its end: only for the empty map).
    fn word(&self, i: usize) -> usize {
        let at = i * WORD;
        self.buf
            .get(at..at + WORD)
            .and_then(|b| <[u8; WORD]>::try_from(b).ok())
            .map_or(0, |b| u32::from_le_bytes(b) as usize)
    }

    /// The text between two offsets. It is always a whole run of keys and
    /// values, so valid UTF-8: the check only keeps the code free of
    /// `unsafe`.
    fn text(&self, range: Range<usize>) -> &str {
        let base = WORD * (1 + 2 * self.len());
        self.buf
            .get(base + range.start..base + range.end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }

    /// Entry `i` (`i < len`).
    fn entry(&self, i: usize) -> (&str, &str) {
        (self.key(i), self.value(i))
    }

    /// The key of entry `i`: from the end of the entry before to its own
    /// key's end offset.
    fn key(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.word(2 * i) };
        self.text(start..self.word(1 + 2 * i))
    }

    /// The value of entry `i`: between its key's end and its own end.
    fn value(&self, i: usize) -> &str {
        self.text(self.word(1 + 2 * i)..self.word(2 + 2 * i))
    }

    /// Builds a map from `text` and the ranges of its keys and values, in
    /// any order; of repeated keys the last wins. `None` when the text is
    /// too long for 32-bit offsets (over 4 GiB).
    fn build(text: &[u8], mut entries: Vec<(Range<usize>, Range<usize>)>) -> Option<Self> {
        let key = |r: &Range<usize>| text.get(r.clone()).unwrap_or_default();
        // A stable sort keeps repeated keys in input order: keep the last.
        entries.sort_by(|a, b| key(&a.0).cmp(key(&b.0)));
        let mut kept: Vec<(Range<usize>, Range<usize>)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match kept.last_mut() {
                Some(last) if key(&last.0) == key(&entry.0) => *last = entry,
                _ => kept.push(entry),
            }
        }
        if kept.is_empty() {
            return Some(Self::new());
        }
        let len: usize = kept.iter().map(|(k, v)| k.len() + v.len()).sum();
        let mut buf = Vec::with_capacity(WORD * (1 + 2 * kept.len()) + len);
        buf.extend_from_slice(&u32::try_from(kept.len()).ok()?.to_le_bytes());
        let mut end = 0usize;
        for (k, v) in &kept {
            for r in [k, v] {
                end += r.len();
                buf.extend_from_slice(&u32::try_from(end).ok()?.to_le_bytes());
            }
        }
        for (k, v) in &kept {
            buf.extend_from_slice(text.get(k.clone()).unwrap_or_default());
            buf.extend_from_slice(text.get(v.clone()).unwrap_or_default());
        }
        Some(Self {
            buf: buf.into_boxed_slice(),
        })
    }
}

/// Collects keys and values into one text before a map is built.
#[derive(Default)]
struct Builder {
    text: Vec<u8>,
    entries: Vec<(Range<usize>, Range<usize>)>,
}

impl Builder {
    /// Appends `s` to the text; its range.
    fn push_str(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.extend_from_slice(s.as_bytes());
        start..self.text.len()
    }

    fn push(&mut self, key: &str, value: &str) {
        let k = self.push_str(key);
        let v = self.push_str(value);
        self.entries.push((k, v));
    }

    /// The map; `None` past 4 GiB of text.
    fn finish(self) -> Option<CompactMap> {
        CompactMap::build(&self.text, self.entries)
    }
}

impl StringMap for CompactMap {
    fn value_of(&self, key: &str) -> Option<&str> {
        self.get(key)
    }

    fn entries(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.iter()
    }

    fn entry_count(&self) -> usize {
        self.len()
    }
}

impl std::ops::Index<&str> for CompactMap {
    type Output = str;

    /// The value of `key`; panics when absent, like `BTreeMap`'s index.
    fn index(&self, key: &str) -> &str {
        #[allow(clippy::expect_used)]
        self.get(key).expect("no entry found for key")
    }
}

impl fmt::Debug for CompactMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for CompactMap {
    /// Of repeated keys the last wins. A map whose text passes 4 GiB
    /// cannot be built from memory anyway; it would come out empty.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut builder = Builder::default();
        for (k, v) in iter {
            builder.push(k.as_ref(), v.as_ref());
        }
        builder.finish().unwrap_or_default()
    }
}

impl From<&BTreeMap<String, String>> for CompactMap {
    fn from(map: &BTreeMap<String, String>) -> Self {
        map.iter().collect()
    }
}

impl From<BTreeMap<String, String>> for CompactMap {
    fn from(map: BTreeMap<String, String>) -> Self {
        Self::from(&map)
    }
}

impl From<&CompactMap> for BTreeMap<String, String> {
    fn from(map: &CompactMap) -> Self {
        map.to_btree_map()
    }
}

impl Serialize for CompactMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// Appends a decoded string to a builder's text, without an intermediate
/// `String` when the input lends the text (serde_json does, for strings
/// without escapes); gives its range.
struct Append<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for Append<'_> {
    type Value = Range<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Range<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Append<'_> {
    type Value = Range<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Range<usize>, E> {
        Ok(self.0.push_str(v))
    }
}

impl<'de> Deserialize<'de> for CompactMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = CompactMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings to strings")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<CompactMap, E> {
                Ok(CompactMap::new())
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<CompactMap, E> {
                Ok(CompactMap::new())
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<CompactMap, D::Error> {
                d.deserialize_map(self)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CompactMap, A::Error> {
                let mut builder = Builder::default();
                while let Some(k) = map.next_key_seed(Append(&mut builder))? {
                    let v = map.next_value_seed(Append(&mut builder))?;
                    builder.entries.push((k, v));
                }
                builder
                    .finish()
                    .ok_or_else(|| serde::de::Error::custom("a map of more than 4 GiB of text"))
            }
        }
        deserializer.deserialize_option(MapVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_sorted_with_the_last_of_repeated_keys() {
        let m: CompactMap = serde_json::from_str(r#"{"b":"2","a":"1","b":"3"}"#).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "3")]);
        assert_eq!(m.len(), 2);
        assert_eq!(m.get("c"), None);
        assert!(m.contains_key("a"));
    }

    #[test]
    fn null_and_missing_are_empty_and_escapes_decode() {
        let m: CompactMap = serde_json::from_str("null").unwrap();
        assert!(m.is_empty());
        let m: CompactMap = serde_json::from_str(r#"{"k":"a\"b\u00e9"}"#).unwrap();
        assert_eq!(m.get("k"), Some("a\"bé"));
    }

    #[test]
    fn wrong_shapes_are_errors() {
        assert!(serde_json::from_str::<CompactMap>(r#"{"k":1}"#).is_err());
        assert!(serde_json::from_str::<CompactMap>(r#"["k"]"#).is_err());
    }

    #[test]
    fn empty_keys_and_values_and_unicode_keep_their_place() {
        let m: CompactMap = [("", "x"), ("é", ""), ("a", "ü"), ("", "y")]
            .into_iter()
            .collect();
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [("", "y"), ("a", "ü"), ("é", "")]
        );
        assert_eq!(m.get(""), Some("y"));
        assert_eq!(m.get("é"), Some(""));
        assert_eq!(CompactMap::new().iter().count(), 0);
        assert_eq!(CompactMap::new().get(""), None);
    }

    proptest::proptest! {
        /// Model: a BTreeMap built from the same entries (the last of
        /// repeated keys wins), read every way, and through JSON.
        #[test]
        fn reads_as_the_btree_map_of_its_entries(
            entries in proptest::collection::vec((".{0,6}", ".{0,40}"), 0..12),
            probe in ".{0,6}",
        ) {
            let model: BTreeMap<String, String> = entries.iter().cloned().collect();
            let m: CompactMap = entries.iter().map(|(k, v)| (k, v)).collect();
            proptest::prop_assert_eq!(m.len(), model.len());
            proptest::prop_assert_eq!(m.to_btree_map(), model.clone());
            for (k, v) in &model {
                proptest::prop_assert_eq!(m.get(k), Some(v.as_str()));
            }
            proptest::prop_assert_eq!(m.get(&probe), model.get(&probe).map(String::as_str));
            let json = serde_json::to_string(&model).unwrap();
            let decoded: CompactMap = serde_json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(&decoded, &m);
        }
    }

    #[test]
    fn round_trips_through_btree_map_and_json() {
        let b = BTreeMap::from([
            ("x".to_owned(), "y".repeat(40)),
            ("a".to_owned(), "b".to_owned()),
        ]);
        let m = CompactMap::from(&b);
        assert_eq!(m.to_btree_map(), b);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            serde_json::from_str::<BTreeMap<String, String>>(&json).unwrap(),
            b
        );
    }
}
