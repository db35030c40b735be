//! Walks over objects with structured-merge-diff's list semantics: the
//! field set an applied configuration sets, the comparison of two versions
//! of an object (added, modified, removed), the apply merge, and removal
//! of fields by path.
//!
//! How a list merges comes from the CRD schema (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`) for custom
//! resources, and from the field's name for the built-in kinds (the
//! `listType=map` keys of the Kubernetes types this server serves).

use super::set::FieldSet;
use serde_json::{Map, Value};

/// How a list is merged and tracked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// Replaced as a whole; owned as one field.
    Atomic,
    /// Items identified by these fields (`k:{...}`).
    Map(Vec<String>),
    /// Scalar items identified by value (`v:...`).
    Set,
}

/// Where in an object a walk is: what the schema (if any) says here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    /// A custom resource (schema rules, lists atomic by default).
    pub custom: bool,
    /// The schema of the node, for custom resources.
    pub schema: Option<&'a Value>,
}

impl<'a> Ctx<'a> {
    fn field(&self, path: &[String], name: &str) -> Ctx<'a> {
        let schema = if path.is_empty() && name == "metadata" {
            None
        } else {
            self.schema.and_then(|s| {
                s.get("properties")
                    .and_then(|p| p.get(name))
                    .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
            })
        };
        Ctx {
            custom: self.custom,
            schema,
        }
    }

    fn item(&self) -> Ctx<'a> {
        Ctx {
            custom: self.custom,
            schema: self.schema.and_then(|s| s.get("items")),
        }
    }

    fn under_metadata(path: &[String]) -> bool {
        path.first().is_some_and(|p| p == "f:metadata")
    }

    /// The list semantics of the list at `path` (whose last element is the
    /// list's field).
    pub(crate) fn list_kind(&self, path: &[String]) -> ListKind {
        if let Some(s) = self.schema {
            return match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => ListKind::Map(
                    s.get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
                Some("set") => ListKind::Set,
                _ => ListKind::Atomic,
            };
        }
        if self.custom && !Self::under_metadata(path) {
            return ListKind::Atomic;
        }
        let field = path.last().and_then(|e| e.strip_prefix("f:")).unwrap_or("");
        let in_item = path
            .len()
            .checked_sub(2)
            .and_then(|i| path.get(i))
            .is_some_and(|e| e.starts_with("k:"));
        let keys: &[&str] = match field {
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "volumes"
            | "env"
            | "imagePullSecrets"
            | "resourceClaims" => &["name"],
            "ports" if in_item => &["containerPort", "protocol"],
            "ports" => &["port", "protocol"],
            "volumeMounts" => &["mountPath"],
            "volumeDevices" => &["devicePath"],
            "conditions" => &["type"],
            "ownerReferences" => &["uid"],
            "hostAliases" => &["ip"],
            "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
            "finalizers" if path.len() == 2 && Self::under_metadata(path) => return ListKind::Set,
            _ => return ListKind::Atomic,
        };
        ListKind::Map(keys.iter().map(|k| (*k).to_owned()).collect())
    }

    /// Whether the object at `path` is owned and replaced as a whole.
    pub(crate) fn atomic_map(&self, path: &[String]) -> bool {
        if let Some(s) = self.schema {
            return s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        }
        // Deployment's (and Service's) `spec.selector`
        !self.custom && path.len() == 2 && path[0] == "f:spec" && path[1] == "f:selector"
    }

    /// Whether an object node appearing or disappearing is itself a change
    /// (kube's non-pointer struct fields always exist, so they never are).
    fn node_tracked(&self, path: &[String]) -> bool {
        if self.custom {
            return true;
        }
        let always_present = [
            "f:metadata",
            "f:spec",
            "f:status",
            "f:template",
            "f:strategy",
        ];
        !path
            .last()
            .is_some_and(|e| always_present.contains(&e.as_str()))
    }
}

