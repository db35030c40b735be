//! Small helpers for reading and filling JSON objects the way Go's
//! defaulting functions fill structs.

use serde_json::{Map, Value};

/// The object at `path` below `v`, created (replacing non-objects) on the
/// way, as Go's defaulters see a non-pointer struct that is always there.
pub(super) fn object_at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = crate::meta::ensure_object(v);
    for p in path {
        cur = crate::meta::ensure_object(cur.entry((*p).to_owned()).or_insert(Value::Null));
    }
    cur
}

/// Sets `key` to `value` unless it is set (a JSON `null` counts as unset).
pub(super) fn default(m: &mut Map<String, Value>, key: &str, value: Value) {
    match m.get(key) {
        Some(v) if !v.is_null() => {}
        _ => {
            m.insert(key.to_owned(), value);
        }
    }
}

/// Calls `f` on every object item of the list `key` of `m`.
pub(super) fn each_item(
    m: &mut Map<String, Value>,
    key: &str,
    mut f: impl FnMut(&mut Map<String, Value>),
) {
    if let Some(Value::Array(items)) = m.get_mut(key) {
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            f(item);
        }
    }
}

/// A string field, empty when absent or not a string.
pub(super) fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_like_go_defaulters() {
        let mut v = json!({"spec": {"a": null, "b": 1}});
        let spec = object_at(&mut v, &["spec"]);
        default(spec, "a", json!(2));
        default(spec, "b", json!(3));
        assert_eq!(v, json!({"spec": {"a": 2, "b": 1}}));
        let mut v = json!({"spec": "oops"});
        object_at(&mut v, &["spec", "template"]).insert("x".into(), json!(1));
        assert_eq!(v, json!({"spec": {"template": {"x": 1}}}));
        let mut m = json!({"l": [{"n": 1}, 2, {"n": 3}]});
        let mut seen = 0;
        each_item(object_at(&mut m, &[]), "l", |_| seen += 1);
        assert_eq!(seen, 2);
    }
}
