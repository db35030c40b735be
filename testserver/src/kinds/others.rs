//! The other built-in kinds with defaults or checks of their own:
//! Namespaces (the `kubernetes` finalizer, the name label), Secrets
//! (`type`, `stringData`), ConfigMaps, PersistentVolumes and claims,
//! Nodes, Endpoints and EndpointSlices (port protocols), NetworkPolicies
//! (policy types), HorizontalPodAutoscalers (min replicas, the CPU metric,
//! scaling behavior) and RBAC bindings (subjects' API groups).

use super::json::{default, each_item, object_at, str_of};
use crate::meta;
use crate::status::{FieldError, StatusError};
use base64::Engine;
use serde_json::{json, Value};

/// A Namespace's `kubernetes` finalizer and `kubernetes.io/metadata.name` label.
pub(crate) fn default_namespace(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "finalizers", json!(["kubernetes"]));
    let name = meta::name(obj).to_owned();
    if !name.is_empty() {
        object_at(obj, &["metadata", "labels"])
            .entry("kubernetes.io/metadata.name")
            .or_insert(json!(name));
    }
}

/// A Secret's `type` (`Opaque`) and its `stringData` folded into `data`.
pub(crate) fn default_secret(obj: &mut Value) -> Result<(), StatusError> {
    let m = meta::ensure_object(obj);
    m.entry("type").or_insert(json!("Opaque"));
    if let Some(Value::Object(sd)) = m.remove("stringData") {
        let data = meta::ensure_object(m.entry("data").or_insert(Value::Null));
        for (k, v) in sd {
            let s = v
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string());
            data.insert(
                k,
                json!(base64::engine::general_purpose::STANDARD.encode(s)),
            );
        }
    }
    if let Some(Value::Object(data)) = m.get("data") {
        let mut errs = Vec::new();
        for (k, v) in data {
            let ok = v
                .as_str()
                .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
            if !ok {
                errs.push(FieldError::invalid(
                    format!("data[{k}]"),
                    v.clone(),
                    "illegal base64 data",
                ));
            }
        }
        if !errs.is_empty() {
            return Err(StatusError::bad_request(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: {}",
                errs.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

/// A ConfigMap's `data` and `binaryData` are maps.
pub(crate) fn validate_configmap(obj: &Value, errs: &mut Vec<FieldError>) {
    for field in ["data", "binaryData"] {
        if let Some(v) = obj.get(field).filter(|v| !v.is_null() && !v.is_object()) {
            errs.push(FieldError::invalid(field, v.clone(), "must be an object"));
        }
    }
}

/// `SetDefaults_PersistentVolume`.
pub(crate) fn default_pv(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    default(spec, "volumeMode", json!("Filesystem"));
    default(object_at(obj, &["status"]), "phase", json!("Pending"));
}

/// `SetDefaults_PersistentVolumeClaim` and its spec's.
pub(crate) fn default_pvc(obj: &mut Value) {
    default(object_at(obj, &["spec"]), "volumeMode", json!("Filesystem"));
    default(object_at(obj, &["status"]), "phase", json!("Pending"));
}

/// A Node's allocatable resources default to its capacity.
pub(crate) fn default_node(obj: &mut Value) {
    let status = object_at(obj, &["status"]);
    if let Some(cap) = status.get("capacity").filter(|c| c.is_object()).cloned() {
        default(status, "allocatable", cap);
    }
}

/// Endpoints' ports are TCP unless said otherwise.
pub(crate) fn default_endpoints(obj: &mut Value) {
    each_item(meta::ensure_object(obj), "subsets", |ss| {
        each_item(ss, "ports", |p| default(p, "protocol", json!("TCP")));
    });
}

/// An EndpointSlice's ports: TCP, and an empty name when unnamed.
pub(crate) fn default_endpoint_slice(obj: &mut Value) {
    each_item(meta::ensure_object(obj), "ports", |p| {
        default(p, "protocol", json!("TCP"));
        default(p, "name", json!(""));
    });
}

/// A NetworkPolicy's ports are TCP; its policy types say which rules it has.
pub(crate) fn default_network_policy(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    for rules in ["ingress", "egress"] {
        each_item(spec, rules, |r| {
            each_item(r, "ports", |p| default(p, "protocol", json!("TCP")));
        });
    }
    if spec
        .get("policyTypes")
        .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
    {
        let mut types = vec![json!("Ingress")];
        if spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty())
        {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

/// `SetDefaults_HorizontalPodAutoscaler` (autoscaling/v2).
pub(crate) fn default_hpa(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .is_none_or(|m| m.as_array().is_none_or(Vec::is_empty))
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(Value::Object(behavior)) = spec.get_mut("behavior") {
        let up = crate::meta::ensure_object(behavior.entry("scaleUp").or_insert(Value::Null));
        default(up, "stabilizationWindowSeconds", json!(0));
        default(up, "selectPolicy", json!("Max"));
        default(
            up,
            "policies",
            json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                   {"type": "Percent", "value": 100, "periodSeconds": 15}]),
        );
        let down = crate::meta::ensure_object(behavior.entry("scaleDown").or_insert(Value::Null));
        default(down, "selectPolicy", json!("Max"));
        default(
            down,
            "policies",
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
        );
    }
}

/// An RBAC subject's `apiGroup`: RBAC's for users and groups, core for
/// service accounts.
pub(crate) fn default_subjects(obj: &mut Value) {
    each_item(meta::ensure_object(obj), "subjects", |s| {
        let group = match str_of(s, "kind") {
            "User" | "Group" => "rbac.authorization.k8s.io",
            _ => "",
        };
        default(s, "apiGroup", json!(group));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_of_the_other_kinds() {
        let mut np = json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}});
        default_network_policy(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let mut hpa = json!({"spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}});
        default_hpa(&mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(
            hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            60
        );
        assert_eq!(
            hpa["spec"]["behavior"]["scaleUp"]["policies"][0]["value"],
            4
        );
        let mut rb = json!({"subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "d"}]});
        default_subjects(&mut rb);
        assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(rb["subjects"][1]["apiGroup"], "");
        let mut pvc = json!({"spec": {"accessModes": ["ReadWriteOnce"]}});
        default_pvc(&mut pvc);
        assert_eq!(
            (
                pvc["spec"]["volumeMode"].clone(),
                pvc["status"]["phase"].clone()
            ),
            (json!("Filesystem"), json!("Pending"))
        );
        let mut node = json!({"status": {"capacity": {"cpu": "4"}}});
        default_node(&mut node);
        assert_eq!(node["status"]["allocatable"]["cpu"], "4");
    }
}