/// The identifying value of a key field, with kube's default for the
/// `protocol` of ports.
fn key_value<'v>(item: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    static TCP: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| Value::from("TCP"));
    match item.get(key) {
        Some(v) if !v.is_null() => Some(v),
        _ if key == "protocol" => Some(&TCP),
        _ => None,
    }
}

/// The `k:` path element of a list-map item; `None` when a key is missing.
pub(crate) fn item_element(item: &Value, keys: &[String]) -> Option<String> {
    let m = item.as_object()?;
    let mut k = Map::new();
    for key in keys {
        k.insert(key.clone(), key_value(m, key)?.clone());
    }
    Some(format!("k:{}", Value::Object(k)))
}

/// The `v:` path element of a set item.
pub(crate) fn set_element(item: &Value) -> String {
    format!("v:{item}")
}

/// The path elements of a list's items, or `None` when the list cannot be
/// tracked per item (a missing or duplicate key: then it is atomic).
fn item_elements(items: &[Value], kind: &ListKind) -> Option<Vec<String>> {
    let out: Vec<String> = match kind {
        ListKind::Atomic => return None,
        ListKind::Map(keys) if keys.is_empty() => return None,
        ListKind::Map(keys) => items
            .iter()
            .map(|i| item_element(i, keys))
            .collect::<Option<_>>()?,
        ListKind::Set => {
            if items.iter().any(|i| i.is_object() || i.is_array()) {
                return None;
            }
            items.iter().map(set_element).collect()
        }
    };
    let mut sorted = out.clone();
    sorted.sort();
    sorted.dedup();
    (sorted.len() == out.len()).then_some(out)
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// Skipped by every walk: managedFields are not fields of the object.
fn skipped(path: &[String]) -> bool {
    path.len() == 2 && path[0] == "f:metadata" && path[1] == "f:managedFields"
}

/// The fields an applied configuration sets (structured-merge-diff's
/// `ToFieldSet`): leaves, atomic lists and objects, empty objects, and
/// every list item.
pub(crate) fn set_of(value: &Value, ctx: Ctx<'_>) -> Result<FieldSet, String> {
    let mut out = FieldSet::default();
    set_walk(value, &mut Vec::new(), ctx, &mut out)?;
    Ok(out)
}

fn set_walk(
    value: &Value,
    path: &mut Vec<String>,
    ctx: Ctx<'_>,
    out: &mut FieldSet,
) -> Result<(), String> {
    if skipped(path) {
        return Ok(());
    }
    match value {
        Value::Object(m) if !m.is_empty() && !ctx.atomic_map(path) => {
            for (k, v) in m {
                let child = ctx.field(path, k);
                path.push(format!("f:{k}"));
                set_walk(v, path, child, out)?;
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let kind = ctx.list_kind(path);
            if kind == ListKind::Atomic {
                out.insert(path);
                return Ok(());
            }
            for (i, item) in items.iter().enumerate() {
                let elem = match &kind {
                    ListKind::Map(keys) => item_element(item, keys).ok_or_else(|| {
                        format!(
                            "{}: element {i}: associative list with keys has an element that omits key field {:?} (and doesn't have default value)",
                            super::set::path_string(path),
                            keys.iter().find(|k| item.as_object().is_none_or(|m| key_value(m, k).is_none())).map(String::as_str).unwrap_or("")
                        )
                    })?,
                    _ => set_element(item),
                };
                path.push(elem);
                if out.contains(path) {
                    return Err(format!(
                        "{}: duplicate entries for key {}",
                        super::set::path_string(&path[..path.len() - 1]),
                        super::set::path_string(&path[path.len() - 1..])
                    ));
                }
                out.insert(path);
                if kind != ListKind::Set {
                    set_walk(item, path, ctx.item(), out)?;
                }
                path.pop();
            }
        }
        _ => out.insert(path),
    }
    Ok(())
}

/// What changed between two versions of an object.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Nothing changed.
    pub(crate) fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// Added or modified fields.
    pub(crate) fn changed(&self) -> FieldSet {
        let mut s = self.added.clone();
        s.union_with(&self.modified);
        s
    }
}

/// Compares two versions of an object (structured-merge-diff's `Compare`).
pub(crate) fn compare(old: &Value, new: &Value, ctx: Ctx<'_>) -> Comparison {
    let mut out = Comparison::default();
    cmp_walk(Some(old), Some(new), &mut Vec::new(), ctx, false, &mut out);
    out
}

fn leaf(old: Option<&Value>, new: Option<&Value>, path: &[String], out: &mut Comparison) {
    match (old, new) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        (Some(a), Some(b)) if a != b => out.modified.insert(path),
        _ => {}
    }
}

