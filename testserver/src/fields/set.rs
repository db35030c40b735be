//! Field sets: the trees of field paths that `metadata.managedFields`
//! records per manager, in structured-merge-diff's `FieldsV1` encoding.
//!
//! A path element is kept as its `FieldsV1` key: `f:<field>` (a field of an
//! object), `k:<json object>` (an item of a list keyed by some of its
//! fields), `v:<json value>` (an item of a set) or `i:<index>`. A node is a
//! member of the set when the manager owns that node itself; `.` marks a
//! member that also has owned children.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A set of field paths, as a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

/// Why a `fieldsV1` document could not be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid fieldsV1: {0}")]
pub(crate) struct DecodeError(String);

impl FieldSet {
    /// No member anywhere.
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds one path.
    pub(crate) fn insert(&mut self, path: &[String]) {
        let mut node = self;
        for e in path {
            node = node.children.entry(e.clone()).or_default();
        }
        node.member = true;
    }

    /// Whether the path is a member.
    pub(crate) fn contains(&self, path: &[String]) -> bool {
        self.subtree(path).is_some_and(|n| n.member)
    }

    /// The node at a path.
    pub(crate) fn subtree(&self, path: &[String]) -> Option<&FieldSet> {
        let mut node = self;
        for e in path {
            node = node.children.get(e)?;
        }
        Some(node)
    }

    /// Whether the path or anything below it is a member.
    pub(crate) fn owns_at_or_below(&self, path: &[String]) -> bool {
        self.subtree(path).is_some_and(|n| !n.is_empty())
    }

