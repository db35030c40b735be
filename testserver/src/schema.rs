//! Structural-schema handling of custom resources, as apiextensions-apiserver
//! does it: defaulting, pruning of unknown fields (reported for
//! `fieldValidation`), dropping non-nullable nulls, and validation of
//! `type`, `required`, `enum`, `minimum`/`maximum` (and exclusive),
//! `multipleOf`, `pattern`, `format: date-time`, `minLength`/`maxLength`,
//! `minItems`/`maxItems`, `minProperties`/`maxProperties`, the value
//! validations `allOf`, `anyOf`, `oneOf` and `not` (what schemars emits
//! for Rust enums with data: `oneOf` of `required` alternatives over
//! hoisted properties), and `x-kubernetes-list-type: set`/`map`
//! uniqueness, with kube-openapi's messages turned into field errors.

use crate::status::{FieldError, FieldErrorKind};
use parking_lot::Mutex;
use regex::Regex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// Fills in `default`s of missing properties, recursively.
pub(crate) fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    if !map.contains_key(name) {
                        if let Some(d) = sub.get("default") {
                            map.insert(name.clone(), d.clone());
                        }
                    }
                    if let Some(v) = map.get_mut(name) {
                        apply_defaults(sub, v);
                    }
                }
            } else if let Some(sub) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for v in map.values_mut() {
                    apply_defaults(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items {
                    apply_defaults(sub, v);
                }
            }
        }
        _ => {}
    }
}

/// Removes fields the schema does not know (unless it preserves unknown
/// fields) and nulls where the schema is not nullable. Returns the paths of
/// the unknown fields removed.
pub(crate) fn prune(schema: &Value, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => prune_object(schema, map, path, unknown),
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    prune(sub, v, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(
    schema: &Value,
    map: &mut Map<String, Value>,
    path: &str,
    unknown: &mut Vec<String>,
) {
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        let at_root_meta =
            path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
        let sub = props
            .and_then(|p| p.get(&k))
            .or(additional.filter(|a| a.is_object()));
        match sub {
            Some(sub) => {
                if map.get(&k).is_some_and(Value::is_null) && !flag(sub, "nullable") {
                    map.remove(&k);
                    continue;
                }
                if !at_root_meta {
                    if let Some(v) = map.get_mut(&k) {
                        prune(sub, v, &child(path, &k), unknown);
                    }
                }
            }
            None if at_root_meta
                || preserve
                || additional.is_some_and(|a| a.as_bool() == Some(true)) => {}
            None => {
                map.remove(&k);
                unknown.push(child(path, &k));
            }
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        other => type_name(v) == other,
    }
}

fn regex_cache() -> &'static Mutex<HashMap<String, Option<Regex>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Regex>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn pattern_matches(pattern: &str, s: &str) -> bool {
    let mut cache = regex_cache().lock();
    let re = cache
        .entry(pattern.to_owned())
        .or_insert_with(|| Regex::new(pattern).ok());
    re.as_ref().is_none_or(|r| r.is_match(s))
}

/// RFC 3339 date-times, as strfmt's `date-time` accepts them.
const DATE_TIME: &str = r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$";

fn num_text(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => v.to_string(),
    }
}

/// Validates `value` against `schema`; `path` is the field path so far.
pub(crate) fn validate(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    if value.is_null() && flag(schema, "nullable") {
        return;
    }
    if int_or_string {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            errs.push(type_error(path, value, "integer,string"));
            return;
        }
    } else if let Some(t) = schema.get("type").and_then(Value::as_str) {
        if !type_matches(t, value) {
            errs.push(type_error(path, value, t));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(value) {
            let supported: Vec<String> = options
                .iter()
                .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                .collect();
            errs.push(FieldError::not_supported(path, value.clone(), &supported));
        }
    }
    validate_number(schema, value, path, errs);
    validate_string(schema, value, path, errs);
    validate_composition(schema, value, path, errs);
    match value {
        Value::Object(map) => validate_object(schema, map, path, errs),
        Value::Array(items) => validate_array(schema, items, path, errs),
        _ => {}
    }
}

/// Whether `value` validates against `schema` (no field error).
fn matches(schema: &Value, value: &Value, path: &str) -> bool {
    let mut errs = Vec::new();
    validate(schema, value, path, &mut errs);
    errs.is_empty()
}