fn cmp_walk(
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Vec<String>,
    ctx: Ctx<'_>,
    item: bool,
    out: &mut Comparison,
) {
    if skipped(path) || (old.is_none() && new.is_none()) {
        return;
    }
    // equal subtrees have no changes (most of an object, on most writes);
    // the root differs in resourceVersion, so it is walked
    if !path.is_empty() && old == new {
        return;
    }
    let both_empty = is_empty_container(old) && is_empty_container(new);
    match (old, new) {
        (Some(Value::Object(_)) | None, Some(Value::Object(_)) | None)
            if !both_empty && !ctx.atomic_map(path) =>
        {
            cmp_map(old, new, path, ctx, item, out);
        }
        (Some(Value::Array(_)) | None, Some(Value::Array(_)) | None) if !both_empty => {
            cmp_list(old, new, path, ctx, item, out);
        }
        _ => leaf(old, new, path, out),
    }
}

/// `cmp_walk` of two maps (either may be absent): field by field.
fn cmp_map(
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Vec<String>,
    ctx: Ctx<'_>,
    item: bool,
    out: &mut Comparison,
) {
    let (a, b) = (
        old.and_then(Value::as_object),
        new.and_then(Value::as_object),
    );
    let mut keys: Vec<&String> = a.into_iter().flat_map(|m| m.keys()).collect();
    keys.extend(b.into_iter().flat_map(|m| m.keys()));
    keys.sort();
    keys.dedup();
    for k in keys {
        let child = ctx.field(path, k);
        path.push(format!("f:{k}"));
        cmp_walk(
            a.and_then(|m| m.get(k)),
            b.and_then(|m| m.get(k)),
            path,
            child,
            false,
            out,
        );
        path.pop();
    }
    if !path.is_empty() && (item || ctx.node_tracked(path)) {
        leaf_presence(old, new, path, out);
    }
}

/// `cmp_walk` of two lists (either may be absent): element by element for
/// keyed lists and sets, as one leaf for atomic lists.
fn cmp_list(
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Vec<String>,
    ctx: Ctx<'_>,
    item: bool,
    out: &mut Comparison,
) {
    let kind = ctx.list_kind(path);
    let (a, b) = (
        old.and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]),
        new.and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]),
    );
    let (Some(ea), Some(eb)) = (item_elements(a, &kind), item_elements(b, &kind)) else {
        leaf(old, new, path, out);
        return;
    };
    let mut elems: Vec<&String> = ea.iter().chain(eb.iter()).collect();
    elems.sort();
    elems.dedup();
    for e in elems {
        let ia = ea.iter().position(|x| x == e).and_then(|i| a.get(i));
        let ib = eb.iter().position(|x| x == e).and_then(|i| b.get(i));
        path.push(e.clone());
        if kind == ListKind::Set {
            leaf(ia, ib, path, out);
        } else {
            cmp_walk(ia, ib, path, ctx.item(), true, out);
        }
        path.pop();
    }
    if item || ctx.node_tracked(path) {
        leaf_presence(old, new, path, out);
    }
}

fn leaf_presence(old: Option<&Value>, new: Option<&Value>, path: &[String], out: &mut Comparison) {
    match (old, new) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        _ => {}
    }
}