    /// Adds every member of `other`.
    pub(crate) fn union_with(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, v) in &other.children {
            self.children.entry(k.clone()).or_default().union_with(v);
        }
    }

    /// Members of `self` that are not members of `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let child = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !child.is_empty() {
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// Members of both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                let child = v.intersection(o);
                if !child.is_empty() {
                    out.children.insert(k.clone(), child);
                }
            }
        }
        out
    }

    /// Makes the node at `path` no member (its children stay).
    pub(crate) fn unset(&mut self, path: &[String]) {
        let Some((last, parents)) = path.split_last() else {
            self.member = false;
            return;
        };
        let mut node = self;
        for e in parents {
            match node.children.get_mut(e) {
                Some(n) => node = n,
                None => return,
            }
        }
        if let Some(n) = node.children.get_mut(last) {
            n.member = false;
            if n.is_empty() {
                node.children.remove(last);
            }
        }
    }

    /// Drops the node at `path` and everything below it.
    pub(crate) fn remove_subtree(&mut self, path: &[String]) {
        let Some((last, parents)) = path.split_last() else {
            *self = FieldSet::default();
            return;
        };
        let mut node = self;
        for e in parents {
            match node.children.get_mut(e) {
                Some(n) => node = n,
                None => return,
            }
        }
        node.children.remove(last);
    }

    /// Keeps only the node at `path` and everything below it.
    pub(crate) fn only_subtree(&self, path: &[String]) -> FieldSet {
        let mut out = FieldSet::default();
        if let Some(sub) = self.subtree(path) {
            let mut node = &mut out;
            for e in path {
                node = node.children.entry(e.clone()).or_default();
            }
            *node = sub.clone();
        }
        out
    }

    /// Every member path, in order.
    pub(crate) fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (k, v) in &self.children {
            prefix.push(k.clone());
            v.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` document.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, v) in &self.children {
            if !v.is_empty() {
                m.insert(k.clone(), v.to_fields_v1());
            }
        }
        Value::Object(m)
    }

    /// Reads a `fieldsV1` document.
    pub(crate) fn from_fields_v1(v: &Value) -> Result<FieldSet, DecodeError> {
        let mut out = FieldSet::default();
        read_node(v, &mut out)?;
        // the root is never a member itself
        out.member = false;
        Ok(out)
    }
}

fn read_node(v: &Value, into: &mut FieldSet) -> Result<(), DecodeError> {
    let Value::Object(m) = v else {
        return Err(DecodeError(format!("expected an object, got {v}")));
    };
    if m.is_empty() {
        into.member = true;
    }
    for (k, child) in m {
        if k == "." {
            into.member = true;
            continue;
        }
        let valid = match k.split_once(':') {
            Some(("f", _)) => true,
            Some(("i", n)) => n.parse::<usize>().is_ok(),
            Some(("k", j)) => serde_json::from_str::<Map<String, Value>>(j).is_ok(),
            Some(("v", j)) => serde_json::from_str::<Value>(j).is_ok(),
            _ => false,
        };
        if !valid {
            return Err(DecodeError(format!("unknown path element {k:?}")));
        }
        let node = into.children.entry(k.clone()).or_default();
        read_node(child, node)?;
    }
    Ok(())
}

/// A path as structured-merge-diff prints it in conflict messages:
/// `.spec.containers[name="app"].image`, `[=value]` for set items, `[0]`.
pub(crate) fn path_string(path: &[String]) -> String {
    let mut s = String::new();
    for e in path {
        match e.split_once(':') {
            Some(("f", name)) => {
                s.push('.');
                s.push_str(name);
            }
            Some(("k", json)) => {
                let fields: Map<String, Value> = serde_json::from_str(json).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push('[');
                s.push_str(&parts.join(","));
                s.push(']');
            }
            Some(("v", json)) => {
                s.push_str("[=");
                s.push_str(json);
                s.push(']');
            }
            Some(("i", n)) => {
                s.push('[');
                s.push_str(n);
                s.push(']');
            }
            _ => s.push_str(e),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(elems: &[&str]) -> Vec<String> {
        elems.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn fields_v1_round_trip_and_dot() {
        let mut s = FieldSet::default();
        s.insert(&p(&["f:spec", "f:replicas"]));
        s.insert(&p(&["f:spec", "f:containers", "k:{\"name\":\"a\"}"]));
        s.insert(&p(&[
            "f:spec",
            "f:containers",
            "k:{\"name\":\"a\"}",
            "f:image",
        ]));
        let doc = s.to_fields_v1();
        assert_eq!(
            doc,
            json!({"f:spec": {"f:replicas": {}, "f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}}}}})
        );
        let back = FieldSet::from_fields_v1(&doc).unwrap_or_default();
        assert_eq!(back, s);
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::default();
        a.insert(&p(&["f:data", "f:x"]));
        a.insert(&p(&["f:data", "f:y"]));
        let mut b = FieldSet::default();
        b.insert(&p(&["f:data", "f:y"]));
        b.insert(&p(&["f:data", "f:z"]));
        assert_eq!(a.intersection(&b).paths(), vec![p(&["f:data", "f:y"])]);
        assert_eq!(a.difference(&b).paths(), vec![p(&["f:data", "f:x"])]);
        let mut u = a.clone();
        u.union_with(&b);
        assert_eq!(u.paths().len(), 3);
        assert!(u.owns_at_or_below(&p(&["f:data"])));
        assert!(!u.contains(&p(&["f:data"])));
        u.remove_subtree(&p(&["f:data"]));
        assert!(u.is_empty());
        assert_eq!(
            a.only_subtree(&p(&["f:data", "f:x"])).paths(),
            vec![p(&["f:data", "f:x"])]
        );
    }

    #[test]
    fn paths_print_as_structured_merge_diff_does() {
        assert_eq!(path_string(&p(&["f:spec", "f:replicas"])), ".spec.replicas");
        assert_eq!(
            path_string(&p(&[
                "f:spec",
                "f:ports",
                "k:{\"containerPort\":80,\"protocol\":\"TCP\"}"
            ])),
            ".spec.ports[containerPort=80,protocol=\"TCP\"]"
        );
        assert_eq!(
            path_string(&p(&["f:metadata", "f:finalizers", "v:\"a\""])),
            ".metadata.finalizers[=\"a\"]"
        );
    }
}
