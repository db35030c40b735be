//! [`CompactMap`]: a sorted, immutable string map in one boxed slice.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::intern::{intern, intern_any, MAX_INTERNED_LEN};
use crate::object::StringMap;

/// Labels, annotations or ConfigMap data in 16 bytes plus one allocation:
/// entries sorted by key in a boxed slice. Keys and short values
/// (≤ 32 bytes) are interned, so the `app` key or the `production` value of
/// 100,000 objects is stored once; long values are owned by their object.
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
    entries: Box<[(Arc<str>, Arc<str>)]>,
}

impl CompactMap {
    /// The empty map (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|(_, v)| v.as_ref())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The entries, sorted by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.entries.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }

    /// The values, in key order.
    pub fn values(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.iter().map(|(_, v)| v.as_ref())
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A copy as k8s-openapi's map type.
    pub fn to_btree_map(&self) -> BTreeMap<String, String> {
        StringMap::to_btree_map(self)
    }

    /// Builds a map from entries in any order; of repeated keys the last wins.
    fn from_entries(mut entries: Vec<(Arc<str>, Arc<str>)>) -> Self {
        // Stable sort keeps repeated keys in input order; keep the last one.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Arc<str>, Arc<str>)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match out.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => out.push(entry),
            }
        }
        Self {
            entries: out.into_boxed_slice(),
        }
    }
}

/// A value as stored: interned when short.
fn value(s: &str) -> Arc<str> {
    if s.len() <= MAX_INTERNED_LEN {
        intern(s)
    } else {
        Arc::from(s)
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
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self::from_entries(
            iter.into_iter()
                .map(|(k, v)| (intern_any(k.as_ref()), value(v.as_ref())))
                .collect(),
        )
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

/// A key or value decoded without an intermediate `String` when the input
/// lends the text (serde_json does, for strings without escapes).
struct Text(Arc<str>);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl Visitor<'_> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(value(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
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
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4).min(64));
                while let Some(Key(key)) = map.next_key::<Key>()? {
                    let Text(v) = map.next_value::<Text>()?;
                    entries.push((key, v));
                }
                Ok(CompactMap::from_entries(entries))
            }
        }
        deserializer.deserialize_option(MapVisitor)
    }
}

/// A key: always interned (long keys such as
/// `example.com/some-long-annotation-name` too: the set of keys is small in
/// practice), within the interner's bound.
struct Key(Arc<str>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(intern_any(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
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
