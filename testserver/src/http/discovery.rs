//! Legacy discovery documents: `/api`, `/apis`, `/apis/<group>`,
//! `/api/v1` and `/apis/<group>/<version>`, as kube-apiserver writes them.

use crate::registry::Registry;
use crate::resource::ResourceInfo;
use serde_json::{json, Value};
use std::hash::{Hash, Hasher};

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// `/api`.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": gv(name, v), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

/// `/apis`.
pub(crate) fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|g| !g.name.is_empty())
        .map(|g| group_json(&g.name, &g.versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if the group is served.
pub(crate) fn group(registry: &Registry, name: &str) -> Option<Value> {
    let g = registry
        .groups()
        .into_iter()
        .find(|g| g.name == name && !name.is_empty())?;
    let mut v = group_json(&g.name, &g.versions);
    let m = v.as_object_mut()?;
    m.insert("kind".into(), json!("APIGroup"));
    m.insert("apiVersion".into(), json!("v1"));
    Some(v)
}

fn storage_version_hash(info: &ResourceInfo) -> String {
    use base64::Engine;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&info.group, &info.storage_version, &info.kind).hash(&mut h);
    base64::engine::general_purpose::STANDARD
        .encode(h.finish().to_be_bytes())
        .chars()
        .take(11)
        .collect()
}

fn resource_json(info: &ResourceInfo) -> Value {
    let mut r = json!({
        "name": info.resource,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": VERBS,
        "storageVersionHash": storage_version_hash(info),
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = json!(info.categories);
    }
    r
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub(crate) fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut infos = registry.resources_in(group, version);
    if infos.is_empty() {
        return None;
    }
    infos.sort_by(|a, b| a.resource.cmp(&b.resource));
    let mut resources = Vec::new();
    for info in &infos {
        resources.push(resource_json(info));
        if info.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", info.resource),
                "singularName": "",
                "namespaced": info.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if info.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", info.resource),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv(group, version), "resources": resources}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_builtin_groups_and_resources() {
        let r = Registry::default();
        r.register_shared(crate::builtin::all());
        let g = groups(&r);
        let names: Vec<&str> = g["groups"]
            .as_array()
            .map(|a| a.iter().filter_map(|g| g["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            names,
            [
                "apps",
                "events.k8s.io",
                "autoscaling",
                "batch",
                "networking.k8s.io",
                "policy",
                "rbac.authorization.k8s.io",
                "apiextensions.k8s.io",
                "coordination.k8s.io",
                "discovery.k8s.io"
            ]
        );
        let core = resource_list(&r, "", "v1").unwrap_or_default();
        let cm = core["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["name"] == "configmaps"))
            .cloned();
        assert_eq!(cm.map(|c| c["shortNames"].clone()), Some(json!(["cm"])));
        let apps = resource_list(&r, "apps", "v1").unwrap_or_default();
        assert!(apps["resources"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["name"] == "deployments/status")));
        assert!(apps["resources"].as_array().is_some_and(|a| a
            .iter()
            .any(|x| x["name"] == "deployments/scale" && x["kind"] == "Scale")));
        assert!(resource_list(&r, "apps", "v2").is_none());
        assert_eq!(
            group(&r, "apps").map(|g| g["preferredVersion"]["groupVersion"].clone()),
            Some(json!("apps/v1"))
        );
    }
}

/// The aggregated-discovery version a request's `Accept` asks for
/// (`apidiscovery.k8s.io` v2 or v2beta1), if any.
pub(crate) fn aggregated_version(accept: Option<&str>) -> Option<&'static str> {
    for media in accept?.split(',') {
        let params: Vec<(&str, &str)> = media
            .split(';')
            .skip(1)
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let has = |k: &str, v: &str| params.iter().any(|(pk, pv)| *pk == k && *pv == v);
        if has("g", "apidiscovery.k8s.io") && has("as", "APIGroupDiscoveryList") {
            if has("v", "v2") {
                return Some("v2");
            }
            if has("v", "v2beta1") {
                return Some("v2beta1");
            }
        }
        // an earlier plain media type wins over later aggregated ones
        if params.is_empty() {
            return None;
        }
    }
    None
}

fn aggregated_resource(info: &ResourceInfo) -> Value {
    let kind = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let mut r = json!({
        "resource": info.resource,
        "responseKind": kind,
        "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": info.singular,
        "verbs": VERBS,
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = json!(info.categories);
    }
    let mut subresources = Vec::new();
    if info.status_subresource {
        subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
    }
    if info.scale.is_some() {
        subresources.push(json!({"subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"]}));
    }
    if !subresources.is_empty() {
        r["subresources"] = Value::Array(subresources);
    }
    r
}

/// `/api` or `/apis` as an `APIGroupDiscoveryList` (aggregated discovery).
pub(crate) fn aggregated(registry: &Registry, core: bool, version: &str) -> Value {
    let items: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|g| g.name.is_empty() == core)
        .map(|g| {
            let versions: Vec<Value> = g
                .versions
                .iter()
                .map(|v| {
                    let mut infos = registry.resources_in(&g.name, v);
                    infos.sort_by(|a, b| a.resource.cmp(&b.resource));
                    let resources: Vec<Value> =
                        infos.iter().map(|i| aggregated_resource(i)).collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g.name, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items})
}

#[cfg(test)]
mod aggregated_tests {
    use super::*;

    #[test]
    fn aggregated_discovery_when_asked_first() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_version(Some(kubectl)), Some("v2"));
        assert_eq!(aggregated_version(Some("application/json")), None);
        assert_eq!(aggregated_version(None), None);
        let r = Registry::default();
        r.register_shared(crate::builtin::all());
        let apis = aggregated(&r, false, "v2");
        let apps = apis["items"]
            .as_array()
            .and_then(|i| i.iter().find(|g| g["metadata"]["name"] == "apps"))
            .cloned()
            .unwrap_or_default();
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["resource"] == "deployments"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(deployments["subresources"][0]["subresource"], "status");
        assert_eq!(deployments["subresources"][1]["subresource"], "scale");
        let core = aggregated(&r, true, "v2");
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        assert_eq!(core["items"].as_array().map(Vec::len), Some(1));
    }
}
