//! `meta.k8s.io` Tables, the server-side printing `kubectl get` asks for:
//! Name, the resource's printer columns (built-in, computed by
//! `printers`, or a CRD's `additionalPrinterColumns`), Age.

use super::render::{meta_api_version, partial_metadata, IncludeObject};
use crate::resource::{PrinterColumn, ResourceInfo};
use crate::timeutil;
use serde_json::{json, Value};

fn column(name: &str, type_: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

enum Col<'a> {
    Name,
    Printer(&'a PrinterColumn),
    Age,
}

/// Name, the default printer columns, Age (unless a column already shows
/// creationTimestamp), then the `-o wide` columns.
fn layout(info: &ResourceInfo) -> Vec<Col<'_>> {
    let mut cols = vec![Col::Name];
    let has_age = info
        .printer_columns
        .iter()
        .any(|c| c.json_path == ".metadata.creationTimestamp" || c.json_path == "!age");
    cols.extend(
        info.printer_columns
            .iter()
            .filter(|c| c.priority == 0)
            .map(Col::Printer),
    );
    if !has_age {
        cols.push(Col::Age);
    }
    cols.extend(
        info.printer_columns
            .iter()
            .filter(|c| c.priority != 0)
            .map(Col::Printer),
    );
    cols
}

/// Column definitions.
pub(crate) fn column_definitions(info: &ResourceInfo) -> Vec<Value> {
    layout(info)
        .into_iter()
        .map(|c| match c {
            Col::Name => column(
                "Name",
                "string",
                "name",
                "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
                0,
            ),
            Col::Printer(p) => {
                let t = if p.type_ == "date" { "string" } else { p.type_.as_str() };
                column(&p.name, t, "", &p.description, p.priority)
            }
            Col::Age => column(
                "Age",
                "string",
                "",
                "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                0,
            ),
        })
        .collect()
}

/// Evaluates a simple JSONPath (`.a.b`, `.a[0].b`).
pub(crate) fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        let (field, index) = match seg.split_once('[') {
            Some((f, rest)) => (f, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        if let Some(i) = index {
            cur = cur.get(i)?;
        }
    }
    Some(cur)
}

fn age(obj: &Value) -> Value {
    let created = obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(timeutil::parse_rfc3339);
    match created {
        Some(t) => json!(timeutil::human_duration(timeutil::now_secs() - t)),
        None => json!("<unknown>"),
    }
}

fn cell(c: &PrinterColumn, obj: &Value) -> Value {
    if c.json_path.starts_with('!') {
        return super::printers::cell(&c.json_path, obj).unwrap_or(Value::Null);
    }
    match json_path(obj, &c.json_path) {
        Some(v) if c.type_ == "date" => match v.as_str().and_then(timeutil::parse_rfc3339) {
            Some(t) => json!(timeutil::human_duration(timeutil::now_secs() - t)),
            None => Value::Null,
        },
        Some(v) => v.clone(),
        None => Value::Null,
    }
}

/// One row.
pub(crate) fn row(
    info: &ResourceInfo,
    obj: &Value,
    include: IncludeObject,
    v1beta1: bool,
) -> Value {
    let cells: Vec<Value> = layout(info)
        .into_iter()
        .map(|c| match c {
            Col::Name => json!(obj["metadata"]["name"].as_str().unwrap_or("")),
            Col::Printer(p) => cell(p, obj),
            Col::Age => age(obj),
        })
        .collect();
    let mut r = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => r["object"] = partial_metadata(obj, v1beta1),
        IncludeObject::Object => r["object"] = obj.clone(),
    }
    r
}

/// A Table of rows with list metadata.
pub(crate) fn table(
    info: &ResourceInfo,
    rows: Vec<Value>,
    list_meta: Value,
    v1beta1: bool,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": meta_api_version(v1beta1),
        "metadata": list_meta,
        "columnDefinitions": column_definitions(info),
        "rows": rows
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_one_cell_per_column() {
        let info = crate::builtin::deployments();
        let d = json!({"metadata": {"name": "web", "creationTimestamp": timeutil::now_rfc3339()},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let r = row(&info, &d, IncludeObject::Metadata, false);
        let cells = r["cells"].as_array().cloned().unwrap_or_default();
        assert_eq!(cells.len(), column_definitions(&info).len());
        assert_eq!(cells.get(1), Some(&json!("2/3")));
        assert_eq!(cells.get(4), Some(&json!("0s")));
        assert_eq!(cells.get(5), Some(&json!("nginx")));
        assert_eq!(r["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            json_path(&d, ".spec.template.spec.containers[0].image"),
            Some(&json!("nginx:1"))
        );
    }
}
