//! Custom resources between versions, as apiextensions-apiserver converts
//! them: with `spec.conversion.strategy: None` only `apiVersion` changes;
//! with `Webhook`, the objects not yet at the desired version go in one
//! `ConversionReview` (apiextensions.k8s.io, the first of the CRD's
//! `conversionReviewVersions` the server speaks) to `conversion.webhook`,
//! within 30 s. The answer must succeed, carry as many objects, each at
//! the desired version and of the same kind, name, namespace and uid;
//! metadata is restored from the original but for labels and
//! annotations. Failures read `conversion webhook for <gvk> failed: …`.

use super::client::{self, Services};
use crate::resource::ResourceInfo;
use crate::rest::Core;
use crate::status::{FieldError, GroupResource, StatusError};
use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use serde_json::{json, Value};
use std::time::Duration;

/// kube's conversion webhook timeout.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How a CRD converts.
#[derive(Debug)]
pub(crate) enum Strategy {
    /// `apiVersion` only.
    None,
    /// Through a webhook.
    Webhook {
        client: WebhookClientConfig,
        review_versions: Vec<String>,
    },
}

/// The conversion of the CRD `info` belongs to (`None` for built-ins).
pub(crate) fn strategy(core: &Core, info: &ResourceInfo) -> Strategy {
    let Some(crd) = info.crd_name.as_deref() else {
        return Strategy::None;
    };
    let stored = core
        .store
        .resource(&GroupResource::new(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        ))
        .and_then(|rs| rs.get(crd));
    let Some(stored) = stored else {
        return Strategy::None;
    };
    let conversion = &stored.value()["spec"]["conversion"];
    if conversion["strategy"] != "Webhook" {
        return Strategy::None;
    }
    let webhook = &conversion["webhook"];
    match serde_json::from_value(webhook["clientConfig"].clone()) {
        Ok(client) => Strategy::Webhook {
            client,
            review_versions: webhook["conversionReviewVersions"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        },
        Err(_) => Strategy::None,
    }
}

/// Whether serving `info` (a version other than the storage version)
/// takes the conversion webhook.
pub(crate) fn needs_webhook(core: &Core, info: &ResourceInfo) -> bool {
    !info.is_storage_version() && matches!(strategy(core, info), Strategy::Webhook { .. })
}

/// apiextensions-apiserver's validation of `spec.conversion`.
pub(crate) fn validate_crd_conversion(crd: &Value) -> Vec<FieldError> {
    let conversion = &crd["spec"]["conversion"];
    match conversion["strategy"].as_str() {
        None | Some("None") => Vec::new(),
        Some("Webhook") => {
            let mut errs = Vec::new();
            let webhook = &conversion["webhook"];
            if !webhook["clientConfig"].is_object() {
                errs.push(FieldError::required(
                    "spec.conversion.webhook.clientConfig",
                    "required when strategy is set to Webhook",
                ));
            }
            let versions: Vec<&str> = webhook["conversionReviewVersions"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if !versions.iter().any(|v| *v == "v1" || *v == "v1beta1") {
                errs.push(FieldError::invalid(
                    "spec.conversion.webhook.conversionReviewVersions",
                    webhook["conversionReviewVersions"].clone(),
                    "must include at least one of v1, v1beta1",
                ));
            }
            errs
        }
        Some(other) => vec![FieldError::not_supported(
            "spec.conversion.strategy",
            json!(other),
            &["None".into(), "Webhook".into()],
        )],
    }
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// Converts `objects` of `info`'s resource to `version`.
pub(crate) async fn convert(
    core: &Core,
    services: &Services,
    info: &ResourceInfo,
    mut objects: Vec<Value>,
    version: &str,
) -> Result<Vec<Value>, StatusError> {
    let desired = api_version(&info.group, version);
    let pending: Vec<usize> = (0..objects.len())
        .filter(|i| objects[*i]["apiVersion"].as_str() != Some(desired.as_str()))
        .collect();
    if pending.is_empty() {
        return Ok(objects);
    }
    let Strategy::Webhook {
        client,
        review_versions,
    } = strategy(core, info)
    else {
        for i in pending {
            if let Some(m) = objects[i].as_object_mut() {
                m.insert("apiVersion".into(), json!(desired));
            }
        }
        return Ok(objects);
    };
    let first = &objects[pending[0]];
    let gvk = format!(
        "{}, Kind={}",
        first["apiVersion"].as_str().unwrap_or(""),
        first["kind"].as_str().unwrap_or(&info.kind)
    );
    let originals: Vec<Value> = pending.iter().map(|i| objects[*i].clone()).collect();
    let converted = call(services, &client, &review_versions, &desired, &originals)
        .await
        .map_err(|e| StatusError::internal(&format!("conversion webhook for {gvk} failed: {e}")))?;
    for (n, (i, mut out)) in pending.into_iter().zip(converted).enumerate() {
        check_converted(&objects[i], &out, &desired).map_err(|e| {
            StatusError::internal(&format!(
                "conversion webhook for {gvk} returned invalid converted object at index {n}: {e}"
            ))
        })?;
        restore_metadata(&objects[i], &mut out);
        objects[i] = out;
    }
    Ok(objects)
}

/// One round trip; the converted objects, as many as sent.
async fn call(
    services: &Services,
    client_config: &WebhookClientConfig,
    review_versions: &[String],
    desired: &str,
    objects: &[Value],
) -> Result<Vec<Value>, String> {
    let version = review_versions
        .iter()
        .find(|v| *v == "v1" || *v == "v1beta1")
        .ok_or("no supported conversion review versions")?;
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({"apiVersion": format!("apiextensions.k8s.io/{version}"), "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}});
    let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
    let answer = client::post(services, client_config, TIMEOUT, body).await?;
    let answer: Value = serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
    let response = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("no response provided")?;
    if version == "v1" && response["uid"].as_str() != Some(uid.as_str()) {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            response["uid"].as_str().unwrap_or("")
        ));
    }
    if response["result"]["status"] != "Success" {
        return Err(match response["result"]["message"].as_str() {
            Some(m) if !m.is_empty() => m.to_owned(),
            _ => format!(
                "response.result.status was '{}', not 'Success'",
                response["result"]["status"].as_str().unwrap_or("")
            ),
        });
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != objects.len() {
        return Err(format!(
            "returned {} objects, expected {}",
            converted.len(),
            objects.len()
        ));
    }
    Ok(converted)
}

fn check_converted(original: &Value, converted: &Value, desired: &str) -> Result<(), String> {
    let got = converted["apiVersion"].as_str().unwrap_or("");
    if got != desired {
        return Err(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        ));
    }
    for (what, path) in [
        ("kind", "/kind"),
        ("name", "/metadata/name"),
        ("namespace", "/metadata/namespace"),
        ("UID", "/metadata/uid"),
    ] {
        let (a, b) = (original.pointer(path), converted.pointer(path));
        if a != b {
            let show = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
            return Err(format!(
                "must have the same {what}: {} != {}",
                show(a),
                show(b)
            ));
        }
    }
    Ok(())
}

/// The original metadata with the converted labels and annotations.
fn restore_metadata(original: &Value, converted: &mut Value) {
    let mut metadata = original.get("metadata").cloned().unwrap_or(json!({}));
    for field in ["labels", "annotations"] {
        let value = converted["metadata"].get(field).cloned();
        if let Some(m) = metadata.as_object_mut() {
            match value {
                Some(v) if v.is_object() => m.insert(field.into(), v),
                _ => m.remove(field),
            };
        }
    }
    if let Some(m) = converted.as_object_mut() {
        m.insert("metadata".into(), metadata);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converted_objects_keep_their_identity_and_metadata() {
        let original = json!({"apiVersion": "e.com/v1", "kind": "Foo", "metadata": {"name": "a", "uid": "u", "resourceVersion": "5", "labels": {"x": "1"}}});
        let mut out = json!({"apiVersion": "e.com/v2", "kind": "Foo", "metadata": {"name": "a", "uid": "u", "labels": {"x": "2"}}, "spec": {}});
        assert!(check_converted(&original, &out, "e.com/v2").is_ok());
        restore_metadata(&original, &mut out);
        assert_eq!(
            out["metadata"],
            json!({"name": "a", "uid": "u", "resourceVersion": "5", "labels": {"x": "2"}})
        );
        let renamed =
            json!({"apiVersion": "e.com/v2", "kind": "Foo", "metadata": {"name": "b", "uid": "u"}});
        assert_eq!(
            check_converted(&original, &renamed, "e.com/v2"),
            Err("must have the same name: a != b".into())
        );
        assert!(check_converted(&original, &renamed, "e.com/v3").is_err());
    }

    #[test]
    fn a_webhook_strategy_needs_a_client_and_review_versions() {
        let crd = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v2"]}}}});
        let errs: Vec<String> = validate_crd_conversion(&crd)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errs.len(), 2, "{errs:?}");
    }
}
