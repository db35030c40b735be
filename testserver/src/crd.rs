//! CustomResourceDefinitions: validation as apiextensions-apiserver does
//! it (names, scope, versions, schemas, the `*.k8s.io` approval rule), the
//! status the server writes (accepted names, conditions), and the resource
//! versions a CRD serves.

use crate::meta;
use crate::resource::{Behavior, PrinterColumn, ResourceInfo, ScaleSubresource};
use crate::status::FieldError;
use crate::timeutil;
use serde_json::{json, Value};
use std::sync::Arc;

/// The approval annotation protected groups need.
pub(crate) const APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";

/// The finalizer kube adds while it removes a CRD's objects.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// `k8s.io`, `kubernetes.io` and their subdomains need approval.
pub(crate) fn is_protected_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

fn approval_error(obj: &Value, old: Option<&Value>) -> Option<FieldError> {
    let field = format!("metadata.annotations[{APPROVAL_ANNOTATION}]");
    let value = meta::annotations(obj)
        .get(APPROVAL_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    if let Some(old) = old {
        let before = meta::annotations(old)
            .get(APPROVAL_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        if before == value {
            return None;
        }
    }
    let see = "see https://github.com/kubernetes/enhancements/pull/1111";
    if value.is_empty() {
        return Some(FieldError::required(
            field,
            format!(
                "protected groups must have approval annotation \"{APPROVAL_ANNOTATION}\", {see}"
            ),
        ));
    }
    let is_url = value.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            && !rest.is_empty()
    });
    if value.starts_with("unapproved") || is_url {
        return None;
    }
    Some(FieldError::invalid(
        field,
        json!(value),
        format!(
            "protected groups must have approval annotation \"{APPROVAL_ANNOTATION}\" with either a URL or a reason starting with \"unapproved\", {see}"
        ),
    ))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(n) => cur = n,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

/// Fills `listKind` and `singular` like kube's defaulting.
pub(crate) fn default_crd(obj: &mut Value) {
    let kind = str_at(obj, &["spec", "names", "kind"]).to_owned();
    let names = meta::ensure_object(
        meta::ensure_object(
            meta::ensure_object(obj)
                .entry("spec")
                .or_insert(Value::Null),
        )
        .entry("names")
        .or_insert(Value::Null),
    );
    if !kind.is_empty() {
        names
            .entry("listKind")
            .or_insert(json!(format!("{kind}List")));
        names
            .entry("singular")
            .or_insert(json!(kind.to_ascii_lowercase()));
    }
    if let Some(Value::Array(versions)) = obj.get_mut("spec").and_then(|s| s.get_mut("versions")) {
        for v in versions {
            if let Some(m) = v.as_object_mut() {
                m.entry("served").or_insert(json!(true));
                m.entry("storage").or_insert(json!(false));
            }
        }
    }
    let spec = meta::ensure_object(
        meta::ensure_object(obj)
            .entry("spec")
            .or_insert(Value::Null),
    );
    spec.entry("conversion")
        .or_insert(json!({"strategy": "None"}));
}

/// Validates a CRD (create when `old` is `None`).
pub(crate) fn validate_crd(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let group = str_at(obj, &["spec", "group"]);
    let plural = str_at(obj, &["spec", "names", "plural"]);
    let kind = str_at(obj, &["spec", "names", "kind"]);
    let name = meta::name(obj);
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid(
            "spec.group",
            json!(group),
            "should be a domain with at least one dot",
        ));
    } else if !meta::is_dns1123_subdomain(group) {
        errs.push(meta::subdomain_error("spec.group", group));
    }
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    } else if !meta::is_dns1123_label(plural) {
        errs.push(meta::label_error("spec.names.plural", plural));
    }
    if kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    match str_at(obj, &["spec", "scope"]) {
        "Namespaced" | "Cluster" => {}
        "" => errs.push(FieldError::required("spec.scope", "")),
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            json!(other),
            &["Cluster".into(), "Namespaced".into()],
        )),
    }
    validate_versions(obj, &mut errs);
    errs.extend(crate::admission::validate_crd_conversion(obj));
    if let Some(old) = old {
        for (path, label) in [
            (["spec", "group"], "spec.group"),
            (["spec", "scope"], "spec.scope"),
        ] {
            if str_at(old, &path) != str_at(obj, &path) {
                errs.push(FieldError::invalid(
                    label,
                    json!(str_at(obj, &path)),
                    "field is immutable",
                ));
            }
        }
    }
    if is_protected_group(group) {
        if let Some(e) = approval_error(obj, old) {
            errs.push(e);
        }
    }
    errs
}

