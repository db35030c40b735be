//! Decoding `AdmissionReview` and `ConversionReview` bodies and encoding
//! the answers. Whatever the bytes, decoding ends in a typed input or a
//! [`ReviewError`] that becomes an answer saying what was wrong (with the
//! request's uid when it could be read): never a panic.

use base64::Engine;
use kube_core::admission::{AdmissionResponse, AdmissionReview};
use kube_core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube_core::response::StatusSummary;
use kube_core::{Status, TypeMeta};
use serde_json::Value;

use super::admission::AdmissionRequest;

/// The review API versions answered (`v1beta1` has the same shape).
const ADMISSION_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];
const CONVERSION_VERSIONS: [&str; 2] = ["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"];

/// A decoded admission request, with the objects as sent (the typed
/// handlers decode them into their own types, and compute patches from
/// them).
#[derive(Debug)]
pub(crate) struct AdmissionInput {
    pub request: AdmissionRequest,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
}

/// Why a body is not a review the server can answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReviewError {
    /// The request's uid, when it could be read.
    pub uid: String,
    /// The apiVersion to answer in.
    pub api_version: String,
    /// 400, or 413 for a body over the limit.
    pub code: u16,
    pub message: String,
}

impl ReviewError {
    pub(crate) fn new(code: u16, message: impl Into<String>, api_version: &str) -> Self {
        Self {
            uid: String::new(),
            api_version: api_version.to_owned(),
            code,
            message: message.into(),
        }
    }
}

/// The uid and apiVersion of a body that parsed as JSON, for error answers.
fn identify(value: &Value, default_version: &str) -> (String, String) {
    let uid = value["request"]["uid"].as_str().unwrap_or("").to_owned();
    let version = value["apiVersion"]
        .as_str()
        .unwrap_or(default_version)
        .to_owned();
    (uid, version)
}

/// Parses the body as JSON and checks kind and apiVersion.
fn parse(
    body: &[u8],
    kind: &str,
    versions: &[&str],
) -> Result<(Value, String, String), ReviewError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ReviewError::new(
            400,
            format!("the body is not a JSON {kind}: {e}"),
            versions[0],
        )
    })?;
    let (uid, api_version) = identify(&value, versions[0]);
    let fail = |message: String| ReviewError {
        uid: uid.clone(),
        api_version: versions[0].to_owned(),
        code: 400,
        message,
    };
    if value["kind"].as_str() != Some(kind) {
        return Err(fail(format!("expected kind {kind}, got {}", value["kind"])));
    }
    if !versions.contains(&api_version.as_str()) {
        return Err(fail(format!(
            "unsupported {kind} apiVersion {api_version:?} (supported: {})",
            versions.join(", ")
        )));
    }
    if !value["request"].is_object() {
        return Err(fail(format!("the {kind} has no request")));
    }
    Ok((value, uid, api_version))
}

/// Decodes an `AdmissionReview` request body.
pub(crate) fn decode_admission(body: &[u8]) -> Result<AdmissionInput, ReviewError> {
    let (value, uid, api_version) = parse(body, "AdmissionReview", &ADMISSION_VERSIONS)?;
    let object = Some(value["request"]["object"].clone()).filter(|v| !v.is_null());
    let old_object = Some(value["request"]["oldObject"].clone()).filter(|v| !v.is_null());
    let review: AdmissionReview<kube_core::DynamicObject> =
        serde_json::from_value(value).map_err(|e| ReviewError {
            uid: uid.clone(),
            api_version: api_version.clone(),
            code: 400,
            message: format!("decoding the AdmissionReview: {e}"),
        })?;
    let request: AdmissionRequest = review.try_into().map_err(|e| ReviewError {
        uid,
        api_version,
        code: 400,
        message: format!("{e}"),
    })?;
    Ok(AdmissionInput {
        request,
        object,
        old_object,
    })
}

/// The JSON of an admission answer. kube-core serializes `patch` as an
/// array of numbers (kube-rs#1781), which Go's decoder happens to accept;
/// the answer carries it in the API's own form, a base64 string.
pub(crate) fn encode_admission(response: AdmissionResponse) -> Vec<u8> {
    let patch = response
        .patch
        .as_deref()
        .map(|p| base64::engine::general_purpose::STANDARD.encode(p));
    let Ok(mut review) = serde_json::to_value(response.into_review()) else {
        return fallback("AdmissionReview");
    };
    if let (Some(p), Some(r)) = (
        patch,
        review.get_mut("response").and_then(Value::as_object_mut),
    ) {
        r.insert("patch".into(), Value::String(p));
    }
    serde_json::to_vec(&review).unwrap_or_else(|_| fallback("AdmissionReview"))
}

/// The answer to a body that was not a usable `AdmissionReview`.
pub(crate) fn admission_error(e: &ReviewError) -> Vec<u8> {
    let mut r = AdmissionResponse::invalid(&e.message);
    r.uid = e.uid.clone();
    r.types = TypeMeta {
        api_version: e.api_version.clone(),
        kind: "AdmissionReview".into(),
    };
    r.result.code = e.code;
    encode_admission(r)
}

