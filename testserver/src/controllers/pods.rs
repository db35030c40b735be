//! What the workload simulators share: a controller's pods (from the
//! owner index), a pod made from a template (labels, owner reference,
//! generateName) as kube's controllers make them, readiness, and the
//! writes the simulators make as `kube-controller-manager`.

use crate::meta;
use crate::rest::{Core, DeleteOptions, WriteOptions};
use crate::status::StatusError;
use crate::store::StoredObject;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Writes of kube-controller-manager.
pub(super) fn manager() -> WriteOptions {
    WriteOptions {
        field_manager: Some("kube-controller-manager".into()),
        ..WriteOptions::default()
    }
}

/// Whether `obj` names `uid` as its controller.
pub(super) fn controlled_by(obj: &Value, uid: &str) -> bool {
    meta::owner_refs(obj)
        .iter()
        .any(|r| r["uid"] == uid && r["controller"] == true)
}

/// The pods `owner` controls, terminating ones left out.
pub(super) fn owned_pods(core: &Core, owner: &Value) -> Vec<Arc<StoredObject>> {
    let uid = meta::meta_str(owner, "uid");
    let info = crate::builtin::pods();
    let key = info.group_resource();
    let store = core.resource_store(&info);
    core.store
        .dependents_of(uid)
        .into_iter()
        .filter(|(k, _)| *k == key)
        .filter_map(|(_, objkey)| store.get(&objkey))
        .filter(|p| controlled_by(p.value(), uid) && !meta::is_deleting(p.value()))
        .collect()
}

/// Whether a pod has finished (Succeeded or Failed).
pub(super) fn finished(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// Whether a pod is Ready.
pub(super) fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The controller reference a controller puts on what it makes.
pub(super) fn controller_ref(owner: &Value) -> Value {
    json!({"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta::name(owner),
        "uid": meta::meta_str(owner, "uid"), "controller": true, "blockOwnerDeletion": true})
}

/// A pod from `owner`'s template (at `template`): its labels and
/// annotations plus `extra_labels`, a controller reference, and either a
/// fixed name or `generateName` `<owner>-`.
pub(super) fn pod_from_template(
    owner: &Value,
    template: &Value,
    name: Option<&str>,
    extra_labels: Map<String, Value>,
) -> Value {
    let mut labels = template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.extend(extra_labels);
    let mut metadata = json!({"labels": labels, "ownerReferences": [controller_ref(owner)]});
    if let Some(a) = template["metadata"]
        .get("annotations")
        .filter(|a| a.is_object())
    {
        metadata["annotations"] = a.clone();
    }
    match name {
        Some(n) => metadata["name"] = json!(n),
        None => metadata["generateName"] = json!(format!("{}-", meta::name(owner))),
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))})
}

/// Creates a pod in `namespace`.
pub(super) fn create_pod(core: &Core, namespace: &str, pod: Value) -> Result<(), StatusError> {
    core.create(&crate::builtin::pods(), namespace, pod, &manager())
        .map(|_| ())
}

/// Deletes a pod (gone already is fine).
pub(super) fn delete_pod(core: &Core, pod: &StoredObject) -> Result<(), StatusError> {
    match core.delete(
        &crate::builtin::pods(),
        pod.namespace(),
        pod.name(),
        &DeleteOptions::default(),
    ) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `status` as `obj`'s status (of resource `info`) unless it is
/// already that.
pub(super) fn write_status(
    core: &Core,
    info: &crate::resource::ResourceInfo,
    obj: &Value,
    status: Value,
) -> Result<(), StatusError> {
    if obj["status"] == status {
        return Ok(());
    }
    let mut new = obj.clone();
    if let Some(m) = new.as_object_mut() {
        m.insert("status".into(), status);
    }
    core.update(
        info,
        meta::namespace(obj),
        meta::name(obj),
        new,
        crate::rest::Subresource::Status,
        &manager(),
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_from_templates_carry_labels_and_owner() {
        let owner = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-abc", "uid": "u1"}});
        let tpl = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let extra: Map<String, Value> = [("x".to_owned(), json!("1"))].into_iter().collect();
        let pod = pod_from_template(&owner, &tpl, None, extra);
        assert_eq!(pod["metadata"]["generateName"], "web-abc-");
        assert_eq!(pod["metadata"]["labels"], json!({"app": "web", "x": "1"}));
        assert!(controlled_by(&pod, "u1"));
        assert_eq!(pod["spec"]["containers"][0]["name"], "c");
        let named = pod_from_template(&owner, &tpl, Some("db-0"), Map::new());
        assert_eq!(named["metadata"]["name"], "db-0");
        assert!(!ready(&pod) && !finished(&pod));
    }
}
