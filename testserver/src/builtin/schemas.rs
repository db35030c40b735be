//! The OpenAPI schemas of the built-in kinds, from k8s-openapi's
//! `JsonSchema` impls (OpenAPI v3 components, refs under
//! `#/components/schemas/`), with kube's merge rules attached
//! (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`,
//! `-patch-strategy`, `-patch-merge-key`) and each kind's
//! `x-kubernetes-group-version-kind`. Built on first use and kept for the
//! process: a server start builds none of them.
//!
//! Also the structural schema of a kind: the same schema with refs inlined
//! and descriptions dropped, which server-side apply, strategic merge
//! patches and pruning walk.

use super::merge_rules;
use crate::resource::{ResourceInfo, SchemaFn};
use k8s_openapi::schemars::generate::SchemaSettings;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// A ref into the components of an OpenAPI v3 document.
const REF_PREFIX: &str = "#/components/schemas/";

/// Nesting beyond which the structural schema stops (kube's types nest
/// far less; a recursive type would stop at its first repetition anyway).
const MAX_DEPTH: usize = 64;

type Definitions = Arc<Map<String, Value>>;

static CACHE: LazyLock<Mutex<HashMap<String, Definitions>>> = LazyLock::new(Default::default);

/// The component schemas a kind needs (itself and everything it
/// references), annotated, once per process.
pub(crate) fn definitions(info: &ResourceInfo) -> Option<Definitions> {
    let schema_fn = info.openapi_schema?;
    let mut cache = CACHE.lock();
    if let Some(d) = cache.get(&info.openapi_name) {
        return Some(d.clone());
    }
    let d = Arc::new(generate(schema_fn, info));
    cache.insert(info.openapi_name.clone(), d.clone());
    Some(d)
}

fn generate(schema_fn: SchemaFn, info: &ResourceInfo) -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .into_generator();
    schema_fn(&mut generator);
    let mut defs = generator.take_definitions(true);
    for (name, schema) in defs.iter_mut() {
        annotate(name, schema);
    }
    if let Some(Value::Object(kind)) = defs.get_mut(&info.openapi_name) {
        kind.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": info.group, "kind": info.kind, "version": info.version}]),
        );
    }
    defs
}

/// Attaches the merge rules of `definition`'s fields and, for an atomic
/// struct, its map type.
fn annotate(definition: &str, schema: &mut Value) {
    let Value::Object(m) = schema else { return };
    if merge_rules::atomic_struct(definition) {
        m.insert("x-kubernetes-map-type".into(), json!("atomic"));
    }
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for (field, prop) in props.iter_mut() {
            let (Some(rules), Value::Object(p)) = (merge_rules::field(definition, field), prop)
            else {
                continue;
            };
            p.extend(merge_rules::extensions(rules));
        }
    }
}

/// ObjectMeta, ListMeta and Status (and what they reference), which every
/// document needs, once per process.
pub(crate) fn meta_definitions() -> Map<String, Value> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    static META: LazyLock<Map<String, Value>> = LazyLock::new(|| {
        let mut generator = SchemaSettings::openapi3()
            .with(|s| s.meta_schema = None)
            .into_generator();
        generator.subschema_for::<meta::ObjectMeta>();
        generator.subschema_for::<meta::ListMeta>();
        generator.subschema_for::<meta::Status>();
        let mut defs = generator.take_definitions(true);
        for (name, schema) in defs.iter_mut() {
            annotate(name, schema);
        }
        defs
    });
    META.clone()
}

/// The definition a schema refers to (`$ref`, or `allOf: [{$ref}]` as
/// OpenAPI v3 wraps a ref with a description).
fn ref_name(schema: &Value) -> Option<&str> {
    let r = schema.get("$ref").or_else(|| {
        schema
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|x| x.get("$ref"))
    })?;
    r.as_str()?.strip_prefix(REF_PREFIX)
}