/// Removes nulls from a value about to be stored.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Merges an applied configuration into the live object: set fields win,
/// list-map items merge by key (new ones are appended), sets are unioned,
/// atomic lists and objects are replaced, a null removes the field.
pub(crate) fn merge(live: &mut Value, config: &Value, ctx: Ctx<'_>) {
    merge_walk(live, config, &mut Vec::new(), ctx);
}

fn merge_walk(live: &mut Value, config: &Value, path: &mut Vec<String>, ctx: Ctx<'_>) {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) if !ctx.atomic_map(path) => {
            for (k, v) in c {
                if v.is_null() {
                    l.remove(k);
                    continue;
                }
                let child = ctx.field(path, k);
                path.push(format!("f:{k}"));
                match l.get_mut(k) {
                    Some(slot) => merge_walk(slot, v, path, child),
                    None => {
                        l.insert(k.clone(), without_nulls(v));
                    }
                }
                path.pop();
            }
        }
        (Value::Array(l), Value::Array(c)) => {
            let kind = ctx.list_kind(path);
            let live_elems = item_elements(l, &kind);
            let config_elems = item_elements(c, &kind);
            let (Some(le), Some(ce)) = (live_elems, config_elems) else {
                *l = c.iter().map(without_nulls).collect();
                return;
            };
            for (e, item) in ce.iter().zip(c) {
                match le.iter().position(|x| x == e) {
                    Some(i) if kind != ListKind::Set => {
                        if let Some(slot) = l.get_mut(i) {
                            path.push(e.clone());
                            merge_walk(slot, item, path, ctx.item());
                            path.pop();
                        }
                    }
                    Some(_) => {}
                    None => l.push(without_nulls(item)),
                }
            }
        }
        (slot, c) => *slot = without_nulls(c),
    }
}

/// Removes the node at `path`; then every object or list above it that
/// this left empty and that `keep` does not own. Returns whether anything
/// was removed.
pub(crate) fn remove_path(obj: &mut Value, path: &[String], keep: &FieldSet) -> bool {
    let removed = remove_walk(obj, path);
    if removed {
        for depth in (1..path.len()).rev() {
            let parent = &path[..depth];
            if keep.contains(parent) {
                break;
            }
            if !is_empty_container(node(obj, parent)) || !remove_walk(obj, parent) {
                break;
            }
        }
    }
    removed
}

fn matches_element(item: &Value, elem: &str) -> bool {
    if let Some(json) = elem.strip_prefix("k:") {
        let Ok(key) = serde_json::from_str::<Map<String, Value>>(json) else {
            return false;
        };
        let Some(m) = item.as_object() else {
            return false;
        };
        key.iter().all(|(k, v)| key_value(m, k) == Some(v))
    } else if let Some(json) = elem.strip_prefix("v:") {
        serde_json::from_str::<Value>(json).is_ok_and(|v| &v == item)
    } else {
        false
    }
}

fn child_mut<'v>(v: &'v mut Value, elem: &str) -> Option<&'v mut Value> {
    if let Some(f) = elem.strip_prefix("f:") {
        return v.as_object_mut()?.get_mut(f);
    }
    let list = v.as_array_mut()?;
    if let Some(i) = elem.strip_prefix("i:") {
        return list.get_mut(i.parse::<usize>().ok()?);
    }
    list.iter_mut().find(|item| matches_element(item, elem))
}

fn node<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    let mut cur = v;
    for elem in path {
        cur = if let Some(f) = elem.strip_prefix("f:") {
            cur.as_object()?.get(f)?
        } else if let Some(i) = elem.strip_prefix("i:") {
            cur.as_array()?.get(i.parse::<usize>().ok()?)?
        } else {
            cur.as_array()?
                .iter()
                .find(|item| matches_element(item, elem))?
        };
    }
    Some(cur)
}

