//! Per-resource rules applied before a write, as kube's registry
//! strategies do: system metadata, status handling, generation, defaults
//! and validation of the built-in kinds, schema handling of custom
//! resources.

use crate::meta;
use crate::resource::{Behavior, ResourceInfo};
use crate::schema;
use crate::status::{FieldError, StatusError};
use crate::timeutil;
use base64::Engine;
use serde_json::{json, Map, Value};

/// How unknown fields are reported (`fieldValidation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    /// Drop silently.
    Ignore,
    /// Drop and answer a `Warning` header (kube's default).
    #[default]
    Warn,
    /// Reject with 400.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter (case as kube spells it).
    pub(crate) fn parse(s: Option<&str>) -> Result<Self, StatusError> {
        match s {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(StatusError::bad_request(format!(
                "fieldValidation must be one of: Ignore, Warn, Strict (got {other:?})"
            ))),
        }
    }
}

/// The object minus metadata and status: what a spec change is.
fn spec_part(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether anything but metadata and status differs.
pub(crate) fn spec_changed(old: &Value, new: &Value) -> bool {
    spec_part(old) != spec_part(new)
}

/// Sets the fields kube fills in on create.
pub(crate) fn fill_create_metadata(info: &ResourceInfo, obj: &mut Value) {
    let m = meta::metadata_mut(obj);
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(timeutil::now_rfc3339()));
    for f in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        m.remove(f);
    }
    if info.tracks_generation {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
}

/// Copies the metadata an update may not change from the old object.
pub(crate) fn keep_system_metadata(old: &Value, new: &mut Value) {
    let keep = [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
    ];
    let old_meta = meta::metadata(old);
    let m = meta::metadata_mut(new);
    for f in keep {
        match old_meta.and_then(|o| o.get(f)) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("selfLink");
}

/// Defaults applied on every write of a resource kind.
pub(crate) fn default_object(info: &ResourceInfo, obj: &mut Value) -> Result<(), StatusError> {
    match info.behavior {
        Behavior::Deployment => default_deployment(obj),
        Behavior::Plain if info.group == crate::admission::GROUP => {
            crate::admission::default_configuration(info, obj);
        }
        Behavior::Plain if info.resource == "secrets" && info.group.is_empty() => {
            default_secret(obj)?
        }
        Behavior::Namespace => {
            let spec = meta::ensure_object(
                meta::ensure_object(obj)
                    .entry("spec")
                    .or_insert(Value::Null),
            );
            if !spec.contains_key("finalizers") {
                spec.insert("finalizers".into(), json!(["kubernetes"]));
            }
            let labels = meta::ensure_object(
                meta::metadata_mut(obj)
                    .entry("labels")
                    .or_insert(Value::Null),
            );
            let name = labels.get("kubernetes.io/metadata.name").cloned();
            if name.is_none() {
                let n = meta::name(obj).to_owned();
                let labels = meta::ensure_object(
                    meta::metadata_mut(obj)
                        .entry("labels")
                        .or_insert(Value::Null),
                );
                labels.insert("kubernetes.io/metadata.name".into(), json!(n));
            }
        }
        _ => {}
    }
    Ok(())
}

fn default_deployment(obj: &mut Value) {
    let spec = meta::ensure_object(
        meta::ensure_object(obj)
            .entry("spec")
            .or_insert(Value::Null),
    );
    spec.entry("replicas").or_insert(json!(1));
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    spec.entry("progressDeadlineSeconds").or_insert(json!(600));
    // as kube-apiserver: a strategy without a type (`{}`, which protobuf
    // clients send for an unset strategy) is a rolling update of 25 %/25 %
    let strategy = meta::ensure_object(spec.entry("strategy").or_insert(Value::Null));
    strategy.entry("type").or_insert(json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        let ru = meta::ensure_object(strategy.entry("rollingUpdate").or_insert(Value::Null));
        ru.entry("maxUnavailable").or_insert(json!("25%"));
        ru.entry("maxSurge").or_insert(json!("25%"));
    }
}

fn default_secret(obj: &mut Value) -> Result<(), StatusError> {
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

/// Validation of the object's name.
pub(crate) fn validate_name(info: &ResourceInfo, name: &str, errs: &mut Vec<FieldError>) {
    match info.behavior {
        Behavior::Namespace => {
            if !meta::is_dns1123_label(name) {
                errs.push(meta::label_error("metadata.name", name));
            }
        }
        Behavior::CustomResourceDefinition => {}
        _ => {
            if !meta::is_dns1123_subdomain(name) {
                errs.push(meta::subdomain_error("metadata.name", name));
            }
        }
    }
}

/// Validation of a kind's fields (beyond schemas).
pub(crate) fn validate_kind(
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    if info.behavior == Behavior::Deployment {
        validate_deployment(obj, old, errs);
    }
    if info.group == crate::admission::GROUP {
        errs.extend(crate::admission::validate_configuration(info, obj));
    }
    if info.resource == "configmaps" && info.group.is_empty() {
        for field in ["data", "binaryData"] {
            if let Some(v) = obj.get(field).filter(|v| !v.is_null() && !v.is_object()) {
                errs.push(FieldError::invalid(field, v.clone(), "must be an object"));
            }
        }
    }
}

fn validate_deployment(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let selector = &obj["spec"]["selector"];
    if !selector.is_object() {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        let template_labels = &obj["spec"]["template"]["metadata"]["labels"];
        if let Some(ml) = selector.get("matchLabels").and_then(Value::as_object) {
            let ok = ml.iter().all(|(k, v)| template_labels.get(k) == Some(v));
            if !ok {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    template_labels.clone(),
                    "`selector` does not match template `labels`",
                ));
            }
        }
        if let Some(old) = old {
            let old_sel = &old["spec"]["selector"];
            if old_sel.is_object() && old_sel != selector {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    selector.clone(),
                    "field is immutable",
                ));
            }
        }
    }
    if let Some(r) = obj["spec"].get("replicas") {
        if r.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid(
                "spec.replicas",
                r.clone(),
                "must be greater than or equal to 0",
            ));
        }
    }
    if obj["spec"]["template"]["spec"]["containers"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        errs.push(FieldError::required("spec.template.spec.containers", ""));
    }
}

