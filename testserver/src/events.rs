//! `events.k8s.io/v1` Events: served from the same storage as `core/v1`
//! Events (as kube-apiserver does), converted field by field on the way in
//! and out: `regarding` ↔ `involvedObject`, `note` ↔ `message`,
//! `reportingController` ↔ `reportingComponent`, `deprecatedSource` ↔
//! `source`, `deprecatedFirstTimestamp`/`deprecatedLastTimestamp` ↔
//! `firstTimestamp`/`lastTimestamp`, `deprecatedCount` ↔ `count`; `reason`,
//! `type`, `action`, `related`, `series`, `eventTime` and
//! `reportingInstance` keep their names.

use crate::status::{FieldError, StatusError};
use serde_json::{json, Map, Value};

/// `events.k8s.io/v1` field name and its `core/v1` name.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Fields with the same name in both versions.
const SAME: &[&str] = &[
    "metadata",
    "reason",
    "type",
    "action",
    "related",
    "series",
    "eventTime",
    "reportingInstance",
];

/// The `events.k8s.io/v1` API version.
pub(crate) const API_VERSION: &str = "events.k8s.io/v1";

fn convert(from: &Value, renames: impl Iterator<Item = (&'static str, &'static str)>) -> Value {
    let mut out = Map::new();
    let Some(m) = from.as_object() else {
        return Value::Object(out);
    };
    for f in SAME {
        if let Some(v) = m.get(*f) {
            out.insert((*f).to_owned(), v.clone());
        }
    }
    for (src, dst) in renames {
        if let Some(v) = m.get(src) {
            out.insert(dst.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

/// A stored (`core/v1`) Event as `events.k8s.io/v1` serves it.
pub(crate) fn from_core(core: &Value) -> Value {
    let mut v = convert(core, RENAMED.iter().map(|(v1, c)| (*c, *v1)));
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(API_VERSION));
        m.insert("kind".into(), json!("Event"));
        // a core Event without these still has them (empty) in events.k8s.io/v1
        m.entry("regarding").or_insert_with(|| json!({}));
        m.entry("deprecatedSource").or_insert_with(|| json!({}));
        m.entry("eventTime").or_insert(Value::Null);
        m.entry("deprecatedFirstTimestamp").or_insert(Value::Null);
        m.entry("deprecatedLastTimestamp").or_insert(Value::Null);
    }
    v
}

/// An `events.k8s.io/v1` Event as `core/v1` stores it.
pub(crate) fn to_core(v1: &Value) -> Value {
    let mut v = convert(v1, RENAMED.iter().copied());
    if let Some(m) = v.as_object_mut() {
        m.retain(|_, x| !x.is_null());
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("kind".into(), json!("Event"));
    }
    v
}

fn empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        Some(Value::Object(m)) => m.values().all(|x| empty(Some(x))),
        _ => false,
    }
}

/// Checks a body sent to `events.k8s.io/v1` (type meta; on create, the
/// rules kube applies to Events created through this API) and converts
/// it for storage.
pub(crate) fn accept(body: &Value, create: bool) -> Result<Value, StatusError> {
    let Some(m) = body.as_object() else {
        return Err(StatusError::bad_request(
            "the body of the request must be a JSON or YAML object",
        ));
    };
    let (api_version, kind) = crate::meta::type_meta(body);
    if !api_version.is_empty() && api_version != API_VERSION {
        return Err(StatusError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({API_VERSION})"
        )));
    }
    if !kind.is_empty() && kind != "Event" {
        return Err(StatusError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (Event)"
        )));
    }
    if create {
        let mut errs = Vec::new();
        if empty(m.get("eventTime")) {
            errs.push(FieldError::required("eventTime", ""));
        }
        let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
        if ty != "Normal" && ty != "Warning" {
            errs.push(FieldError::invalid(
                "type",
                json!(""),
                format!("has invalid value: {ty}"),
            ));
        }
        for f in [
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
            "deprecatedSource",
        ] {
            if !empty(m.get(f)) {
                errs.push(FieldError::invalid(f, json!(""), "needs to be unset"));
            }
        }
        for f in [
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
        ] {
            if empty(m.get(f)) {
                errs.push(FieldError::required(f, ""));
            }
        }
        if !errs.is_empty() {
            let name = crate::meta::name(body);
            return Err(StatusError::invalid("events.k8s.io", "Event", name, &errs));
        }
    }
    Ok(to_core(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_both_ways() {
        let v1 = json!({"apiVersion": API_VERSION, "kind": "Event", "metadata": {"name": "e", "namespace": "d"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Synced", "note": "done", "type": "Normal",
            "action": "Sync", "reportingController": "ctl", "reportingInstance": "ctl-1",
            "regarding": {"kind": "Foo", "name": "f"}, "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}});
        let core = accept(&v1, true).unwrap_or_default();
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "done");
        assert_eq!(core["reportingComponent"], "ctl");
        assert_eq!(core["involvedObject"]["name"], "f");
        assert_eq!(core["series"]["count"], 2);
        assert!(core.get("note").is_none());
        let back = from_core(&core);
        for f in [
            "note",
            "reason",
            "regarding",
            "reportingController",
            "series",
            "eventTime",
        ] {
            assert_eq!(back[f], v1[f], "{f}");
        }
        let legacy = json!({"metadata": {"name": "x"}, "count": 3, "source": {"component": "c"}, "firstTimestamp": "2026-01-01T00:00:00Z"});
        let served = from_core(&legacy);
        assert_eq!(served["deprecatedCount"], 3);
        assert_eq!(served["deprecatedSource"]["component"], "c");
        assert_eq!(served["deprecatedFirstTimestamp"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn create_rules_of_events_v1() {
        let e = accept(
            &json!({"metadata": {"name": "e"}, "type": "Info", "deprecatedCount": 1}),
            true,
        )
        .err()
        .map(|e| e.message)
        .unwrap_or_default();
        assert!(
            e.starts_with("Event.events.k8s.io \"e\" is invalid: ["),
            "{e}"
        );
        assert!(e.contains("eventTime: Required value"), "{e}");
        assert!(
            e.contains("type: Invalid value: \"\": has invalid value: Info"),
            "{e}"
        );
        assert!(
            e.contains("deprecatedCount: Invalid value: \"\": needs to be unset"),
            "{e}"
        );
        assert!(e.contains("reportingController: Required value"), "{e}");
        let wrong = accept(&json!({"apiVersion": "v1", "kind": "Event"}), false);
        assert_eq!(wrong.err().map(|e| e.code), Some(400));
    }
}