fn validate_versions(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(versions) = obj["spec"]["versions"].as_array().filter(|v| !v.is_empty()) else {
        errs.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return;
    };
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions.clone()),
            "must have exactly one version marked as storage version",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let name = v["name"].as_str().unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("spec.versions[{i}].name"), ""));
        } else if !meta::is_dns1123_label(name) {
            errs.push(meta::label_error(&format!("spec.versions[{i}].name"), name));
        }
        if !v["schema"]["openAPIV3Schema"].is_object() {
            errs.push(FieldError::required(
                format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "schemas are required",
            ));
        } else if let Some(t) = v["schema"]["openAPIV3Schema"]["type"].as_str() {
            if t != "object" {
                errs.push(FieldError::invalid(
                    format!("spec.versions[{i}].schema.openAPIV3Schema.type"),
                    json!(t),
                    "must be object at the root",
                ));
            }
        }
    }
    if !versions
        .iter()
        .any(|v| v["served"].as_bool() != Some(false))
    {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions.clone()),
            "must have at least one served version",
        ));
    }
}

/// Writes the status a healthy CRD gets: accepted names and the
/// NamesAccepted / Established (and approval) conditions.
pub(crate) fn establish(obj: &mut Value) {
    let now = timeutil::now_rfc3339();
    let names = obj["spec"]["names"].clone();
    let stored: Vec<Value> = obj["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    let mut conditions = vec![
        json!({"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"}),
        json!({"type": "Established", "status": "True", "lastTransitionTime": now, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}),
    ];
    let group = str_at(obj, &["spec", "group"]).to_owned();
    if is_protected_group(&group) {
        let value = meta::annotations(obj)
            .get(APPROVAL_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        let (status, reason, message) = if value.starts_with("unapproved") {
            (
                "False",
                "ApprovalBypassed",
                format!("not approved: {value:?}"),
            )
        } else {
            ("True", "ApprovedAnnotation", format!("approved in {value}"))
        };
        conditions.push(
            json!({"type": "KubernetesAPIApprovalPolicyConformant", "status": status,
            "lastTransitionTime": now, "reason": reason, "message": message}),
        );
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert(
            "status".into(),
            json!({"acceptedNames": names, "conditions": conditions, "storedVersions": stored}),
        );
    }
}

fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    version["additionalPrinterColumns"]
        .as_array()
        .map(|cols| {
            cols.iter()
                .filter_map(|c| {
                    let name = c["name"].as_str()?;
                    let path = c["jsonPath"].as_str()?;
                    Some(PrinterColumn {
                        name: name.into(),
                        type_: c["type"].as_str().unwrap_or("string").into(),
                        json_path: path.into(),
                        description: c["description"].as_str().unwrap_or("").into(),
                        priority: c["priority"].as_i64().unwrap_or(0),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn reversed_group(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

/// A version's `subresources.scale`, if it has one.
fn scale_subresource(v: &Value) -> Option<ScaleSubresource> {
    let path = |k: &str| v[k].as_str().map(str::to_owned);
    Some(ScaleSubresource {
        spec_replicas_path: path("specReplicasPath")?,
        status_replicas_path: path("statusReplicasPath")?,
        label_selector_path: path("labelSelectorPath"),
    })
}

/// The resource versions a (valid) CRD serves.
pub(crate) fn resource_infos(crd: &Value) -> Vec<ResourceInfo> {
    let group = str_at(crd, &["spec", "group"]).to_owned();
    let names = &crd["spec"]["names"];
    let kind = names["kind"].as_str().unwrap_or("").to_owned();
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .and_then(|v| v["name"].as_str())
        .unwrap_or("")
        .to_owned();
    versions
        .iter()
        .filter(|v| v["served"].as_bool() != Some(false))
        .map(|v| {
            let version = v["name"].as_str().unwrap_or("").to_owned();
            let schema = v["schema"]["openAPIV3Schema"].clone();
            let selectable = v["selectableFields"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|f| {
                            f["jsonPath"]
                                .as_str()
                                .map(|p| p.trim_start_matches('.').to_owned())
                        })
                        .collect()
                })
                .unwrap_or_default();
            ResourceInfo {
                group: group.clone(),
                version: version.clone(),
                resource: names["plural"].as_str().unwrap_or("").into(),
                singular: names["singular"]
                    .as_str()
                    .map_or_else(|| kind.to_ascii_lowercase(), str::to_owned),
                kind: kind.clone(),
                list_kind: names["listKind"]
                    .as_str()
                    .map_or_else(|| format!("{kind}List"), str::to_owned),
                namespaced: crd["spec"]["scope"].as_str() == Some("Namespaced"),
                short_names: strs(&names["shortNames"]),
                categories: strs(&names["categories"]),
                status_subresource: v["subresources"]["status"].is_object(),
                tracks_generation: true,
                allow_create_on_update: false,
                return_deleted_object: false,
                storage_version: storage_version.clone(),
                validate_schema: schema.is_object(),
                schema: schema.is_object().then(|| Arc::new(schema)),
                printer_columns: printer_columns(v),
                selectable_fields: selectable,
                behavior: Behavior::CustomResource,
                openapi_name: format!("{}.{}.{}", reversed_group(&group), version, kind),
                crd_name: Some(meta::name(crd).to_owned()),
                scale: scale_subresource(&v["subresources"]["scale"]),
                openapi_schema: None,
                structural: Arc::default(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn foo_crd(annotation: Option<&str>) -> Value {
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "foos.samplecontroller.k8s.io"},
            "spec": {"group": "samplecontroller.k8s.io", "scope": "Namespaced",
                "names": {"kind": "Foo", "plural": "foos"},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}
        });
        if let Some(a) = annotation {
            crd["metadata"]["annotations"] = json!({APPROVAL_ANNOTATION: a});
        }
        crd
    }

    #[test]
    fn protected_groups_need_approval() {
        let errs = validate_crd(&foo_crd(None), None);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs.first().map(ToString::to_string).unwrap_or_default(),
            "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
        );
        assert!(validate_crd(&foo_crd(Some("unapproved, testing")), None).is_empty());
        assert!(validate_crd(
            &foo_crd(Some("https://github.com/kubernetes/kubernetes/pull/1")),
            None
        )
        .is_empty());
        assert_eq!(validate_crd(&foo_crd(Some("bad value")), None).len(), 1);
    }

    #[test]
    fn builds_served_versions() {
        let mut crd = foo_crd(Some("unapproved"));
        default_crd(&mut crd);
        let infos = resource_infos(&crd);
        assert_eq!(infos.len(), 1);
        let foo = infos.first().cloned();
        assert_eq!(foo.as_ref().map(|f| f.list_kind.as_str()), Some("FooList"));
        assert_eq!(foo.as_ref().map(|f| f.status_subresource), Some(true));
        assert_eq!(
            foo.as_ref().map(|f| f.openapi_name.as_str()),
            Some("io.k8s.samplecontroller.v1alpha1.Foo")
        );
        let mut bad = crd.clone();
        bad["metadata"]["name"] = json!("wrong");
        bad["spec"]["scope"] = json!("Everywhere");
        let msgs: Vec<String> = validate_crd(&bad, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(msgs
            .iter()
            .any(|m| m.contains("must be spec.names.plural+\".\"+spec.group")));
        assert!(msgs
            .iter()
            .any(|m| m.starts_with("spec.scope: Unsupported value: \"Everywhere\"")));
    }
}
