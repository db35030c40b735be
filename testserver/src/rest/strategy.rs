//! Per-resource rules applied before a write, as kube's registry
//! strategies do: system metadata, status handling, generation, pruning
//! by schema (the built-in kinds' and custom resources'), the hooks into
//! the kinds' own defaults and validation (`crate::kinds`).

use crate::meta;
use crate::resource::{Behavior, ResourceInfo};
use crate::schema;
use crate::status::{FieldError, StatusError};
use crate::timeutil;
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
    if info.group == crate::admission::GROUP {
        crate::admission::default_configuration(info, obj);
    }
    crate::kinds::default_object(info, obj)
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
    if info.group == crate::admission::GROUP {
        errs.extend(crate::admission::validate_configuration(info, obj));
    }
    crate::kinds::validate(info, obj, old, errs);
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

/// Drops the unknown fields of a built-in kind (a typed decode in
/// kube-apiserver drops them) by its structural schema, and unknown
/// `metadata` fields; returns their paths. Kinds without a schema (a raw
/// [`ResourceInfo`] a test registered) are stored as given.
pub(crate) fn prune_builtin(info: &ResourceInfo, obj: &mut Value) -> Vec<String> {
    if info.behavior == Behavior::CustomResource {
        return Vec::new();
    }
    let Some(schema) = crate::builtin::schemas::structural(info) else {
        return Vec::new();
    };
    let mut unknown = Vec::new();
    schema::prune(schema, obj, "", &mut unknown);
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.retain(|k, _| {
            let known = OBJECT_META_FIELDS.contains(&k.as_str());
            if !known {
                unknown.push(format!("metadata.{k}"));
            }
            known
        });
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
