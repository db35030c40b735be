//! Reading and writing `metadata` fields of JSON objects, and the name
//! validation kube-apiserver applies (RFC 1123 subdomains and labels).

use crate::status::FieldError;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// `metadata` of an object, if it is a JSON object.
pub(crate) fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.as_object()
}

/// Makes `v` a JSON object (replacing anything else) and returns its map.
pub(crate) fn ensure_object(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        // just made an object above
        _ => unreachable!("value was just made an object"),
    }
}

/// `metadata` as a mutable map, created when missing or not an object.
pub(crate) fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    ensure_object(ensure_object(obj).entry("metadata").or_insert(Value::Null))
}

/// A string field of `metadata`, empty when absent.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    metadata(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Sets a string field of `metadata`.
pub(crate) fn set_meta_str(obj: &mut Value, field: &str, value: &str) {
    metadata_mut(obj).insert(field.to_owned(), Value::String(value.to_owned()));
}

/// Removes a field of `metadata`.
pub(crate) fn remove_meta(obj: &mut Value, field: &str) {
    metadata_mut(obj).remove(field);
}

/// `metadata.name`.
pub(crate) fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

/// `metadata.namespace`.
pub(crate) fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

/// `metadata.labels` as an ordered map (non-string values are skipped).
pub(crate) fn labels(obj: &Value) -> BTreeMap<String, String> {
    string_map(metadata(obj).and_then(|m| m.get("labels")))
}

/// `metadata.annotations` as an ordered map.
pub(crate) fn annotations(obj: &Value) -> BTreeMap<String, String> {
    string_map(metadata(obj).and_then(|m| m.get("annotations")))
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Drops empty `metadata.finalizers`, `ownerReferences`, `labels` and
/// `annotations`, as kube-apiserver's Go types (`omitempty`) never store
/// nor return them.
pub(crate) fn drop_empty_lists(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|field, value| {
        let listy = matches!(
            field.as_str(),
            "finalizers" | "ownerReferences" | "labels" | "annotations"
        );
        let empty = match value {
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        !(listy && empty)
    });
}

/// Replaces `metadata.finalizers` (removes the field when empty).
pub(crate) fn set_finalizers(obj: &mut Value, list: &[String]) {
    if list.is_empty() {
        remove_meta(obj, "finalizers");
    } else {
        let arr = list.iter().map(|s| Value::String(s.clone())).collect();
        metadata_mut(obj).insert("finalizers".into(), Value::Array(arr));
    }
}

/// `metadata.deletionTimestamp` is set.
pub(crate) fn is_deleting(obj: &Value) -> bool {
    !meta_str(obj, "deletionTimestamp").is_empty()
}

/// `metadata.generation`, 0 when absent.
pub(crate) fn generation(obj: &Value) -> i64 {
    metadata(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The owner references' uids.
pub(crate) fn owner_uids(obj: &Value) -> Vec<String> {
    owner_refs(obj)
        .iter()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// `metadata.ownerReferences` entries.
pub(crate) fn owner_refs(obj: &Value) -> Vec<Value> {
    metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The `apiVersion` and `kind` of an object.
pub(crate) fn type_meta(obj: &Value) -> (&str, &str) {
    (
        obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
        obj.get("kind").and_then(Value::as_str).unwrap_or(""),
    )
}

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

fn is_label_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'
}

/// RFC 1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= DNS1123_LABEL_MAX
        && b.iter().all(|&c| is_label_char(c))
        && b.first().is_some_and(|c| c.is_ascii_alphanumeric())
        && b.last().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX && !s.is_empty() && s.split('.').all(is_dns1123_label)
}

/// kube-apiserver's error for a name that is not a valid subdomain.
pub(crate) fn subdomain_error(field: &str, value: &str) -> FieldError {
    let mut detail = String::from(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    );
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        detail = format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters");
    }
    FieldError::invalid(field, Value::String(value.to_owned()), detail)
}

/// kube-apiserver's error for a name that is not a valid label.
pub(crate) fn label_error(field: &str, value: &str) -> FieldError {
    let detail = if value.len() > DNS1123_LABEL_MAX {
        format!("must be no more than {DNS1123_LABEL_MAX} characters")
    } else {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_owned()
    };
    FieldError::invalid(field, Value::String(value.to_owned()), detail)
}

/// Five random lower-case alphanumerics, as `generateName` appends.
pub(crate) fn random_suffix() -> String {
    use rand::RngExt;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| {
            let i = rng.random_range(0..ALPHABET.len());
            char::from(ALPHABET.get(i).copied().unwrap_or(b'x'))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_rfc1123() {
        assert!(is_dns1123_subdomain("foo.example-1.com"));
        assert!(!is_dns1123_subdomain("Foo"));
        assert!(!is_dns1123_subdomain("-foo"));
        assert!(!is_dns1123_subdomain("foo..bar"));
        assert!(is_dns1123_label("kube-system"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }

    #[test]
    fn reads_and_writes_metadata() {
        let mut o = json!({"metadata": {"name": "a", "labels": {"x": "1", "bad": 2}}});
        assert_eq!(name(&o), "a");
        assert_eq!(labels(&o).len(), 1);
        set_finalizers(&mut o, &["f".into()]);
        assert_eq!(finalizers(&o), vec!["f".to_owned()]);
        set_finalizers(&mut o, &[]);
        assert!(metadata(&o).is_some_and(|m| !m.contains_key("finalizers")));
        let mut o = json!({"metadata": {"name": "a", "finalizers": [], "labels": {}, "annotations": {"k": "v"}, "ownerReferences": []}});
        drop_empty_lists(&mut o);
        assert_eq!(
            o,
            json!({"metadata": {"name": "a", "annotations": {"k": "v"}}})
        );
        let mut s = json!("not an object");
        set_meta_str(&mut s, "name", "b");
        assert_eq!(name(&s), "b");
        assert_eq!(random_suffix().len(), 5);
    }
}
