//! The computed cells of the built-in kinds' `kubectl get` columns
//! (`!name` paths of `builtin::columns`), as kube-apiserver's printers
//! render them: `1/1` readiness, a pod's status, a Service's ports,
//! `<none>` for what is not set, and so on.

use crate::timeutil;
use serde_json::{json, Value};

const NONE: &str = "<none>";
const UNSET: &str = "<unset>";

/// The cell of computed column `name` for `obj`; `None` for an unknown name.
pub(crate) fn cell(name: &str, obj: &Value) -> Option<Value> {
    let spec = &obj["spec"];
    let status = &obj["status"];
    Some(match name {
        "!age" => age(&obj["metadata"]["creationTimestamp"]),
        "!datacount" => {
            let n = |f: &str| obj[f].as_object().map_or(0, serde_json::Map::len);
            json!(n("data") + n("binaryData"))
        }
        "!ready" => json!(format!(
            "{}/{}",
            int(&status["readyReplicas"]),
            int_or(&spec["replicas"], 1)
        )),
        "!desired" => json!(int_or(&spec["replicas"], 1)),
        "!current" => json!(int(&status["replicas"])),
        "!ready-count" => json!(int(&status["readyReplicas"])),
        "!eventobject" => {
            let io = obj.get("involvedObject").unwrap_or(&obj["regarding"]);
            json!(format!(
                "{}/{}",
                str_of(&io["kind"]).to_ascii_lowercase(),
                str_of(&io["name"])
            ))
        }
        "!webhookcount" => crate::admission::webhook_count(obj),
        "!containers" => json!(template_containers(obj, "name")),
        "!images" => json!(template_containers(obj, "image")),
        "!selector" => json!(or_none(label_selector(&spec["selector"]))),
        "!node-selector" => json!(or_none(map_text(&spec["template"]["spec"]["nodeSelector"]))),
        _ => return pods_and_services(name, obj).or_else(|| others(name, obj)),
    })
}