fn remove_walk(obj: &mut Value, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut cur = obj;
    for elem in parents {
        match child_mut(cur, elem) {
            Some(c) => cur = c,
            None => return false,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        return cur.as_object_mut().and_then(|m| m.remove(f)).is_some();
    }
    let Some(list) = cur.as_array_mut() else {
        return false;
    };
    let before = list.len();
    if let Some(i) = last
        .strip_prefix("i:")
        .and_then(|i| i.parse::<usize>().ok())
    {
        if i < list.len() {
            list.remove(i);
        }
    } else {
        list.retain(|item| !matches_element(item, last));
    }
    list.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BUILTIN: Ctx<'static> = Ctx {
        custom: false,
        schema: None,
    };

    fn p(elems: &[&str]) -> Vec<String> {
        elems.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn applied_set_of_a_deployment() {
        let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a"]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx", "args": ["-x"],
                    "ports": [{"containerPort": 80}]}]}}}});
        let s = set_of(&cfg, BUILTIN).unwrap_or_default();
        let c = "k:{\"name\":\"nginx\"}";
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:apiVersion": {}, "f:kind": {},
                "f:metadata": {"f:name": {}, "f:labels": {"f:app": {}}, "f:finalizers": {"v:\"a\"": {}}},
                "f:spec": {"f:replicas": {}, "f:selector": {},
                    "f:template": {"f:spec": {"f:containers": {c: {".": {}, "f:name": {}, "f:image": {}, "f:args": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}}}})
        );
        let bad = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        let e = set_of(&bad, BUILTIN).err().unwrap_or_default();
        assert!(e.contains("omits key field \"name\""), "{e}");
        let dup = json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}});
        assert!(set_of(&dup, BUILTIN).is_err());
    }

    #[test]
    fn compare_finds_added_modified_removed() {
        let old = json!({"metadata": {"labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}});
        let new = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "9"}, "binaryData": {"z": "AA=="}});
        let c = compare(&old, &new, BUILTIN);
        assert_eq!(
            c.added.paths(),
            vec![
                p(&["f:binaryData"]),
                p(&["f:binaryData", "f:z"]),
                p(&["f:metadata", "f:labels", "f:b"])
            ]
        );
        assert_eq!(c.modified.paths(), vec![p(&["f:data", "f:x"])]);
        assert_eq!(c.removed.paths(), vec![p(&["f:data", "f:y"])]);
        assert!(compare(&new, &new, BUILTIN).is_same());
    }

    #[test]
    fn merge_keeps_other_items_and_prune_removes() {
        let mut live = json!({"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
            "metadata": {"finalizers": ["x"]}});
        let cfg = json!({"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]},
            "metadata": {"finalizers": ["y", "x"]}});
        merge(&mut live, &cfg, BUILTIN);
        assert_eq!(
            live,
            json!({"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]},
                "metadata": {"finalizers": ["x", "y"]}})
        );
        let keep = FieldSet::default();
        assert!(remove_path(
            &mut live,
            &p(&["f:spec", "f:containers", "k:{\"name\":\"a\"}"]),
            &keep
        ));
        assert!(remove_path(
            &mut live,
            &p(&["f:metadata", "f:finalizers", "v:\"x\""]),
            &keep
        ));
        assert!(remove_path(
            &mut live,
            &p(&["f:metadata", "f:finalizers", "v:\"y\""]),
            &keep
        ));
        assert_eq!(
            live,
            json!({"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]}})
        );
    }

    #[test]
    fn crd_schema_decides_list_types() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                "items": {"type": "object"}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
            "containers": {"type": "array", "items": {"type": "object"}}}}}});
        let ctx = Ctx {
            custom: true,
            schema: Some(&schema),
        };
        let cfg = json!({"spec": {"items": [{"id": 1, "v": "a"}], "tags": ["t"], "args": ["x"], "containers": [{"name": "c"}]}});
        let s = set_of(&cfg, ctx).unwrap_or_default();
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:spec": {"f:items": {"k:{\"id\":1}": {".": {}, "f:id": {}, "f:v": {}}},
                "f:tags": {"v:\"t\"": {}}, "f:args": {}, "f:containers": {}}})
        );
    }
}