/// The structural schema of a built-in kind, built once per resource.
pub(crate) fn structural(info: &ResourceInfo) -> Option<&Value> {
    info.structural
        .get_or_init(|| {
            let defs = definitions(info)?;
            let root = defs.get(&info.openapi_name)?;
            Some(Arc::new(inline(
                &defs,
                &info.openapi_name,
                root,
                &mut Vec::new(),
            )))
        })
        .as_deref()
}

/// `schema` (of definition `name`, when it is one) with refs replaced by
/// what they refer to, descriptions dropped, free-form objects marked as
/// preserving unknown fields.
fn inline(defs: &Map<String, Value>, name: &str, schema: &Value, stack: &mut Vec<String>) -> Value {
    if stack.len() >= MAX_DEPTH || stack.iter().any(|s| s == name) {
        return json!({"x-kubernetes-preserve-unknown-fields": true});
    }
    stack.push(name.to_owned());
    let out = inline_node(defs, name, schema, stack);
    stack.pop();
    out
}

fn inline_node(
    defs: &Map<String, Value>,
    definition: &str,
    schema: &Value,
    stack: &mut Vec<String>,
) -> Value {
    let Value::Object(m) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "description" | "allOf" | "$ref" => {}
            "properties" => {
                let mut props = Map::new();
                for (field, prop) in v.as_object().into_iter().flatten() {
                    let mut p = sub(defs, prop, stack);
                    if let (Some(rules), Value::Object(pm)) =
                        (merge_rules::field(definition, field), &mut p)
                    {
                        pm.extend(merge_rules::extensions(rules));
                    }
                    props.insert(field.clone(), p);
                }
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), sub(defs, v, stack));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    // an object (or anything untyped, like RawExtension or apiextensions'
    // JSON) without properties keeps whatever it holds
    let scalar_or_list = out
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t != "object");
    let free_form = !scalar_or_list
        && !out.contains_key("properties")
        && !out.contains_key("additionalProperties");
    if free_form {
        out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    Value::Object(out)
}

/// A property, item or map-value schema, inlined; the extensions a ref
/// carries beside it (v3's `allOf` wrapping) are kept.
fn sub(defs: &Map<String, Value>, schema: &Value, stack: &mut Vec<String>) -> Value {
    let Some(target) = ref_name(schema) else {
        return inline_node(defs, "", schema, stack);
    };
    let mut node = match defs.get(target) {
        Some(def) => inline(defs, target, def, stack),
        None => json!({"x-kubernetes-preserve-unknown-fields": true}),
    };
    if let (Value::Object(n), Value::Object(s)) = (&mut node, schema) {
        for (k, v) in s {
            if k.starts_with("x-kubernetes-") {
                n.insert(k.clone(), v.clone());
            }
        }
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_schemas_carry_kube_merge_rules() {
        let pods = crate::builtin::pods();
        let defs = definitions(&pods).unwrap_or_default();
        let pod = &defs["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert!(defs.contains_key("io.k8s.api.core.v1.Container"));
        assert!(defs.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        // the same Arc for the process
        let again = definitions(&pods).unwrap_or_default();
        assert!(Arc::ptr_eq(&defs, &again));
    }

    #[test]
    fn structural_schema_inlines_and_keeps_rules() {
        let deploy = crate::builtin::deployments();
        let s = structural(&deploy).cloned().unwrap_or_default();
        let spec = &s["properties"]["spec"];
        assert_eq!(
            spec["properties"]["selector"]["x-kubernetes-map-type"],
            "atomic"
        );
        let container =
            &spec["properties"]["template"]["properties"]["spec"]["properties"]["containers"];
        assert_eq!(container["x-kubernetes-list-type"], "map");
        let ports = &container["items"]["properties"]["ports"];
        assert_eq!(
            ports["x-kubernetes-list-map-keys"],
            json!(["containerPort", "protocol"])
        );
        assert!(s.get("description").is_none());
        // managedFields' fieldsV1 is free-form
        let fields_v1 = &s["properties"]["metadata"]["properties"]["managedFields"]["items"]
            ["properties"]["fieldsV1"];
        assert_eq!(fields_v1["x-kubernetes-preserve-unknown-fields"], true);
        assert!(!s.to_string().contains("$ref"));
    }
}
