//! The `scale` subresource (Deployments, ReplicaSets, StatefulSets, and
//! any resource whose [`ScaleSubresource`] says where its replicas are):
//! an `autoscaling/v1` `Scale` read from the object (replicas, status
//! replicas, the selector as a label-selector string) and written back to
//! its desired replicas, which bumps its generation as any spec change
//! does.

use super::{object_key, Core, Subresource, WriteOptions};
use crate::meta;
use crate::patch::{self, PatchType};
use crate::resource::{ResourceInfo, ScaleSubresource};
use crate::status::{FieldError, StatusError};
use crate::store::WriteTxn;
use kcontrol_indexer::labels::Selector;
use serde_json::{json, Map, Value};

/// The value at a dotted path (`.spec.replicas`).
fn at<'a>(obj: &'a Value, path: &str) -> &'a Value {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .fold(obj, |v, f| &v[f])
}

/// The `Scale` of an object, as kube-apiserver builds it.
pub(crate) fn scale_of(obj: &Value, paths: &ScaleSubresource) -> Value {
    let mut metadata = Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta::metadata(obj).and_then(|m| m.get(f)) {
            metadata.insert(f.into(), v.clone());
        }
    }
    let mut spec = Map::new();
    // autoscaling/v1 omits zero replicas from the spec (omitempty)
    if let Some(r) = at(obj, &paths.spec_replicas_path)
        .as_i64()
        .filter(|r| *r != 0)
    {
        spec.insert("replicas".into(), json!(r));
    }
    let mut status = Map::new();
    status.insert(
        "replicas".into(),
        json!(at(obj, &paths.status_replicas_path).as_i64().unwrap_or(0)),
    );
    let selector = match paths.label_selector_path.as_deref().map(|p| at(obj, p)) {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => serde_json::from_value(v.clone())
            .ok()
            .and_then(|s| Selector::from_label_selector(&s).ok())
            .map(|s| s.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    if !selector.is_empty() {
        status.insert("selector".into(), json!(selector));
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata, "spec": spec, "status": status})
}

fn paths(info: &ResourceInfo) -> Result<&ScaleSubresource, StatusError> {
    info.scale.as_ref().ok_or_else(StatusError::route_not_found)
}

/// Sets the value at a dotted path, creating objects on the way.
fn set_at(obj: &mut Value, path: &str, v: Value) {
    let parts: Vec<&str> = path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect();
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    let mut cur = obj;
    for p in parents {
        cur = meta::ensure_object(cur)
            .entry((*p).to_owned())
            .or_insert(Value::Null);
    }
    meta::ensure_object(cur).insert((*last).to_owned(), v);
}

fn invalid(name: &str, errs: &[FieldError]) -> StatusError {
    StatusError::invalid("autoscaling", "Scale", name, errs)
}

impl Core {
    /// GET of an object's scale.
    pub(crate) fn get_scale(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
    ) -> Result<Value, StatusError> {
        Ok(scale_of(
            self.get(info, namespace, name)?.value(),
            paths(info)?,
        ))
    }

    /// PUT of an object's scale: sets its desired replicas; a
    /// `metadata.resourceVersion` in the Scale is a precondition.
    pub(crate) fn update_scale(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> Result<Value, StatusError> {
        let rs = self.resource_store(info);
        let mut tx = rs.write(&self.store);
        self.scale_locked(info, &mut tx, namespace, name, scale, opts)
    }

    /// PATCH of an object's scale: the patch applies to the current
    /// `Scale`, whose replicas are then written back.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch_scale(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value, StatusError> {
        let rs = self.resource_store(info);
        let mut tx = rs.write(&self.store);
        let key = object_key(info, namespace, name);
        let Some(old) = tx.get(&key) else {
            return Err(StatusError::not_found(&info.group_resource(), name));
        };
        let current = scale_of(old.value(), paths(info)?);
        let patched = match patch_type {
            PatchType::Json => patch::json_patch(&current, body),
            PatchType::Merge => patch::merge_patch(&current, body),
            PatchType::StrategicMerge => patch::strategic_merge_patch(&current, body, None),
            PatchType::Apply => {
                return Err(StatusError::new(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
                ))
            }
        }
        .map_err(|e| StatusError::bad_request(e.to_string()))?;
        self.scale_locked(info, &mut tx, namespace, name, patched, opts)
    }

    fn scale_locked(
        &self,
        info: &ResourceInfo,
        tx: &mut WriteTxn<'_>,
        namespace: &str,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> Result<Value, StatusError> {
        if !scale.is_object() {
            return Err(StatusError::bad_request(
                "the body of the request must be a JSON or YAML object",
            ));
        }
        let (_, kind) = meta::type_meta(&scale);
        if !kind.is_empty() && kind != "Scale" {
            return Err(StatusError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind (Scale)"
            )));
        }
        let given = meta::name(&scale);
        if !given.is_empty() && given != name {
            return Err(StatusError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let replicas = match scale["spec"].get("replicas") {
            None | Some(Value::Null) => 0,
            Some(r) => match r.as_i64().filter(|n| (0..=i64::from(i32::MAX)).contains(n)) {
                Some(n) => n,
                None => {
                    let e = FieldError::invalid(
                        "spec.replicas",
                        r.clone(),
                        "must be greater than or equal to 0",
                    );
                    return Err(invalid(name, &[e]));
                }
            },
        };
        let key = object_key(info, namespace, name);
        let Some(old) = tx.get(&key) else {
            return Err(StatusError::not_found(&info.group_resource(), name));
        };
        let given_rv = meta::meta_str(&scale, "resourceVersion");
        if !given_rv.is_empty() && given_rv != old.resource_version().to_string() {
            return Err(StatusError::stale(&info.group_resource(), name));
        }
        let paths = paths(info)?;
        let mut obj = old.value().clone();
        set_at(&mut obj, &paths.spec_replicas_path, json!(replicas));
        let r = self.update_locked(info, tx, &key, name, obj, Subresource::Scale, opts)?;
        Ok(scale_of(r.object.value(), paths))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_carries_replicas_and_the_selector_string() {
        let dep = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"x": "y"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}},
            "status": {"replicas": 2}});
        assert_eq!(
            scale_of(&dep, &ScaleSubresource::replicas()),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web,tier in (a,b)"}})
        );
        let zero = json!({"metadata": {"name": "z"}, "spec": {"replicas": 0}});
        let paths = ScaleSubresource::replicas();
        assert_eq!(scale_of(&zero, &paths)["spec"], json!({}));
        assert_eq!(scale_of(&zero, &paths)["status"], json!({"replicas": 0}));
        let crd = ScaleSubresource {
            spec_replicas_path: ".spec.size".into(),
            status_replicas_path: ".status.size".into(),
            label_selector_path: Some(".status.selector".into()),
        };
        let cr = json!({"metadata": {"name": "c"}, "spec": {"size": 2}, "status": {"size": 1, "selector": "app=c"}});
        assert_eq!(
            scale_of(&cr, &crd)["status"],
            json!({"replicas": 1, "selector": "app=c"})
        );
        let mut obj = json!({});
        set_at(&mut obj, ".spec.size", json!(3));
        assert_eq!(obj, json!({"spec": {"size": 3}}));
    }
}
