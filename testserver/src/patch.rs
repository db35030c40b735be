//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386),
//! strategic merge patch for built-in kinds (merge keys and strategies
//! from the kind's schema, `x-kubernetes-patch-*`, and the directives);
//! server-side apply is in `fields`.

use serde_json::{Map, Value};

/// The patch formats kube-apiserver accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (also `+cbor`-less JSON bodies).
    Apply,
}

impl PatchType {
    /// The patch type a Content-Type names.
    pub(crate) fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError {
    /// The body is not a patch of this type.
    #[error("{0}")]
    Decode(String),
    /// The patch does not apply to the object.
    #[error("{0}")]
    Apply(String),
}

/// Applies an RFC 6902 JSON patch.
pub(crate) fn json_patch(target: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let ops: json_patch::Patch =
        serde_json::from_slice(body).map_err(|e| PatchError::Decode(e.to_string()))?;
    let mut out = target.clone();
    json_patch::patch(&mut out, &ops).map_err(|e| PatchError::Apply(e.to_string()))?;
    Ok(out)
}

/// Applies an RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::Decode(e.to_string()))?;
    if !patch.is_object() {
        return Err(PatchError::Decode(
            "merge patch must be a JSON object".into(),
        ));
    }
    let mut out = target.clone();
    json_patch::merge(&mut out, &patch);
    Ok(out)
}

/// The merge key of a list field, by the field's name, for kinds this
/// server has no schema of.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "env" => Some("name"),
        "ports" => Some("containerPort"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "hostAliases" => Some("ip"),
        _ => None,
    }
}

/// Where a patch is in the object: the kind's schema there (`typed`: the
/// kind has one; `metadata` is read by field names, as for kinds without
/// a schema).
#[derive(Clone, Copy)]
struct At<'a> {
    schema: Option<&'a Value>,
    typed: bool,
}

/// How a list merges.
enum ListRule {
    /// Replaced by the patch's list.
    Replace,
    /// Scalars merged as a set.
    Primitives,
    /// Objects merged by this key.
    ByKey(String),
}

impl<'a> At<'a> {
    fn field(self, path: &[String], name: &str) -> At<'a> {
        if !self.typed || (path.is_empty() && name == "metadata") {
            return At {
                schema: None,
                typed: false,
            };
        }
        let schema = self.schema.and_then(|s| {
            s.get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
        });
        At {
            schema,
            typed: true,
        }
    }

    fn item(self) -> At<'a> {
        At {
            schema: self.schema.and_then(|s| s.get("items")),
            typed: self.typed,
        }
    }

    /// The rule of list `field` (this `At` is the list's own).
    fn list_rule(self, path: &[String], field: &str, items: &[Value]) -> ListRule {
        if self.typed {
            let ext = |k: &str| {
                self.schema
                    .and_then(|s| s.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            let merge = ext("x-kubernetes-patch-strategy")
                .split(',')
                .any(|s| s == "merge");
            let key = ext("x-kubernetes-patch-merge-key");
            return match (merge, key) {
                (false, _) => ListRule::Replace,
                (true, "") => ListRule::Primitives,
                (true, k) => ListRule::ByKey(k.to_owned()),
            };
        }
        if field == "finalizers" && path.last().is_some_and(|p| p == "metadata") {
            return ListRule::Primitives;
        }
        match merge_key(field) {
            Some(k) if items.iter().all(Value::is_object) => ListRule::ByKey(k.to_owned()),
            _ => ListRule::Replace,
        }
    }
}

/// Applies a strategic merge patch; `schema` is the kind's structural
/// schema (merge keys and strategies from `x-kubernetes-patch-*`), or
/// `None` to merge the lists kube's common types merge, by field name.
pub(crate) fn strategic_merge_patch(
    target: &Value,
    body: &[u8],
    schema: Option<&Value>,
) -> Result<Value, PatchError> {
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::Decode(e.to_string()))?;
    let Value::Object(p) = patch else {
        return Err(PatchError::Decode(
            "strategic merge patch must be a JSON object".into(),
        ));
    };
    let mut out = target.clone();
    let at = At {
        schema,
        typed: schema.is_some(),
    };
    smp_object(&mut out, &p, &mut Vec::new(), at);
    Ok(out)
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn smp_object(target: &mut Value, patch: &Map<String, Value>, path: &mut Vec<String>, at: At<'_>) {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = strip_directives(&Value::Object(patch.clone()));
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    let t = crate::meta::ensure_object(target);
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (t.get_mut(field), v.as_array()) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let child = at.field(path, k);
        match v {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(pm) => {
                let entry = t.entry(k.clone()).or_insert(Value::Null);
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                path.push(k.clone());
                smp_object(entry, pm, path, child);
                path.pop();
                if entry.is_null() {
                    t.remove(k);
                }
            }
            Value::Array(items) => {
                let merged = smp_list(t.get(k), items, path, k, child);
                t.insert(k.clone(), merged);
            }
            other => {
                t.insert(k.clone(), other.clone());
            }
        }
    }
}

