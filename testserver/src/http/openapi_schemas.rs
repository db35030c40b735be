//! OpenAPI component schemas beyond the built-in kinds' own (those come
//! from `builtin::schemas`): the list schema of a kind, a custom
//! resource's schema wrapped as a kind, the request and status types
//! every document refers to.

use serde_json::{json, Map, Value};

fn r(name: &str) -> Value {
    json!({"allOf": [{"$ref": format!("#/components/schemas/{name}")}], "default": {}})
}

fn s(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// The list schema of a kind.
pub(crate) fn list_schema(item_ref: &str, group: &str, version: &str, list_kind: &str) -> Value {
    json!({
        "description": format!("{list_kind} is a list of objects."),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": s("APIVersion defines the versioned schema of this representation of an object."),
            "items": {"type": "array", "items": {"default": {}, "allOf": [{"$ref": format!("#/components/schemas/{item_ref}")}]}, "description": "List of objects."},
            "kind": s("Kind is a string value representing the REST resource this object represents."),
            "metadata": r(LIST_META)
        },
        "x-kubernetes-group-version-kind": [{"group": group, "kind": list_kind, "version": version}]
    })
}

/// The schemas every document refers to: ObjectMeta and ListMeta (and
/// what they reference) and Status from k8s-openapi, and the PATCH body.
pub(crate) fn common() -> Map<String, Value> {
    let mut m = crate::builtin::schemas::meta_definitions();
    m.insert("io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(), json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}));
    if let Some(Value::Object(status)) = m.get_mut("io.k8s.apimachinery.pkg.apis.meta.v1.Status") {
        status.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": "", "kind": "Status", "version": "v1"}]),
        );
    }
    m
}

/// Adds `apiVersion`, `kind`, `metadata` and the GVK extension to a CRD's
/// `openAPIV3Schema` (or a registered kind without a schema).
pub(crate) fn crd_kind_schema(schema: &Value, group: &str, version: &str, kind: &str) -> Value {
    let mut v = schema.clone();
    let m = crate::meta::ensure_object(&mut v);
    let props = crate::meta::ensure_object(m.entry("properties").or_insert(Value::Null));
    props.entry("apiVersion").or_insert(s(
        "APIVersion defines the versioned schema of this representation of an object.",
    ));
    props.entry("kind").or_insert(s(
        "Kind is a string value representing the REST resource this object represents.",
    ));
    props.insert("metadata".into(), {
        let mut m = r(META);
        m["description"] = json!("Standard object's metadata.");
        m
    });
    m.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": group, "kind": kind, "version": version}]),
    );
    v
}