/// Decodes a `ConversionReview` request body.
pub(crate) fn decode_conversion(body: &[u8]) -> Result<ConversionRequest, ReviewError> {
    let (value, uid, api_version) = parse(body, "ConversionReview", &CONVERSION_VERSIONS)?;
    let review: ConversionReview = serde_json::from_value(value).map_err(|e| ReviewError {
        uid: uid.clone(),
        api_version: api_version.clone(),
        code: 400,
        message: format!("decoding the ConversionReview: {e}"),
    })?;
    ConversionRequest::from_review(review).map_err(|e| ReviewError {
        uid,
        api_version,
        code: 400,
        message: e.to_string(),
    })
}

/// The JSON of a conversion answer.
pub(crate) fn encode_conversion(response: ConversionResponse, api_version: &str) -> Vec<u8> {
    let review = ConversionReview {
        types: TypeMeta {
            api_version: api_version.to_owned(),
            kind: "ConversionReview".into(),
        },
        request: None,
        response: Some(response),
    };
    serde_json::to_vec(&review).unwrap_or_else(|_| fallback("ConversionReview"))
}

/// The answer to a body that was not a usable `ConversionReview`.
pub(crate) fn conversion_error(e: &ReviewError) -> Vec<u8> {
    let response = ConversionResponse {
        types: None,
        uid: e.uid.clone(),
        result: Status::failure(&e.message, "BadRequest").with_code(e.code),
        converted_objects: Vec::new(),
    };
    encode_conversion(response, &e.api_version)
}

/// Whether a conversion answer succeeded, and its code.
pub(crate) fn conversion_outcome(r: &ConversionResponse) -> (bool, u16) {
    if r.result.status == Some(StatusSummary::Success) {
        (true, 200)
    } else {
        (
            false,
            if r.result.code == 0 {
                500
            } else {
                r.result.code
            },
        )
    }
}

fn fallback(kind: &str) -> Vec<u8> {
    format!(
        "{{\"kind\":\"{kind}\",\"response\":{{\"uid\":\"\",\"allowed\":false,\"status\":{{\"status\":\"Failure\",\"code\":500,\"message\":\"encoding the answer failed\"}}}}}}"
    )
    .into_bytes()
}

/// Runs both decoders and, on their results, the answer encoders: the
/// fuzz target's entry point (never panics, whatever `body` is).
pub fn fuzz_decode(body: &[u8]) -> usize {
    let mut decoded = 0;
    match decode_admission(body) {
        Ok(input) => {
            decoded += 1;
            let _ = encode_admission(AdmissionResponse::from(&input.request));
        }
        Err(e) => {
            let _ = admission_error(&e);
        }
    }
    match decode_conversion(body) {
        Ok(request) => {
            decoded += 1;
            let _ = encode_conversion(
                ConversionResponse::for_request(request),
                CONVERSION_VERSIONS[0],
            );
        }
        Err(e) => {
            let _ = conversion_error(&e);
        }
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
            .unwrap_or_default()
    }

    #[test]
    fn a_kube_apiserver_request_decodes() {
        let body = review(json!({
            "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "a", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
            "oldObject": null, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }));
        let input = decode_admission(&body).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(input.request.uid, "u-1");
        assert!(input.object.is_some());
        assert!(input.old_object.is_none());
    }

    #[test]
    fn a_patch_is_answered_in_base64() {
        let body = review(json!({
            "uid": "u-3", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE", "userInfo": {}, "object": {"metadata": {"name": "a"}}
        }));
        let input = decode_admission(&body).unwrap_or_else(|e| panic!("{e:?}"));
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/data", "value": {}}]))
                .unwrap_or_else(|e| panic!("{e}"));
        let response = AdmissionResponse::from(&input.request)
            .with_patch(patch)
            .unwrap_or_else(|e| panic!("{e}"));
        let answer: Value = serde_json::from_slice(&encode_admission(response)).unwrap_or_default();
        assert_eq!(
            answer["response"]["patch"],
            "W3sib3AiOiJhZGQiLCJwYXRoIjoiL2RhdGEiLCJ2YWx1ZSI6e319XQ=="
        );
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        assert_eq!(answer["response"]["uid"], "u-3");
    }

    #[test]
    fn malformed_bodies_are_errors_that_keep_the_uid() {
        let e = decode_admission(b"not json").err();
        assert_eq!(e.as_ref().map(|e| e.code), Some(400));
        let e = decode_admission(&review(json!({"uid": "u-2", "operation": "EXPLODE"}))).err();
        assert_eq!(e.as_ref().map(|e| e.uid.as_str()), Some("u-2"));
        let answer: Value = serde_json::from_slice(&admission_error(
            &e.unwrap_or_else(|| ReviewError::new(400, "", "")),
        ))
        .unwrap_or_default();
        assert_eq!(answer["response"]["uid"], "u-2");
        assert_eq!(answer["response"]["allowed"], false);
        assert_eq!(answer["response"]["status"]["code"], 400);
        let wrong = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Pod", "request": {}}))
            .unwrap_or_default();
        assert!(decode_admission(&wrong).is_err());
        assert!(decode_conversion(&wrong).is_err());
        assert_eq!(fuzz_decode(b"{\"kind\":\"ConversionReview\"}"), 0);
    }
}