/// `allOf`, `anyOf`, `oneOf`, `not`, with kube-openapi's messages (the
/// errors of the alternatives are not repeated).
fn validate_composition(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let list = |name: &str| schema.get(name).and_then(Value::as_array);
    let mut fail = |detail: String| errs.push(FieldError::invalid(path, json!(""), detail));
    if let Some(all) = list("allOf") {
        if !all.iter().all(|s| matches(s, value, path)) {
            fail(format!("{path:?} must validate all the schemas (allOf)"));
        }
    }
    if let Some(any) = list("anyOf") {
        if !any.iter().any(|s| matches(s, value, path)) {
            fail(format!(
                "{path:?} must validate at least one schema (anyOf)"
            ));
        }
    }
    if let Some(one) = list("oneOf") {
        match one.iter().filter(|s| matches(s, value, path)).count() {
            1 => {}
            0 => fail(format!(
                "{path:?} must validate one and only one schema (oneOf). Found none valid"
            )),
            n => fail(format!(
                "{path:?} must validate one and only one schema (oneOf). Found {n} valid alternatives"
            )),
        }
    }
    if let Some(not) = schema.get("not") {
        if matches(not, value, path) {
            fail(format!("{path:?} must not validate the schema (not)"));
        }
    }
}

fn type_error(path: &str, value: &Value, expected: &str) -> FieldError {
    let actual = type_name(value);
    FieldError {
        kind: FieldErrorKind::TypeInvalid,
        field: path.to_owned(),
        value: Some(Value::String(actual.to_owned())),
        detail: format!("{path} in body must be of type {expected}: \"{actual}\""),
    }
}

fn validate_number(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(n) = value.as_f64() else { return };
    if let Some(factor) = schema.get("multipleOf").and_then(Value::as_f64) {
        if factor > 0.0 && (n / factor).fract() != 0.0 {
            let f = num_text(&schema["multipleOf"]);
            errs.push(FieldError::invalid(
                path,
                value.clone(),
                format!("{path} in body should be a multiple of {f}"),
            ));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        let excl = flag(schema, "exclusiveMaximum");
        if (excl && n >= max) || (!excl && n > max) {
            let rel = if excl {
                "less than"
            } else {
                "less than or equal to"
            };
            let m = num_text(&schema["maximum"]);
            errs.push(FieldError::invalid(
                path,
                value.clone(),
                format!("{path} in body should be {rel} {m}"),
            ));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        let excl = flag(schema, "exclusiveMinimum");
        if (excl && n <= min) || (!excl && n < min) {
            let rel = if excl {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let m = num_text(&schema["minimum"]);
            errs.push(FieldError::invalid(
                path,
                value.clone(),
                format!("{path} in body should be {rel} {m}"),
            ));
        }
    }
}

fn validate_string(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(s) = value.as_str() else { return };
    let chars = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if chars > max {
            errs.push(FieldError {
                kind: FieldErrorKind::TooLong,
                field: path.to_owned(),
                value: None,
                detail: format!("may not be more than {max} bytes"),
            });
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if chars < min {
            errs.push(FieldError::invalid(
                path,
                value.clone(),
                format!("{path} in body should be at least {min} chars long"),
            ));
        }
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time")
        && !pattern_matches(DATE_TIME, s)
    {
        errs.push(FieldError::invalid(
            path,
            value.clone(),
            format!("{path} in body must be of type date-time: {s:?}"),
        ));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        if !pattern_matches(p, s) {
            errs.push(FieldError::invalid(
                path,
                value.clone(),
                format!("{path} in body should match '{p}'"),
            ));
        }
    }
}

fn validate_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                errs.push(FieldError::required(child(path, r), ""));
            }
        }
    }
    let n = map.len() as u64;
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64) {
        if n > max {
            errs.push(FieldError {
                kind: FieldErrorKind::TooMany,
                field: path.to_owned(),
                value: Some(Value::from(n)),
                detail: format!("must have at most {max} items"),
            });
        }
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64) {
        if n < min {
            errs.push(FieldError::invalid(
                path,
                json!(""),
                format!("{path} in body should have at least {min} properties"),
            ));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (k, v) in map {
        if path.is_empty() && k == "metadata" {
            continue;
        }
        if let Some(sub) = props.and_then(|p| p.get(k)).or(additional) {
            validate(sub, v, &child(path, k), errs);
        }
    }
}

fn validate_array(schema: &Value, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let n = items.len() as u64;
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
        if n > max {
            errs.push(FieldError {
                kind: FieldErrorKind::TooMany,
                field: path.to_owned(),
                value: Some(Value::from(n)),
                detail: format!("must have at most {max} items"),
            });
        }
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
        if n < min {
            errs.push(FieldError::invalid(
                path,
                Value::Array(items.to_vec()),
                format!("{path} in body should have at least {min} items"),
            ));
        }
    }
    if let Some(sub) = schema.get("items") {
        for (i, v) in items.iter().enumerate() {
            validate(sub, v, &format!("{path}[{i}]"), errs);
        }
    }
    validate_list_type(schema, items, path, errs);
}