fn smp_list(
    current: Option<&Value>,
    patch: &[Value],
    path: &mut Vec<String>,
    field: &str,
    at: At<'_>,
) -> Value {
    let existing = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let key = match at.list_rule(path, field, patch) {
        ListRule::Replace => return strip_directives(&Value::Array(patch.to_vec())),
        ListRule::Primitives => {
            let mut out = existing;
            for p in patch {
                if !out.contains(p) {
                    out.push(p.clone());
                }
            }
            return Value::Array(out);
        }
        ListRule::ByKey(k) => k,
    };
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        let kept = patch
            .iter()
            .filter(|p| p.get("$patch").is_none())
            .cloned()
            .collect();
        return strip_directives(&Value::Array(kept));
    }
    let mut out = existing;
    for p in patch {
        let Some(pm) = p.as_object() else { continue };
        let id = pm.get(&key);
        let pos = id.and_then(|id| out.iter().position(|e| e.get(&key) == Some(id)));
        if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = pos {
                out.remove(i);
            }
            continue;
        }
        match pos.and_then(|i| out.get_mut(i)) {
            Some(existing) => {
                path.push(field.to_owned());
                smp_object(existing, pm, path, at.item());
                path.pop();
            }
            None => out.push(strip_directives(p)),
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bytes(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap_or_default()
    }

    #[test]
    fn json_and_merge_patches() {
        let obj = json!({"a": 1, "b": {"c": 2}});
        let out = json_patch(
            &obj,
            br#"[{"op":"replace","path":"/a","value":5},{"op":"remove","path":"/b/c"}]"#,
        );
        assert_eq!(out.ok(), Some(json!({"a": 5, "b": {}})));
        assert!(matches!(
            json_patch(&obj, br#"[{"op":"remove","path":"/zz"}]"#),
            Err(PatchError::Apply(_))
        ));
        assert!(matches!(json_patch(&obj, b"{"), Err(PatchError::Decode(_))));
        let out = merge_patch(&obj, br#"{"a": null, "b": {"d": 3}}"#);
        assert_eq!(out.ok(), Some(json!({"b": {"c": 2, "d": 3}})));
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let dep = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ]}}}, "metadata": {"finalizers": ["f1"]}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "b", "$patch": "delete"},
            {"name": "c", "image": "c:1"}
        ]}}}, "metadata": {"finalizers": ["f2"]}});
        let out = strategic_merge_patch(&dep, &bytes(&patch), None).unwrap_or_default();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([
                {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}
            ])
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
        let del = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}, "spec": {"$patch": "replace", "replicas": 2}});
        let out = strategic_merge_patch(&dep, &bytes(&del), None).unwrap_or_default();
        assert_eq!(out["metadata"]["finalizers"], json!([]));
        assert_eq!(out["spec"], json!({"replicas": 2}));
    }

    #[test]
    fn strategic_merge_follows_the_kinds_schema() {
        let services = crate::builtin::get("", "services");
        let schema = crate::builtin::schemas::structural(&services);
        let svc = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "name": "http"}, {"port": 443, "name": "https"}],
            "externalIPs": ["1.2.3.4"]}});
        // ports merge on `port` (kube's patch merge key), not by name
        let patch =
            json!({"spec": {"ports": [{"port": 80, "name": "web"}], "externalIPs": ["5.6.7.8"]}});
        let out = strategic_merge_patch(&svc, &bytes(&patch), schema).unwrap_or_default();
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP", "name": "web"}, {"port": 443, "name": "https"}])
        );
        // a list without a patch strategy is replaced
        assert_eq!(out["spec"]["externalIPs"], json!(["5.6.7.8"]));
        let pods = crate::builtin::pods();
        let schema = crate::builtin::schemas::structural(&pods);
        let pod = json!({"metadata": {"finalizers": ["a"]}, "spec": {"tolerations": [{"key": "a"}],
            "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
        let patch = json!({"metadata": {"finalizers": ["b"]}, "spec": {"tolerations": [{"key": "b"}],
            "containers": [{"name": "c", "ports": [{"containerPort": 81}]}]}});
        let out = strategic_merge_patch(&pod, &bytes(&patch), schema).unwrap_or_default();
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "b"}]));
        assert_eq!(
            out["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80}, {"containerPort": 81}])
        );
        assert_eq!(out["spec"]["containers"][0]["image"], "i");
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
    }
}
