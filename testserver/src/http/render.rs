//! Turning stored objects into response representations: the stored
//! bytes as they are (the fast path), the object at another served version
//! of a CRD, PartialObjectMetadata, Tables, YAML.

use super::negotiate::Output;
use super::table;
use crate::resource::ResourceInfo;
use crate::status::StatusError;
use crate::store::StoredObject;
use bytes::Bytes;
use serde_json::{json, Value};

/// What a Table row carries (`includeObject`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    pub(crate) fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// The object as served at `info`'s version.
pub(crate) fn object_value(info: &ResourceInfo, obj: &StoredObject) -> Value {
    if info.behavior == crate::resource::Behavior::EventsV1 {
        return crate::events::from_core(obj.value());
    }
    let mut v = obj.value().clone();
    if !info.is_storage_version() {
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), json!(info.api_version()));
        }
    }
    v
}

/// JSON bytes of the object as served at `info`'s version.
pub(crate) fn object_json(info: &ResourceInfo, obj: &StoredObject) -> Bytes {
    if info.is_storage_version() && info.behavior != crate::resource::Behavior::EventsV1 {
        obj.json().clone()
    } else {
        Bytes::from(serde_json::to_vec(&object_value(info, obj)).unwrap_or_default())
    }
}

/// `meta.k8s.io` apiVersion for Tables and partial metadata.
pub(crate) fn meta_api_version(v1beta1: bool) -> &'static str {
    if v1beta1 {
        "meta.k8s.io/v1beta1"
    } else {
        "meta.k8s.io/v1"
    }
}

/// An object's `metadata` (an empty object when it has none).
pub(crate) fn metadata_of(obj: &Value) -> &Value {
    static EMPTY: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({}));
    obj.get("metadata").unwrap_or(&EMPTY)
}

/// The JSON of an object's PartialObjectMetadata, serialized from the
/// object's own metadata (no copy of it: a metadata list of many objects
/// costs their serialization only).
pub(crate) fn partial_metadata_json(obj: &Value, v1beta1: bool) -> Bytes {
    #[derive(serde::Serialize)]
    struct Partial<'a> {
        #[serde(rename = "apiVersion")]
        api_version: &'static str,
        kind: &'static str,
        metadata: &'a Value,
    }
    let partial = Partial {
        api_version: meta_api_version(v1beta1),
        kind: "PartialObjectMetadata",
        metadata: metadata_of(obj),
    };
    Bytes::from(serde_json::to_vec(&partial).unwrap_or_default())
}

/// PartialObjectMetadata of an object.
pub(crate) fn partial_metadata(obj: &Value, v1beta1: bool) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": meta_api_version(v1beta1), "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// One object in the requested representation, with its Content-Type.
pub(crate) fn render_one(
    info: &ResourceInfo,
    obj: &StoredObject,
    output: Output,
    include: IncludeObject,
) -> Result<(Bytes, &'static str), StatusError> {
    match output {
        Output::Json => Ok((object_json(info, obj), "application/json")),
        Output::Protobuf { json_fallback } => {
            protobuf_or_json(&object_value(info, obj), json_fallback, || {
                object_json(info, obj)
            })
        }
        Output::Yaml => yaml(&object_value(info, obj)),
        Output::PartialMetadata {
            v1beta1,
            protobuf: false,
        } => Ok((
            partial_metadata_json(obj.value(), v1beta1),
            "application/json",
        )),
        Output::PartialMetadata { protobuf: true, .. } => {
            protobuf_or_json(&partial_metadata(obj.value(), false), false, Bytes::new)
        }
        Output::Table { v1beta1 } => {
            let value = object_value(info, obj);
            let rows = vec![table::row(info, &value, include, v1beta1)];
            let t = table::table(
                info,
                rows,
                json!({"resourceVersion": obj.resource_version().to_string()}),
                v1beta1,
            );
            Ok((json_bytes(&t), "application/json"))
        }
    }
}

/// A value with its own `kind` (a Scale, a Status) in the requested
/// representation; Tables and partial metadata get JSON.
pub(crate) fn render_value(
    v: &Value,
    output: Output,
) -> Result<(Bytes, &'static str), StatusError> {
    match output {
        Output::Yaml => yaml(v),
        Output::Protobuf { json_fallback } => protobuf_or_json(v, json_fallback, || json_bytes(v)),
        _ => Ok((json_bytes(v), "application/json")),
    }
}

/// `v` in protobuf; when protobuf cannot carry it, `json()` if the client
/// also accepts JSON (`json_fallback`), else 406 naming what was missing.
fn protobuf_or_json(
    v: &Value,
    json_fallback: bool,
    json: impl FnOnce() -> Bytes,
) -> Result<(Bytes, &'static str), StatusError> {
    match crate::proto::encode_object(v) {
        Ok(b) => Ok((Bytes::from(b), crate::proto::MEDIA_TYPE)),
        Err(_) if json_fallback => Ok((json(), "application/json")),
        Err(e) => Err(super::negotiate::proto_response_error(&e)),
    }
}

/// Any value as JSON bytes.
pub(crate) fn json_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// Any value as YAML bytes.
pub(crate) fn yaml(v: &Value) -> Result<(Bytes, &'static str), StatusError> {
    serde_yaml::to_string(v)
        .map(|s| (Bytes::from(s), "application/yaml"))
        .map_err(|e| StatusError::internal(&e.to_string()))
}
