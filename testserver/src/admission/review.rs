//! The `AdmissionReview` kube-apiserver sends (`CreateV1AdmissionReview`:
//! kind and resource at the version the webhook gets, the request's own
//! as `requestKind`/`requestResource`, user, objects, dry run, options)
//! and the checks it makes on the answer (`VerifyAdmissionResponse`):
//! present, same uid, same apiVersion and kind, a patch only from a
//! mutating webhook and only with its type; and kube's denial Status
//! (`ToStatusErr`).

use super::matching::{Attributes, Invocation};
use crate::status::StatusError;
use base64::Engine;
use serde_json::{json, Map, Value};

/// The user every request is admitted as (the server has one identity).
fn user_info() -> Value {
    json!({"username": "kcontrol-admin", "groups": ["system:masters", "system:authenticated"]})
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn gvr(group: &str, version: &str, resource: &str) -> Value {
    json!({"group": group, "version": version, "resource": resource})
}

/// The review to send, in the first version the webhook accepts.
pub(crate) fn request(
    uid: &str,
    version: &str,
    attrs: &Attributes,
    invocation: &Invocation,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let (info, asked) = (&invocation.info, &attrs.info);
    let mut r = Map::new();
    r.insert("uid".into(), json!(uid));
    r.insert("kind".into(), gvk(&info.group, &info.version, &info.kind));
    r.insert(
        "resource".into(),
        gvr(&info.group, &info.version, &info.resource),
    );
    r.insert(
        "requestKind".into(),
        gvk(&asked.group, &asked.version, &asked.kind),
    );
    r.insert(
        "requestResource".into(),
        gvr(&asked.group, &asked.version, &asked.resource),
    );
    if !attrs.subresource.is_empty() {
        r.insert("subResource".into(), json!(attrs.subresource));
        r.insert("requestSubResource".into(), json!(attrs.subresource));
    }
    r.insert("name".into(), json!(attrs.name));
    if !attrs.namespace.is_empty() {
        r.insert("namespace".into(), json!(attrs.namespace));
    }
    r.insert("operation".into(), json!(attrs.operation.as_str()));
    r.insert("userInfo".into(), user_info());
    r.insert("object".into(), object.cloned().unwrap_or(Value::Null));
    r.insert("oldObject".into(), old.cloned().unwrap_or(Value::Null));
    r.insert("dryRun".into(), json!(attrs.dry_run));
    r.insert("options".into(), attrs.options.clone());
    json!({"apiVersion": format!("admission.k8s.io/{version}"), "kind": "AdmissionReview", "request": r})
}

/// What a webhook answered, checked.
#[derive(Debug)]
pub(crate) struct Answer {
    pub allowed: bool,
    pub result: Value,
    pub patch: Option<Vec<u8>>,
    pub warnings: Vec<String>,
}

/// Decodes and checks an answer (`Err`: the text after
/// `received invalid webhook response: `, or after `failed to call
/// webhook: ` when the body is no AdmissionReview at all).
pub(crate) fn verify(
    body: &[u8],
    uid: &str,
    version: &str,
    mutating: bool,
) -> Result<Answer, (bool, String)> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|e| (false, format!("decoding the webhook response: {e}")))?;
    let Some(response) = review.get("response").filter(|r| r.is_object()) else {
        return Err((true, "webhook response was absent".into()));
    };
    if version == "v1" {
        verify_v1_envelope(&review, response, uid)?;
    }
    let patch = match response.get("patch").filter(|p| !p.is_null()) {
        None => None,
        Some(p) => Some(patch_bytes(p).ok_or_else(|| {
            (
                false,
                "decoding the webhook response: response.patch is neither base64 nor bytes"
                    .to_owned(),
            )
        })?),
    }
    .filter(|p| !p.is_empty());
    let patch_type = response.get("patchType").filter(|p| !p.is_null());
    verify_patch_type(patch.is_some(), patch_type, version, mutating)?;
    Ok(Answer {
        allowed: response["allowed"].as_bool().unwrap_or(false),
        result: response.get("status").cloned().unwrap_or(Value::Null),
        patch,
        warnings: response["warnings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|w| w.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// An admission.k8s.io/v1 answer: an AdmissionReview of that version whose
/// `response.uid` is the request's.
fn verify_v1_envelope(review: &Value, response: &Value, uid: &str) -> Result<(), (bool, String)> {
    let got_uid = response["uid"].as_str().unwrap_or("");
    if got_uid != uid {
        return Err((
            true,
            format!("expected response.uid={uid:?}, got {got_uid:?}"),
        ));
    }
    if review["apiVersion"] != "admission.k8s.io/v1" || review["kind"] != "AdmissionReview" {
        return Err((true, format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            review["apiVersion"].as_str().unwrap_or(""),
            review["kind"].as_str().unwrap_or("")
        )));
    }
    Ok(())
}

/// A mutating webhook's patch comes with its type (both or neither, in
/// v1), a JSONPatch; a validating webhook returns neither.
fn verify_patch_type(
    has_patch: bool,
    patch_type: Option<&Value>,
    version: &str,
    mutating: bool,
) -> Result<(), (bool, String)> {
    if mutating {
        match (has_patch, patch_type) {
            (true, None) if version == "v1" => Err((
                true,
                "webhook returned response.patch but not response.patchType".into(),
            )),
            (false, Some(_)) if version == "v1" => Err((
                true,
                "webhook returned response.patchType but not response.patch".into(),
            )),
            (true, Some(t)) if t != "JSONPatch" => {
                Err((true, format!("unsupported patch type {t}")))
            }
            _ => Ok(()),
        }
    } else if has_patch {
        Err((
            true,
            "validating webhook may not return response.patch".into(),
        ))
    } else if patch_type.is_some() {
        Err((
            true,
            "validating webhook may not return response.patchType".into(),
        ))
    } else {
        Ok(())
    }
}

/// `patch` as Go decodes a `[]byte`: a base64 string, or (what kube-rs's
/// types send) an array of numbers 0-255.
fn patch_bytes(p: &Value) -> Option<Vec<u8>> {
    match p {
        Value::String(s) => base64::engine::general_purpose::STANDARD.decode(s).ok(),
        Value::Array(items) => items
            .iter()
            .map(|b| b.as_u64().and_then(|n| u8::try_from(n).ok()))
            .collect(),
        _ => None,
    }
}

/// kube's `ToStatusErr`: the webhook's Status (code 400 when it gave
/// less than 400), the message prefixed by `admission webhook "<name>"
/// denied the request`.
pub(crate) fn denial(webhook: &str, result: &Value) -> StatusError {
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let code = result["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let message = match (result["message"].as_str(), result["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{denied_by}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{denied_by}: {r}"),
        _ => format!("{denied_by} without explanation"),
    };
    let reason = result["reason"].as_str().unwrap_or("").to_owned();
    let mut e = StatusError::new(code, reason, message);
    if let Some(d) = result.get("details").filter(|d| d.is_object()) {
        e.details = Some(Box::new(d.clone()));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_read_as_kube_apiservers() {
        let e = denial(
            "v.example.com",
            &json!({"code": 403, "reason": "Forbidden", "message": "no"}),
        );
        assert_eq!((e.code, e.reason.as_ref()), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "admission webhook \"v.example.com\" denied the request: no"
        );
        let e = denial("v.example.com", &json!({"code": 200}));
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "admission webhook \"v.example.com\" denied the request without explanation"
        );
    }

    #[test]
    fn answers_are_checked() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": true}});
        let body = serde_json::to_vec(&ok).unwrap_or_default();
        assert!(verify(&body, "u", "v1", false).is_ok());
        assert_eq!(
            verify(&body, "other", "v1", false).err(),
            Some((
                true,
                "expected response.uid=\"other\", got \"u\"".to_owned()
            ))
        );
        let mut patched = ok.clone();
        patched["response"]["patch"] = json!("W10=");
        let body = serde_json::to_vec(&patched).unwrap_or_default();
        assert!(verify(&body, "u", "v1", false).is_err());
        assert!(verify(&body, "u", "v1", true).is_err());
        assert_eq!(
            verify(b"<html>", "u", "v1", true).err().map(|e| e.0),
            Some(false)
        );
        // a patch as an array of bytes (kube-rs's serialization) is a patch
        let mut bytes = ok.clone();
        bytes["response"]["patch"] = json!(b"[]".to_vec());
        bytes["response"]["patchType"] = json!("JSONPatch");
        let body = serde_json::to_vec(&bytes).unwrap_or_default();
        let answer = verify(&body, "u", "v1", true).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(answer.patch.as_deref(), Some(&b"[]"[..]));
    }
}
