//! Services: kube's defaults (`type`, `sessionAffinity`, ports'
//! `protocol` and `targetPort`, traffic policies), the allocated values an
//! update keeps when the request leaves them out (as kube-apiserver's
//! service REST does), and validation. The allocation itself is
//! `ipam`'s, done by the REST layer under the Service's write lock.

use super::json::{default, each_item, object_at, str_of};
use crate::status::FieldError;
use serde_json::{json, Value};

/// `SetDefaults_Service`, and the empty load-balancer status.
pub(crate) fn default_service(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let cfg = crate::meta::ensure_object(
                spec.entry("sessionAffinityConfig").or_insert(Value::Null),
            );
            let client = crate::meta::ensure_object(cfg.entry("clientIP").or_insert(Value::Null));
            default(client, "timeoutSeconds", json!(10800));
        }
        _ => {}
    }
    each_item(spec, "ports", |p| {
        default(p, "protocol", json!("TCP"));
        let unset = match p.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        };
        if unset {
            if let Some(port) = p.get("port").cloned() {
                p.insert("targetPort".into(), port);
            }
        }
    });
    let t = str_of(spec, "type").to_owned();
    if t == "NodePort" || t == "LoadBalancer" {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if t != "ExternalName" {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if t == "LoadBalancer" {
        default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    let status = object_at(obj, &["status"]);
    default(status, "loadBalancer", json!({}));
}

/// Keeps the cluster IPs and node ports the stored Service holds when the
/// update leaves them out.
pub(crate) fn keep_allocated(old: &Value, new: &mut Value) {
    let spec = object_at(new, &["spec"]);
    let old_spec = &old["spec"];
    if str_of(spec, "clusterIP").is_empty() {
        for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if let Some(v) = old_spec.get(f) {
                spec.entry(f).or_insert(v.clone());
            }
        }
    }
    let old_ports = old_spec["ports"].as_array().cloned().unwrap_or_default();
    each_item(spec, "ports", |p| {
        if p.get("nodePort").is_some_and(|n| !n.is_null()) {
            return;
        }
        let same = old_ports.iter().find(|o| {
            o["port"] == p["port"]
                && o.get("protocol").unwrap_or(&json!("TCP"))
                    == p.get("protocol").unwrap_or(&json!("TCP"))
        });
        if let Some(n) = same.and_then(|o| o.get("nodePort")) {
            p.insert("nodePort".into(), n.clone());
        }
    });
    if let Some(h) = old_spec.get("healthCheckNodePort") {
        spec.entry("healthCheckNodePort").or_insert(h.clone());
    }
}

const TYPES: [&str; 4] = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

/// Validation of a Service.
pub(crate) fn validate_service(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = &obj["spec"];
    let t = spec["type"].as_str().unwrap_or("");
    if !TYPES.contains(&t) {
        let supported: Vec<String> = TYPES.iter().map(|s| (*s).to_owned()).collect();
        errs.push(FieldError::not_supported("spec.type", json!(t), &supported));
    }
    let ports = spec["ports"].as_array().cloned().unwrap_or_default();
    if t == "ExternalName" {
        if spec["externalName"].as_str().unwrap_or("").is_empty() {
            errs.push(FieldError::required("spec.externalName", ""));
        }
    } else if ports.is_empty() && spec["clusterIP"] != "None" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let at = format!("spec.ports[{i}]");
        let port = p["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&port) {
            errs.push(FieldError::invalid(
                format!("{at}.port"),
                p["port"].clone(),
                "must be between 1 and 65535, inclusive",
            ));
        }
        let proto = p["protocol"].as_str().unwrap_or("");
        if !PROTOCOLS.contains(&proto) {
            let supported: Vec<String> = PROTOCOLS.iter().map(|s| (*s).to_owned()).collect();
            errs.push(FieldError::not_supported(
                format!("{at}.protocol"),
                json!(proto),
                &supported,
            ));
        }
        let name = p["name"].as_str().unwrap_or("");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), ""));
        }
        if !name.is_empty() && names.contains(&name) {
            let mut e = FieldError::invalid(format!("{at}.name"), json!(name), "");
            e.kind = crate::status::FieldErrorKind::Duplicate;
            errs.push(e);
        }
        names.push(name);
    }
    if let Some(old) = old {
        let (was, now) = (&old["spec"]["clusterIP"], &spec["clusterIP"]);
        let was_set = was.as_str().is_some_and(|s| !s.is_empty());
        if was_set && t != "ExternalName" && old["spec"]["type"] != "ExternalName" && was != now {
            errs.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                now.clone(),
                "may not change once set",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_kept_allocations() {
        let mut s = json!({"spec": {"ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"}], "selector": {"app": "a"}}});
        default_service(&mut s);
        assert_eq!(s["spec"]["type"], "ClusterIP");
        assert_eq!(s["spec"]["sessionAffinity"], "None");
        assert_eq!(s["spec"]["internalTrafficPolicy"], "Cluster");
        assert_eq!(s["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(s["spec"]["ports"][1]["targetPort"], "dns");
        assert_eq!(s["status"], json!({"loadBalancer": {}}));
        let mut old = s.clone();
        old["spec"]["clusterIP"] = json!("10.96.3.4");
        old["spec"]["clusterIPs"] = json!(["10.96.3.4"]);
        keep_allocated(&old, &mut s);
        assert_eq!(s["spec"]["clusterIP"], "10.96.3.4");
        let mut errs = Vec::new();
        validate_service(&s, Some(&old), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        s["spec"]["clusterIP"] = json!("10.96.3.5");
        validate_service(&s, Some(&old), &mut errs);
        assert_eq!(errs.len(), 1);
        let mut errs = Vec::new();
        validate_service(
            &json!({"spec": {"type": "ClusterIP", "ports": [{"port": 0, "protocol": "TCP"}]}}),
            None,
            &mut errs,
        );
        assert_eq!(
            errs.first().map(ToString::to_string).as_deref(),
            Some("spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive")
        );
    }
}
