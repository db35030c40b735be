//! Pods and pod templates: kube's defaults of `PodSpec` and `Container`
//! (every workload's template gets them), the Pod-only defaults, what the
//! admission plugins a cluster runs add on create (service account,
//! priority, not-ready/unreachable tolerations), the initial status with
//! its QoS class, and validation (containers, and which fields an update
//! may change).
//!
//! Not defaulted: the empty `securityContext` kube adds to every pod spec
//! (the protobuf mapping of Deployments and ReplicaSets cannot carry it
//! yet, and no client relies on it), and the service-account token volume.

use super::json::{default, each_item, object_at, str_of};
use crate::meta;
use crate::status::FieldError;
use serde_json::{json, Map, Value};

/// `PodSpec` defaults (`SetDefaults_PodSpec` and what it recurses into).
pub(crate) fn default_pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        each_item(spec, list, default_container);
    }
    each_item(spec, "volumes", default_volume);
    // the deprecated field mirrors the name, as kube's conversion writes it
    let name = str_of(spec, "serviceAccountName").to_owned();
    let deprecated = str_of(spec, "serviceAccount").to_owned();
    if !name.is_empty() && deprecated.is_empty() {
        spec.insert("serviceAccount".into(), json!(name));
    } else if name.is_empty() && !deprecated.is_empty() {
        spec.insert("serviceAccountName".into(), json!(deprecated));
    }
}

/// The pull policy kube derives from an image reference: `Always` for
/// `:latest` or no tag, `IfNotPresent` otherwise (a digest without a tag
/// counts as a tag).
pub(crate) fn pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

fn default_container(c: &mut Map<String, Value>) {
    let policy = pull_policy(str_of(c, "image"));
    default(c, "imagePullPolicy", json!(policy));
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    default(c, "resources", json!({}));
    each_item(c, "ports", |p| default(p, "protocol", json!("TCP")));
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(p)) = c.get_mut(probe) {
            default(p, "timeoutSeconds", json!(1));
            default(p, "periodSeconds", json!(10));
            default(p, "successThreshold", json!(1));
            default(p, "failureThreshold", json!(3));
            default_http_get(p);
        }
    }
    if let Some(Value::Object(lc)) = c.get_mut("lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(Value::Object(h)) = lc.get_mut(hook) {
                default_http_get(h);
            }
        }
    }
    each_item(c, "env", |e| {
        if let Some(Value::Object(fr)) = e.get_mut("valueFrom").and_then(|v| v.get_mut("fieldRef"))
        {
            default(fr, "apiVersion", json!("v1"));
        }
    });
}

fn default_http_get(handler: &mut Map<String, Value>) {
    if let Some(Value::Object(h)) = handler.get_mut("httpGet") {
        default(h, "path", json!("/"));
        default(h, "scheme", json!("HTTP"));
    }
}

fn default_volume(v: &mut Map<String, Value>) {
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(Value::Object(s)) = v.get_mut(source) {
            default(s, "defaultMode", json!(420));
        }
    }
}

/// The pod spec of a template at `path` (`spec.template`), defaulted.
pub(crate) fn default_template(obj: &mut Value, path: &[&str]) {
    let mut spec_path = path.to_vec();
    spec_path.push("spec");
    default_pod_spec(object_at(obj, &spec_path));
}

/// Defaults of a Pod (`SetDefaults_Pod` and `SetDefaults_PodSpec`).
pub(crate) fn default_pod(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default_pod_spec(spec);
    default(spec, "enableServiceLinks", json!(true));
    let host_network = spec.get("hostNetwork") == Some(&json!(true));
    for list in ["containers", "initContainers"] {
        each_item(spec, list, |c| {
            requests_from_limits(c);
            if host_network {
                each_item(c, "ports", |p| {
                    if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0 {
                        if let Some(cp) = p.get("containerPort").cloned() {
                            p.insert("hostPort".into(), cp);
                        }
                    }
                });
            }
        });
    }
}

/// Requests default to limits where only limits are given.
fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(Value::Object(res)) = c.get_mut("resources") else {
        return;
    };
    let Some(Value::Object(limits)) = res.get("limits").cloned() else {
        return;
    };
    let requests = crate::meta::ensure_object(res.entry("requests").or_insert(Value::Null));
    for (k, v) in limits {
        requests.entry(k).or_insert(v);
    }
}

