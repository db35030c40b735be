//! The request-parsing entry point of the fuzz targets in `fuzz/`: not part
//! of the supported API (hidden from the docs). It runs, on arbitrary bytes,
//! every parser the server applies to a request before touching its store:
//! the path router, query decoding, label and field selectors, the
//! `resourceVersion`, `fieldValidation` and `propagationPolicy` parameters,
//! content negotiation, body decoding (JSON or YAML), `DeleteOptions`, and
//! the four patch formats applied to a fixed object.

use kcontrol_indexer::labels::Selector;
use serde_json::{json, Value};

use crate::http::{list, negotiate, request};
use crate::patch::{self, PatchType};
use crate::rest::{DeleteOptions, FieldValidation, Propagation};
use crate::selector::FieldSelector;

/// Parses one request as the server would (`target` is the path and query,
/// `content_type` also serves as the `Accept` header). Returns how many of
/// the parsers accepted their input; it never panics, whatever the input.
pub fn parse_request(method: &[u8], target: &str, content_type: &str, body: &[u8]) -> usize {
    let Ok(method) = http::Method::from_bytes(method) else {
        return 0;
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let q = request::parse_query(Some(query));
    let mut accepted = 0;
    let mut count = |ok: bool| accepted += usize::from(ok);
    count(request::route(&method, path, &q) != request::Route::NotFound);
    if let Some(s) = q.get("labelSelector") {
        count(Selector::parse(s).is_ok());
    }
    if let Some(s) = q.get("fieldSelector") {
        count(FieldSelector::parse(s).is_ok());
    }
    count(list::parse_rv(q.get("resourceVersion")).is_ok());
    count(FieldValidation::parse(q.get("fieldValidation").map(String::as_str)).is_ok());
    if let Some(p) = q.get("propagationPolicy") {
        count(Propagation::parse(p).is_ok());
    }
    count(negotiate::output(Some(content_type), true).is_ok());
    count(negotiate::decode_body(Some(content_type), body).is_ok());
    count(crate::proto::decode_object(body).is_ok());
    let decoded: Option<Value> = serde_json::from_slice(body)
        .ok()
        .or_else(|| serde_yaml::from_slice(body).ok());
    if let Some(v) = &decoded {
        count(DeleteOptions::from_body(v).is_ok());
    }
    let live = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "default", "labels": {"app": "x"}},
        "data": {"k": "v"},
        "items": [{"name": "one"}, {"name": "two"}]
    });
    match PatchType::from_content_type(content_type) {
        Some(PatchType::Json) => count(patch::json_patch(&live, body).is_ok()),
        Some(PatchType::Merge) => count(patch::merge_patch(&live, body).is_ok()),
        Some(PatchType::StrategicMerge) => {
            count(patch::strategic_merge_patch(&live, body, None).is_ok());
        }
        Some(PatchType::Apply) => {
            if let Some(applied) = &decoded {
                let info = crate::builtin::configmaps();
                let writer = crate::fields::Writer {
                    manager: "fuzz",
                    api_version: "v1".into(),
                    subresource: "",
                };
                count(crate::fields::apply(&info, &live, applied, &writer, false).is_ok());
            }
        }
        None => {}
    }
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_well_formed_request() {
        let n = parse_request(
            b"PATCH",
            "/api/v1/namespaces/default/configmaps/a?labelSelector=app%3Dx&fieldSelector=metadata.name%3Da&resourceVersion=5",
            "application/merge-patch+json",
            br#"{"data":{"k":"w"}}"#,
        );
        assert!(n >= 7, "{n}");
        assert_eq!(parse_request(b"BAD METHOD", "/", "", b""), 0);
    }
}
