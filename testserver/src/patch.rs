//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386),
//! strategic merge patch for built-in kinds (merge keys and directives of
//! the Kubernetes types a controller patches); server-side apply is in
//! `fields`.

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

/// The merge key of a list field, by the field's name, for the kinds this
/// server has built in.
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

/// Lists of scalars merged as sets (patchStrategy "merge" on a primitive list).
fn primitive_merge(path: &[String], field: &str) -> bool {
    field == "finalizers" && path.last().is_some_and(|p| p == "metadata")
}

/// Applies a strategic merge patch.
pub(crate) fn strategic_merge_patch(target: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::Decode(e.to_string()))?;
    let Value::Object(p) = patch else {
        return Err(PatchError::Decode(
            "strategic merge patch must be a JSON object".into(),
        ));
    };
    let mut out = target.clone();
    smp_object(&mut out, &p, &mut Vec::new());
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

fn smp_object(target: &mut Value, patch: &Map<String, Value>, path: &mut Vec<String>) {
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
                smp_object(entry, pm, path);
                path.pop();
                if entry.is_null() {
                    t.remove(k);
                }
            }
            Value::Array(items) => {
                let merged = smp_list(t.get(k), items, path, k);
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
) -> Value {
    let existing = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if primitive_merge(path, field) {
        let mut out = existing;
        for p in patch {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        return Value::Array(out);
    }
    let Some(key) = merge_key(field) else {
        return strip_directives(&Value::Array(patch.to_vec()));
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
        let id = pm.get(key);
        let pos = id.and_then(|id| out.iter().position(|e| e.get(key) == Some(id)));
        if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = pos {
                out.remove(i);
            }
            continue;
        }
        match pos.and_then(|i| out.get_mut(i)) {
            Some(existing) => {
                path.push(field.to_owned());
                smp_object(existing, pm, path);
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
        let out = strategic_merge_patch(&dep, &bytes(&patch)).unwrap_or_default();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([
                {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}
            ])
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
        let del = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}, "spec": {"$patch": "replace", "replicas": 2}});
        let out = strategic_merge_patch(&dep, &bytes(&del)).unwrap_or_default();
        assert_eq!(out["metadata"]["finalizers"], json!([]));
        assert_eq!(out["spec"], json!({"replicas": 2}));
    }
}