/// What the admission plugins of a cluster add to a new Pod
/// (ServiceAccount, Priority, DefaultTolerationSeconds), and the status
/// kube-apiserver gives it (`Pending`, its QoS class).
pub(crate) fn admit_pod(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "serviceAccountName", json!("default"));
    default(spec, "priority", json!(0));
    default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    let tolerations = spec.entry("tolerations").or_insert(json!([]));
    if let Value::Array(list) = tolerations {
        for taint in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            let present = list.iter().any(|t| {
                t["key"] == taint && (t["effect"] == "NoExecute" || t["effect"].is_null())
            });
            if !present {
                list.push(json!({"key": taint, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
        }
    }
    default_pod(obj);
    let qos = qos_class(obj);
    if let Some(root) = obj.as_object_mut() {
        root.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": qos}),
        );
    }
}

/// The QoS class of a pod: `Guaranteed` when every container limits and
/// requests the same CPU and memory, `BestEffort` when none asks for
/// either, `Burstable` otherwise.
pub(crate) fn qos_class(pod: &Value) -> &'static str {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| pod["spec"][*l].as_array())
        .flatten();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        for r in ["cpu", "memory"] {
            let req = &c["resources"]["requests"][r];
            let lim = &c["resources"]["limits"][r];
            any |= !req.is_null() || !lim.is_null();
            guaranteed &= !lim.is_null() && (req.is_null() || req == lim);
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// Validation of a pod spec at `path` (`spec`, `spec.template.spec`).
pub(crate) fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let containers = spec["containers"].as_array();
    if containers.is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    for list in ["initContainers", "containers"] {
        let mut seen: Vec<&str> = Vec::new();
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            let name = c["name"].as_str().unwrap_or("");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{at}.name"), ""));
            } else if !meta::is_dns1123_label(name) {
                errs.push(meta::label_error(&format!("{at}.name"), name));
            } else if seen.contains(&name) {
                let mut e = FieldError::invalid(format!("{at}.name"), json!(name), "");
                e.kind = crate::status::FieldErrorKind::Duplicate;
                errs.push(e);
            }
            seen.push(name);
            if c["image"].as_str().unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("{at}.image"), ""));
            }
        }
    }
    let restart = spec["restartPolicy"].as_str().unwrap_or("");
    if !["Always", "OnFailure", "Never"].contains(&restart) {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            json!(restart),
            &["Always".into(), "OnFailure".into(), "Never".into()],
        ));
    }
}

/// What a Pod update may change in the spec: container images, the
/// active deadline, tolerations and scheduling gates; the node once (the
/// binding the scheduler makes).
fn mutable_spec_removed(spec: &Value, nodeless: bool) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        for f in [
            "activeDeadlineSeconds",
            "tolerations",
            "schedulingGates",
            "terminationGracePeriodSeconds",
        ] {
            m.remove(f);
        }
        if nodeless {
            m.remove("nodeName");
        }
        for list in ["containers", "initContainers"] {
            each_item(m, list, |c| {
                c.remove("image");
            });
        }
    }
    s
}

/// Validation of a Pod.
pub(crate) fn validate_pod(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    validate_pod_spec(&obj["spec"], "spec", errs);
    if let Some(old) = old {
        let nodeless = old["spec"]["nodeName"].as_str().unwrap_or("").is_empty();
        if mutable_spec_removed(&old["spec"], nodeless)
            != mutable_spec_removed(&obj["spec"], nodeless)
        {
            errs.push(FieldError::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` or `spec.schedulingGates`",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx:1"), "IfNotPresent");
        assert_eq!(pull_policy("nginx@sha256:abc"), "IfNotPresent");
        assert_eq!(pull_policy("nginx:latest@sha256:abc"), "Always");
    }

    #[test]
    fn a_pod_gets_kube_defaults_admission_and_status() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}],
             "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
             "readinessProbe": {"httpGet": {"port": 80}}}],
            "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}]}});
        admit_pod(&mut pod);
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(2));
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["resources"]["requests"]["cpu"], "1");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/");
        assert_eq!(c["readinessProbe"]["periodSeconds"], 10);
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        // defaults are idempotent
        let again = {
            let mut p = pod.clone();
            default_pod(&mut p);
            p
        };
        assert_eq!(again, pod);
    }

    #[test]
    fn qos_classes() {
        let best = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(qos_class(&best), "BestEffort");
        let burst = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(qos_class(&burst), "Burstable");
    }

    #[test]
    fn pod_validation_and_immutable_spec() {
        let mut errs = Vec::new();
        validate_pod(
            &json!({"spec": {"restartPolicy": "Always"}}),
            None,
            &mut errs,
        );
        assert_eq!(
            errs.first().map(ToString::to_string).as_deref(),
            Some("spec.containers: Required value")
        );
        let old = json!({"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "a"}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("b");
        new["spec"]["nodeName"] = json!("node-0");
        let mut errs = Vec::new();
        validate_pod(&new, Some(&old), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let mut moved = new.clone();
        moved["spec"]["nodeName"] = json!("node-1");
        let mut errs = Vec::new();
        validate_pod(&moved, Some(&new), &mut errs);
        assert_eq!(errs.len(), 1);
        let mut dup = old.clone();
        dup["spec"]["containers"] =
            json!([{"name": "c", "image": "a"}, {"name": "c", "image": "b"}]);
        let mut errs = Vec::new();
        validate_pod(&dup, None, &mut errs);
        assert_eq!(
            errs.first().map(ToString::to_string).as_deref(),
            Some("spec.containers[1].name: Duplicate value: \"c\"")
        );
    }
}
