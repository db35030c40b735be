//! [`Conversion`]: a conversion webhook for a custom resource served at
//! several versions, with one typed function per (from, to) version pair.
//! Each object of a `ConversionReview` is decoded as the pair's source
//! type, converted, and encoded as the target type; objects already at the
//! desired version pass unchanged. Metadata is the API server's business:
//! the answer carries each object's metadata as sent, with the converted
//! labels and annotations (kube-apiserver restores it the same way). One
//! failure fails the whole review, as kube-apiserver expects.

use std::collections::HashMap;
use std::sync::Arc;

use kcontrol_indexer::TypedResource;
use kube_core::conversion::{ConversionRequest, ConversionResponse};
use kube_core::Status;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Why a conversion failed (answered as the review's failure message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(pub String);

impl ConversionError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

type Convert = Arc<dyn Fn(Value) -> Result<Value, ConversionError> + Send + Sync>;

/// The conversion functions of one or more custom resources, keyed by
/// kind and (from, to) apiVersion.
#[derive(Clone, Default)]
pub struct Conversion {
    converters: HashMap<(String, String, String), Convert>,
}

impl std::fmt::Debug for Conversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut pairs: Vec<String> = self
            .converters
            .keys()
            .map(|(kind, from, to)| format!("{kind} {from} -> {to}"))
            .collect();
        pairs.sort();
        f.debug_struct("Conversion").field("pairs", &pairs).finish()
    }
}

impl Conversion {
    /// No conversions yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Converts objects of `From`'s version into `To`'s version of the
    /// same kind with `f` (register both directions of each pair a
    /// client may ask for).
    #[must_use]
    pub fn convert<From, To, F>(mut self, f: F) -> Self
    where
        From: TypedResource + DeserializeOwned,
        To: TypedResource + Serialize,
        F: Fn(From) -> Result<To, ConversionError> + Send + Sync + 'static,
    {
        let (from, to) = (From::api_resource(), To::api_resource());
        let kind = from.kind.to_string();
        let convert: Convert = Arc::new(move |value: Value| {
            let object: From = serde_json::from_value(value).map_err(|e| {
                ConversionError(format!(
                    "decoding the object as {}/{}: {e}",
                    From::api_resource().api_version(),
                    From::api_resource().kind
                ))
            })?;
            let converted = f(object)?;
            let mut value = serde_json::to_value(&converted)
                .map_err(|e| ConversionError(format!("encoding the converted object: {e}")))?;
            if let Some(m) = value.as_object_mut() {
                let to = To::api_resource();
                m.insert("apiVersion".into(), Value::String(to.api_version().into()));
                m.insert("kind".into(), Value::String(to.kind.into()));
            }
            Ok(value)
        });
        self.converters.insert(
            (kind, from.api_version().into(), to.api_version().into()),
            convert,
        );
        self
    }

    /// Converts one object to `desired`.
    fn convert_one(&self, object: Value, desired: &str) -> Result<Value, ConversionError> {
        let api_version = object["apiVersion"].as_str().unwrap_or("").to_owned();
        if api_version == desired {
            return Ok(object);
        }
        let kind = object["kind"].as_str().unwrap_or("").to_owned();
        let key = (kind.clone(), api_version.clone(), desired.to_owned());
        let Some(convert) = self.converters.get(&key) else {
            return Err(ConversionError(format!(
                "no conversion of {kind} from {api_version:?} to {desired:?}"
            )));
        };
        let metadata = object.get("metadata").cloned();
        let mut converted = convert(object)?;
        restore_metadata(&mut converted, metadata);
        Ok(converted)
    }

    /// Answers a conversion request.
    pub(crate) fn review(&self, request: ConversionRequest) -> ConversionResponse {
        let desired = request.desired_api_version.clone();
        let objects = request.objects.clone();
        let response = ConversionResponse::for_request(request);
        let mut converted = Vec::with_capacity(objects.len());
        for (i, object) in objects.into_iter().enumerate() {
            match self.convert_one(object, &desired) {
                Ok(v) => converted.push(v),
                Err(e) => {
                    let message = format!("converting object {i} to {desired}: {e}");
                    tracing::warn!(%message, "conversion failed");
                    return response.failure(Status::failure(&message, "ConversionFailed"));
                }
            }
        }
        response.success(converted)
    }
}

/// The metadata as sent, with the converted object's labels and
/// annotations.
fn restore_metadata(converted: &mut Value, original: Option<Value>) {
    let mut metadata = original.unwrap_or_else(|| Value::Object(Default::default()));
    for field in ["labels", "annotations"] {
        let changed = converted["metadata"].get(field).cloned();
        if let Some(m) = metadata.as_object_mut() {
            match changed {
                Some(v) if !v.is_null() => m.insert(field.into(), v),
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
    use serde_json::json;

    #[test]
    fn metadata_comes_back_as_sent_with_the_converted_labels() {
        let mut converted =
            json!({"metadata": {"name": "x", "uid": "changed", "labels": {"v": "2"}}});
        restore_metadata(
            &mut converted,
            Some(json!({"name": "a", "uid": "u", "labels": {"v": "1"}, "annotations": {"k": "v"}})),
        );
        assert_eq!(
            converted["metadata"],
            json!({"name": "a", "uid": "u", "labels": {"v": "2"}})
        );
    }

    #[test]
    fn an_unknown_pair_fails_the_review() {
        let request = ConversionRequest {
            types: None,
            uid: "u".into(),
            desired_api_version: "example.com/v2".into(),
            objects: vec![
                json!({"apiVersion": "example.com/v2", "kind": "Foo", "metadata": {}}),
                json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {}}),
            ],
        };
        let r = Conversion::new().review(request);
        assert_eq!(r.uid, "u");
        assert!(r.result.is_failure());
        assert!(r
            .result
            .message
            .contains("no conversion of Foo from \"example.com/v1\""));
        assert!(r.converted_objects.is_empty());
    }
}