const OBJECT_META_FIELDS: &[&str] = &[
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// Top-level fields of the built-in kinds (besides apiVersion, kind, metadata).
fn builtin_fields(info: &ResourceInfo) -> Option<&'static [&'static str]> {
    let fields: &[&str] = match (info.group.as_str(), info.resource.as_str()) {
        ("", "configmaps") => &["data", "binaryData", "immutable"],
        ("", "secrets") => &["data", "stringData", "type", "immutable"],
        ("", "namespaces")
        | ("apps", "deployments")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => &["spec", "status"],
        ("coordination.k8s.io", "leases") => &["spec"],
        ("", "events") => &[
            "action",
            "count",
            "eventTime",
            "firstTimestamp",
            "involvedObject",
            "lastTimestamp",
            "message",
            "reason",
            "related",
            "reportingComponent",
            "reportingInstance",
            "series",
            "source",
            "type",
        ],
        _ => return None,
    };
    Some(fields)
}

/// Drops the unknown top-level and metadata fields of a built-in kind (a
/// typed decode in kube-apiserver drops them); returns their paths.
pub(crate) fn prune_builtin(info: &ResourceInfo, obj: &mut Value) -> Vec<String> {
    let Some(fields) = builtin_fields(info) else {
        return Vec::new();
    };
    let mut unknown = Vec::new();
    if let Some(m) = obj.as_object_mut() {
        m.retain(|k, _| {
            let known = matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                || fields.contains(&k.as_str());
            if !known {
                unknown.push(k.clone());
            }
            known
        });
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            meta.retain(|k, _| {
                let known = OBJECT_META_FIELDS.contains(&k.as_str());
                if !known {
                    unknown.push(format!("metadata.{k}"));
                }
                known
            });
        }
    }
    unknown
}

/// Outcome of running a custom resource through its schema.
pub(crate) struct SchemaOutcome {
    /// Unknown fields that were dropped.
    pub unknown: Vec<String>,
}

/// Prunes unknown fields; defaults and validates a custom resource
/// against its schema.
pub(crate) fn apply_schema(
    info: &ResourceInfo,
    obj: &mut Value,
    errs: &mut Vec<FieldError>,
) -> SchemaOutcome {
    let mut unknown = prune_builtin(info, obj);
    if let (Some(schema), true) = (&info.schema, info.validate_schema) {
        schema::prune(schema, obj, "", &mut unknown);
        schema::apply_defaults(schema, obj);
        schema::validate(schema, obj, "", errs);
    }
    SchemaOutcome { unknown }
}
