//! `/openapi/v3` (root and per group-version documents) and `/openapi/v2`:
//! paths with `x-kubernetes-group-version-kind`, the PATCH content types
//! and `fieldValidation` parameter kubectl checks, and component schemas
//! for the built-in kinds and every CRD version.

use super::openapi_schemas;
use crate::registry::Registry;
use crate::resource::{Behavior, ResourceInfo};
use serde_json::{json, Map, Value};
use std::hash::{Hash, Hasher};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn doc_hash(doc: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    doc.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: where each group-version's document is.
pub(crate) fn v3_root(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for g in registry.groups() {
        for v in &g.versions {
            if let Some(doc) = v3_doc(registry, &g.name, v) {
                let p = gv_path(&g.name, v);
                paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", doc_hash(&doc))}));
            }
        }
    }
    json!({"paths": paths})
}

fn param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn write_params() -> Vec<Value> {
    vec![
        param("dryRun", "When present, indicates that modifications should not be persisted."),
        param("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
        param("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict"),
    ]
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn ok(name: &str) -> Value {
    json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref(name)}}}, "401": {"description": "Unauthorized"}})
}

fn op(info: &ResourceInfo, action: &str, id: &str, responses: Value) -> Value {
    json!({
        "description": format!("{action} {}", info.kind),
        "operationId": id,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": info.group, "version": info.version, "kind": info.kind},
        "responses": responses
    })
}

fn body(name: &str) -> Value {
    json!({"content": {"*/*": {"schema": schema_ref(name)}}, "required": true})
}

fn patch_op(info: &ResourceInfo, id: &str, schema: &str) -> Value {
    let mut content = Map::new();
    let mut types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if info.behavior != Behavior::CustomResource {
        types.push("application/strategic-merge-patch+json");
    }
    types.push("application/apply-patch+yaml");
    for t in types {
        content.insert(
            t.into(),
            json!({"schema": schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch")}),
        );
    }
    let mut o = op(info, "patch", id, ok(schema));
    let mut params = write_params();
    params.push(param(
        "force",
        "Force is going to \"force\" Apply requests.",
    ));
    o["parameters"] = Value::Array(params);
    o["requestBody"] = json!({"content": content, "required": true});
    o
}

fn add_paths(info: &ResourceInfo, schema: &str, list_schema: &str, paths: &mut Map<String, Value>) {
    let base = format!("/{}", gv_path(&info.group, &info.version));
    let id = format!("{}{}", info.kind, info.version);
    let collection = if info.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", info.resource)
    } else {
        format!("{base}/{}", info.resource)
    };
    let mut post = op(info, "post", &format!("create{id}"), ok(schema));
    post["parameters"] = Value::Array(write_params());
    post["requestBody"] = body(schema);
    paths.insert(collection.clone(), json!({
        "get": op(info, "list", &format!("list{id}"), ok(list_schema)),
        "post": post,
        "delete": op(info, "deletecollection", &format!("deletecollection{id}"), ok("io.k8s.apimachinery.pkg.apis.meta.v1.Status")),
    }));
    if info.namespaced {
        paths.insert(
            format!("{base}/{}", info.resource),
            json!({
                "get": op(info, "list", &format!("list{id}ForAllNamespaces"), ok(list_schema)),
            }),
        );
    }
    let item = format!("{collection}/{{name}}");
    let mut put = op(info, "put", &format!("replace{id}"), ok(schema));
    put["parameters"] = Value::Array(write_params());
    put["requestBody"] = body(schema);
    paths.insert(
        item.clone(),
        json!({
            "get": op(info, "get", &format!("read{id}"), ok(schema)),
            "put": put,
            "patch": patch_op(info, &format!("patch{id}"), schema),
            "delete": op(info, "delete", &format!("delete{id}"), ok(schema)),
        }),
    );
    if info.status_subresource {
        let mut put = op(info, "put", &format!("replace{id}Status"), ok(schema));
        put["parameters"] = Value::Array(write_params());
        put["requestBody"] = body(schema);
        paths.insert(
            format!("{item}/status"),
            json!({
                "get": op(info, "get", &format!("read{id}Status"), ok(schema)),
                "put": put,
                "patch": patch_op(info, &format!("patch{id}Status"), schema),
            }),
        );
    }
}

/// Adds the component schemas of one served kind: a built-in kind's
/// (k8s-openapi's, with kube's merge rules), a custom resource's, or an
/// open object for a registered kind without a schema.
fn add_kind_schemas(info: &ResourceInfo, schemas: &mut Map<String, Value>) {
    if let Some(defs) = crate::builtin::schemas::definitions(info) {
        for (k, v) in defs.iter() {
            schemas.entry(k.clone()).or_insert_with(|| v.clone());
        }
        return;
    }
    let base =
        info.schema.as_deref().cloned().unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
    schemas.insert(
        info.openapi_name.clone(),
        openapi_schemas::crd_kind_schema(&base, &info.group, &info.version, &info.kind),
    );
}

/// The OpenAPI v3 document of one group-version, if served.
pub(crate) fn v3_doc(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut infos = registry.resources_in(group, version);
    if infos.is_empty() {
        return None;
    }
    infos.sort_by(|a, b| a.resource.cmp(&b.resource));
    let mut schemas = openapi_schemas::common();
    let mut paths = Map::new();
    for info in &infos {
        let schema_name = info.openapi_name.clone();
        add_kind_schemas(info, &mut schemas);
        let list_name = format!("{schema_name}List");
        schemas.insert(
            list_name.clone(),
            openapi_schemas::list_schema(&schema_name, group, version, &info.list_kind),
        );
        add_paths(info, &schema_name, &list_name, &mut paths);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                *r = r.replace("#/components/schemas/", "#/definitions/");
            }
            for x in m.values_mut() {
                rewrite_refs(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// `/openapi/v2` (JSON): every kind's definition.
pub(crate) fn v2_doc(registry: &Registry) -> Value {
    let mut defs = openapi_schemas::common();
    for info in registry.all() {
        add_kind_schemas(&info, &mut defs);
    }
    let mut doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": defs});
    rewrite_refs(&mut doc);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_operations_carry_what_kubectl_checks() {
        let r = Registry::default();
        r.register_shared(crate::builtin::all());
        let doc = v3_doc(&r, "", "v1").unwrap_or_default();
        let p = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(p["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
        assert!(p["parameters"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|x| x["name"] == "fieldValidation")));
        assert!(p["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_some());
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]
            ["x-kubernetes-group-version-kind"]
            .is_array());
        let root = v3_root(&r);
        assert!(root["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .is_some_and(|u| u.starts_with("/openapi/v3/apis/apps/v1?hash=")));
        let v2 = v2_doc(&r);
        assert!(!v2.to_string().contains("#/components/schemas/"));
    }
}