/// `x-kubernetes-list-type: set` (items unique) and `map` (items unique
/// by their `x-kubernetes-list-map-keys`): a repeat is `Duplicate value`.
fn validate_list_type(schema: &Value, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let keys: Vec<&str> = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => Vec::new(),
        Some("map") => schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default(),
        _ => return,
    };
    let identity = |v: &Value| -> Value {
        if keys.is_empty() {
            v.clone()
        } else {
            Value::Array(
                keys.iter()
                    .map(|k| v.get(k).cloned().unwrap_or(Value::Null))
                    .collect(),
            )
        }
    };
    let mut seen: Vec<Value> = Vec::new();
    for (i, v) in items.iter().enumerate() {
        let id = identity(v);
        if seen.contains(&id) {
            let shown = if keys.is_empty() {
                v.clone()
            } else {
                Value::Object(
                    keys.iter()
                        .map(|k| ((*k).to_owned(), v.get(k).cloned().unwrap_or(Value::Null)))
                        .collect(),
                )
            };
            errs.push(FieldError {
                kind: FieldErrorKind::Duplicate,
                field: format!("{path}[{i}]"),
                value: Some(shown),
                detail: String::new(),
            });
        } else {
            seen.push(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn foo_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["deploymentName", "replicas"],
                    "properties": {
                        "deploymentName": {"type": "string", "pattern": "^[a-z-]+$"},
                        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                },
                "status": {"type": "object", "properties": {"availableReplicas": {"type": "integer"}}}
            }
        })
    }

    fn errors(v: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate(&foo_schema(), v, "", &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn messages_match_kube_openapi() {
        let v = json!({"spec": {"deploymentName": "Bad_Name", "replicas": 20, "mode": "c"}});
        assert_eq!(
            errors(&v),
            [
                "spec.deploymentName: Invalid value: \"Bad_Name\": spec.deploymentName in body should match '^[a-z-]+$'",
                "spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"",
                "spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10",
            ]
        );
        assert_eq!(errors(&json!({"spec": {"replicas": 0}})), [
            "spec.deploymentName: Required value",
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
        ]);
        assert_eq!(errors(&json!({"spec": {"deploymentName": "a", "replicas": "3"}})), [
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
        ]);
        assert_eq!(errors(&json!({"spec": {"deploymentName": "a", "replicas": 1, "tags": ["x", 1, "z"]}})), [
            "spec.tags: Too many: 3: must have at most 2 items",
            "spec.tags[1]: Invalid value: \"integer\": spec.tags[1] in body must be of type string: \"integer\"",
        ]);
        assert!(errors(&json!({"spec": {"deploymentName": "a", "replicas": 5}})).is_empty());
    }

    #[test]
    fn prunes_unknown_fields_and_applies_defaults() {
        let mut v = json!({"apiVersion": "x/v1", "kind": "Foo", "metadata": {"name": "a"},
            "spec": {"deploymentName": "a", "replicas": 1, "extra": 1, "free": {"anything": 1}}, "junk": true});
        let mut unknown = Vec::new();
        prune(&foo_schema(), &mut v, "", &mut unknown);
        apply_defaults(&foo_schema(), &mut v);
        assert_eq!(unknown, ["junk", "spec.extra"]);
        assert_eq!(v["spec"]["mode"], "a");
        assert_eq!(v["spec"]["free"]["anything"], 1);
        assert_eq!(v["metadata"]["name"], "a");
    }
}