fn pods_and_services(name: &str, obj: &Value) -> Option<Value> {
    let spec = &obj["spec"];
    let status = &obj["status"];
    Some(match name {
        "!pod-ready" => {
            let cs = status["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let total = spec["containers"].as_array().map_or(0, Vec::len);
            let ready = cs.iter().filter(|c| c["ready"] == true).count();
            json!(format!("{ready}/{total}"))
        }
        "!pod-status" => json!(pod_status(obj)),
        "!pod-restarts" => {
            let n: i64 = status["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| int(&c["restartCount"]))
                .sum();
            json!(n.to_string())
        }
        "!pod-ip" => json!(or_none(str_of(&status["podIP"]).to_owned())),
        "!pod-node" => json!(or_none(str_of(&spec["nodeName"]).to_owned())),
        "!pod-nominated-node" => json!(or_none(str_of(&status["nominatedNodeName"]).to_owned())),
        "!pod-readiness-gates" => {
            let gates = spec["readinessGates"].as_array().map_or(0, Vec::len);
            if gates == 0 {
                json!(NONE)
            } else {
                let met = spec["readinessGates"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|g| {
                        status["conditions"].as_array().is_some_and(|cs| {
                            cs.iter()
                                .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
                        })
                    })
                    .count();
                json!(format!("{met}/{gates}"))
            }
        }
        "!svc-cluster-ip" => json!(or_none(str_of(&spec["clusterIP"]).to_owned())),
        "!svc-external-ip" => json!(service_external_ip(obj)),
        "!svc-ports" => json!(or_none(service_ports(spec))),
        "!svc-selector" => json!(or_none(map_text(&spec["selector"]))),
        "!sa-secrets" => json!(spec_len(&obj["secrets"]).to_string()),
        "!endpoints" => json!(or_none(endpoints(obj))),
        _ => return None,
    })
}

fn others(name: &str, obj: &Value) -> Option<Value> {
    let spec = &obj["spec"];
    let status = &obj["status"];
    Some(match name {
        "!pvc-capacity" => json!(str_of(&status["capacity"]["storage"])),
        "!pvc-access-modes" => json!(access_modes(&status["accessModes"])),
        "!pv-capacity" => json!(str_of(&spec["capacity"]["storage"])),
        "!pv-access-modes" => json!(access_modes(&spec["accessModes"])),
        "!pv-claim" => {
            let c = &spec["claimRef"];
            json!(if c.is_object() {
                format!("{}/{}", str_of(&c["namespace"]), str_of(&c["name"]))
            } else {
                String::new()
            })
        }
        "!storage-class" => json!(or(str_of(&spec["storageClassName"]), UNSET)),
        "!volume-attributes-class" => json!(or(str_of(&spec["volumeAttributesClassName"]), UNSET)),
        "!volume-mode" => json!(or(str_of(&spec["volumeMode"]), UNSET)),
        "!node-status" => json!(node_status(obj)),
        "!node-roles" => json!(node_roles(obj)),
        "!node-internal-ip" => json!(or_none(node_address(obj, "InternalIP"))),
        "!node-external-ip" => json!(or_none(node_address(obj, "ExternalIP"))),
        "!ds-desired" => json!(int(&status["desiredNumberScheduled"])),
        "!ds-current" => json!(int(&status["currentNumberScheduled"])),
        "!ds-ready" => json!(int(&status["numberReady"])),
        "!ds-updated" => json!(int(&status["updatedNumberScheduled"])),
        "!ds-available" => json!(int(&status["numberAvailable"])),
        "!job-status" => json!(job_status(obj)),
        "!job-completions" => json!(job_completions(obj)),
        "!job-duration" => json!(job_duration(obj)),
        "!cj-timezone" => json!(or_none(str_of(&spec["timeZone"]).to_owned())),
        "!cj-active" => json!(spec_len(&status["active"])),
        "!cj-last-schedule" => match status["lastScheduleTime"].as_str() {
            Some(_) => age(&status["lastScheduleTime"]),
            None => json!(NONE),
        },
        "!hpa-reference" => {
            let r = &spec["scaleTargetRef"];
            json!(format!("{}/{}", str_of(&r["kind"]), str_of(&r["name"])))
        }
        "!hpa-targets" => json!(hpa_targets(obj)),
        "!hpa-min" => json!(int_or(&spec["minReplicas"], 1).to_string()),
        "!hpa-max" => json!(int(&spec["maxReplicas"]).to_string()),
        "!hpa-replicas" => json!(int(&status["currentReplicas"]).to_string()),
        "!ing-class" => json!(or_none(str_of(&spec["ingressClassName"]).to_owned())),
        "!ing-hosts" => json!(ingress_hosts(spec)),
        "!ing-address" => json!(load_balancer_addresses(&status["loadBalancer"]["ingress"])),
        "!ing-ports" => json!(if spec_len(&spec["tls"]) > 0 {
            "80, 443"
        } else {
            "80"
        }),
        "!netpol-pod-selector" => json!(or_none(label_selector(&spec["podSelector"]))),
        "!pdb-min-available" => json!(or(&int_or_string(&spec["minAvailable"]), "N/A")),
        "!pdb-max-unavailable" => json!(or(&int_or_string(&spec["maxUnavailable"]), "N/A")),
        "!pdb-allowed" => json!(int(&status["disruptionsAllowed"])),
        "!binding-role" => {
            let r = &obj["roleRef"];
            json!(format!("{}/{}", str_of(&r["kind"]), str_of(&r["name"])))
        }
        "!binding-users" => json!(subjects(obj, "User", false)),
        "!binding-groups" => json!(subjects(obj, "Group", false)),
        "!binding-serviceaccounts" => json!(subjects(obj, "ServiceAccount", true)),
        "!eps-ports" => json!(endpoint_slice_ports(obj)),
        "!eps-endpoints" => json!(endpoint_slice_addresses(obj)),
        _ => return None,
    })
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn int_or(v: &Value, default: i64) -> i64 {
    v.as_i64().unwrap_or(default)
}

fn int_or_string(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => String::new(),
    }
}

fn or<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() {
        default
    } else {
        s
    }
}

fn or_none(s: String) -> String {
    if s.is_empty() {
        NONE.to_owned()
    } else {
        s
    }
}

fn spec_len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

fn age(ts: &Value) -> Value {
    match ts.as_str().and_then(timeutil::parse_rfc3339) {
        Some(t) => json!(timeutil::human_duration(timeutil::now_secs() - t)),
        None => json!("<unknown>"),
    }
}

/// `k=v,k2=v2` of a string map.
fn map_text(v: &Value) -> String {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", str_of(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A label selector as text (`app=web,tier in (a,b)`).
fn label_selector(sel: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !map_text(&sel["matchLabels"]).is_empty() {
        parts.push(map_text(&sel["matchLabels"]));
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = str_of(&e["key"]);
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .map(str_of)
            .collect();
        parts.push(match str_of(&e["operator"]) {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    parts.join(",")
}

fn template_containers(obj: &Value, field: &str) -> String {
    let spec = &obj["spec"];
    let pod_spec = if spec["jobTemplate"].is_object() {
        &spec["jobTemplate"]["spec"]["template"]["spec"]
    } else {
        &spec["template"]["spec"]
    };
    pod_spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c[field].as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// A pod's status column: Terminating, a container's waiting or
/// terminated reason, or the phase.
fn pod_status(pod: &Value) -> String {
    if pod["metadata"]["deletionTimestamp"].is_string() {
        return "Terminating".into();
    }
    let status = &pod["status"];
    let mut reason = str_of(&status["reason"]).to_owned();
    if reason.is_empty() {
        reason = str_of(&status["phase"]).to_owned();
    }
    for c in status["containerStatuses"].as_array().into_iter().flatten() {
        if let Some(r) = c["state"]["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_owned();
        } else if let Some(r) = c["state"]["terminated"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_owned();
        }
    }
    reason
}

fn service_external_ip(svc: &Value) -> String {
    let spec = &svc["spec"];
    let external: Vec<&str> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(str_of)
        .collect();
    match str_of(&spec["type"]) {
        "ExternalName" => str_of(&spec["externalName"]).to_owned(),
        "LoadBalancer" => {
            let lb = load_balancer_addresses(&svc["status"]["loadBalancer"]["ingress"]);
            let mut all: Vec<String> = if lb.is_empty() { Vec::new() } else { vec![lb] };
            all.extend(external.iter().map(|s| (*s).to_owned()));
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        _ if !external.is_empty() => external.join(","),
        _ => NONE.into(),
    }
}

fn service_ports(spec: &Value) -> String {
    spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = or(str_of(&p["protocol"]), "TCP");
            match p["nodePort"].as_i64() {
                Some(n) if n > 0 => format!("{}:{n}/{proto}", int(&p["port"])),
                _ => format!("{}/{proto}", int(&p["port"])),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn load_balancer_addresses(ingress: &Value) -> String {
    ingress
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["ip"].as_str().or_else(|| i["hostname"].as_str()))
        .collect::<Vec<_>>()
        .join(",")
}

fn endpoints(ep: &Value) -> String {
    let mut out = Vec::new();
    for ss in ep["subsets"].as_array().into_iter().flatten() {
        for a in ss["addresses"].as_array().into_iter().flatten() {
            let ports: Vec<i64> = ss["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| int(&p["port"]))
                .collect();
            if ports.is_empty() {
                out.push(str_of(&a["ip"]).to_owned());
            }
            for p in ports {
                out.push(format!("{}:{p}", str_of(&a["ip"])));
            }
        }
    }
    out.join(",")
}

fn access_modes(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|m| match str_of(m) {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn node_status(node: &Value) -> String {
    let ready = node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"].clone());
    let mut s = match ready.as_ref().and_then(Value::as_str) {
        Some("True") => "Ready".to_owned(),
        Some(_) => "NotReady".to_owned(),
        None => "Unknown".to_owned(),
    };
    if node["spec"]["unschedulable"] == true {
        s.push_str(",SchedulingDisabled");
    }
    s
}

fn node_roles(node: &Value) -> String {
    let mut roles: Vec<String> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                Some(r.to_owned())
            } else if k == "kubernetes.io/role" {
                v.as_str().map(str::to_owned)
            } else {
                None
            }
        })
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort();
    or_none(roles.join(","))
}

fn node_address(node: &Value, kind: &str) -> String {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == kind)
        .map(|a| str_of(&a["address"]))
        .collect::<Vec<_>>()
        .join(",")
}

fn has_condition(obj: &Value, t: &str) -> bool {
    obj["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
}

fn job_status(job: &Value) -> &'static str {
    if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if job["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

fn job_completions(job: &Value) -> String {
    let succeeded = int(&job["status"]["succeeded"]);
    match job["spec"]["completions"].as_i64() {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let p = int_or(&job["spec"]["parallelism"], 1);
            if p > 1 {
                format!("{succeeded}/1 of {p}")
            } else {
                format!("{succeeded}/1")
            }
        }
    }
}

fn job_duration(job: &Value) -> String {
    let Some(start) = job["status"]["startTime"]
        .as_str()
        .and_then(timeutil::parse_rfc3339)
    else {
        return String::new();
    };
    let end = job["status"]["completionTime"]
        .as_str()
        .and_then(timeutil::parse_rfc3339)
        .unwrap_or_else(timeutil::now_secs);
    timeutil::human_duration(end - start)
}

fn hpa_targets(hpa: &Value) -> String {
    let metrics = hpa["spec"]["metrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if metrics.is_empty() {
        return NONE.into();
    }
    metrics
        .iter()
        .map(|m| {
            let res = &m["resource"];
            let target = &res["target"];
            let want = match target["averageUtilization"].as_i64() {
                Some(u) => format!("{u}%"),
                None => int_or_string(&target["averageValue"]),
            };
            format!(
                "{}: <unknown>/{want}",
                or(str_of(&res["name"]), str_of(&m["type"]))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ingress_hosts(spec: &Value) -> String {
    let hosts: Vec<&str> = spec["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| or(str_of(&r["host"]), "*"))
        .collect();
    if hosts.is_empty() {
        "*".into()
    } else {
        hosts.join(",")
    }
}

fn subjects(binding: &Value, kind: &str, namespaced: bool) -> String {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["kind"] == kind)
        .map(|s| {
            if namespaced {
                format!("{}/{}", str_of(&s["namespace"]), str_of(&s["name"]))
            } else {
                str_of(&s["name"]).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn endpoint_slice_ports(eps: &Value) -> String {
    let ports: Vec<String> = eps["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["port"].as_i64().map(|n| n.to_string()))
        .collect();
    if ports.is_empty() {
        UNSET.into()
    } else {
        ports.join(",")
    }
}

fn endpoint_slice_addresses(eps: &Value) -> String {
    let addrs: Vec<&str> = eps["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["addresses"].as_array().into_iter().flatten().map(str_of))
        .collect();
    if addrs.is_empty() {
        UNSET.into()
    } else {
        addrs.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_and_service_cells() {
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "node-0"},
            "status": {"phase": "Running", "podIP": "10.244.0.3", "containerStatuses": [{"ready": true, "restartCount": 1}, {"ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(cell("!pod-ready", &pod), Some(json!("1/2")));
        assert_eq!(cell("!pod-status", &pod), Some(json!("CrashLoopBackOff")));
        assert_eq!(cell("!pod-restarts", &pod), Some(json!("3")));
        assert_eq!(cell("!pod-nominated-node", &pod), Some(json!("<none>")));
        let svc = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.9", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}], "selector": {"app": "web"}}});
        assert_eq!(cell("!svc-ports", &svc), Some(json!("80:30080/TCP,53/UDP")));
        assert_eq!(cell("!svc-external-ip", &svc), Some(json!("<none>")));
        assert_eq!(cell("!svc-selector", &svc), Some(json!("app=web")));
        let lb = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(cell("!svc-external-ip", &lb), Some(json!("<pending>")));
        assert_eq!(cell("!no-such-cell", &lb), None);
    }

    #[test]
    fn workload_and_other_cells() {
        let job = json!({"spec": {"completions": 3}, "status": {"succeeded": 3, "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(cell("!job-status", &job), Some(json!("Complete")));
        assert_eq!(cell("!job-completions", &job), Some(json!("3/3")));
        let sel = json!({"spec": {"selector": {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]}]}}});
        assert_eq!(cell("!selector", &sel), Some(json!("app=a,t in (x,y)")));
        let node = json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(cell("!node-status", &node), Some(json!("Ready")));
        assert_eq!(cell("!node-roles", &node), Some(json!("control-plane")));
        let rb = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "ServiceAccount", "name": "s", "namespace": "d"}]});
        assert_eq!(cell("!binding-role", &rb), Some(json!("ClusterRole/view")));
        assert_eq!(cell("!binding-serviceaccounts", &rb), Some(json!("d/s")));
        let pvc = json!({"spec": {}, "status": {"accessModes": ["ReadWriteOnce"]}});
        assert_eq!(cell("!pvc-access-modes", &pvc), Some(json!("RWO")));
        assert_eq!(cell("!storage-class", &pvc), Some(json!("<unset>")));
        let hpa = json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}});
        assert_eq!(
            cell("!hpa-targets", &hpa),
            Some(json!("cpu: <unknown>/80%"))
        );
        assert_eq!(cell("!hpa-reference", &hpa), Some(json!("Deployment/web")));
    }
}
