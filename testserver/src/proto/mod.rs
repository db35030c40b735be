//! kube-apiserver's protobuf encoding (`application/vnd.kubernetes.protobuf`)
//! for the built-in kinds the server has (Deployment, ReplicaSet, ConfigMap,
//! Secret, Namespace, autoscaling/v1 Scale): the `k8s\0` + `runtime.Unknown`
//! envelope, lists, Status, and watch frames.
//!
//! The server stores JSON; the messages come from the `k8s-pb` crate. Each
//! message's conversion to and from the stored JSON is declared once with
//! [`message!`], which destructures the prost struct exhaustively: a field
//! the mapping forgets is a compile error. Fields the server does not map
//! are declared `unsupported`: a request or stored object that sets one is
//! refused with an error naming the field, never silently dropped; a JSON
//! key no message field maps is refused the same way.

mod types;

use base64::Engine as _;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::runtime as pbruntime;
use prost::Message as _;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The protobuf media type.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub(crate) const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The prefix of every enveloped object.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Why a conversion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtoError {
    /// A field this server does not convert is set.
    #[error("field {0} is not supported in protobuf by this server (send JSON instead)")]
    Unsupported(String),
    /// A value of the wrong shape.
    #[error("field {field}: {message}")]
    Invalid {
        /// The field's path.
        field: String,
        /// What was wrong.
        message: String,
    },
    /// Bytes that are not the expected protobuf.
    #[error("decoding protobuf: {0}")]
    Decode(String),
    /// A kind with no protobuf mapping here.
    #[error("{0} has no protobuf encoding in this server")]
    UnknownKind(String),
}

fn invalid(field: &str, message: impl Into<String>) -> ProtoError {
    ProtoError::Invalid {
        field: field.to_owned(),
        message: message.into(),
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// Conversion between a prost value and its JSON form.
pub(crate) trait Convert: Sized {
    /// The JSON form.
    fn to_json(&self, path: &str) -> Result<Value, ProtoError>;
    /// Whether the field is left out of the JSON object (Go's `omitempty`).
    fn omit(&self) -> bool {
        false
    }
    /// From the JSON form.
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError>;
}

impl Convert for String {
    fn to_json(&self, _: &str) -> Result<Value, ProtoError> {
        Ok(Value::String(self.clone()))
    }
    fn omit(&self) -> bool {
        self.is_empty()
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(path, "expected a string"))
    }
}

impl Convert for bool {
    fn to_json(&self, _: &str) -> Result<Value, ProtoError> {
        Ok(Value::Bool(*self))
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        v.as_bool()
            .ok_or_else(|| invalid(path, "expected a boolean"))
    }
}

impl Convert for i64 {
    fn to_json(&self, _: &str) -> Result<Value, ProtoError> {
        Ok(Value::from(*self))
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        v.as_i64()
            .ok_or_else(|| invalid(path, "expected an integer"))
    }
}

impl Convert for i32 {
    fn to_json(&self, _: &str) -> Result<Value, ProtoError> {
        Ok(Value::from(*self))
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        v.as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| invalid(path, "expected a 32-bit integer"))
    }
}

impl<T: Convert> Convert for Option<T> {
    fn to_json(&self, path: &str) -> Result<Value, ProtoError> {
        match self {
            Some(v) => v.to_json(path),
            None => Ok(Value::Null),
        }
    }
    fn omit(&self) -> bool {
        self.as_ref().is_none_or(Convert::omit)
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        T::from_json(v, path).map(Some)
    }
}

impl<T: Convert> Convert for Vec<T> {
    fn to_json(&self, path: &str) -> Result<Value, ProtoError> {
        self.iter()
            .enumerate()
            .map(|(i, x)| x.to_json(&format!("{path}[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }
    fn omit(&self) -> bool {
        self.is_empty()
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        v.as_array()
            .ok_or_else(|| invalid(path, "expected an array"))?
            .iter()
            .enumerate()
            .map(|(i, x)| T::from_json(x, &format!("{path}[{i}]")))
            .collect()
    }
}

impl<T: Convert> Convert for BTreeMap<String, T> {
    fn to_json(&self, path: &str) -> Result<Value, ProtoError> {
        let mut m = Map::new();
        for (k, v) in self {
            m.insert(k.clone(), v.to_json(&child(path, k))?);
        }
        Ok(Value::Object(m))
    }
    fn omit(&self) -> bool {
        self.is_empty()
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        v.as_object()
            .ok_or_else(|| invalid(path, "expected an object"))?
            .iter()
            .map(|(k, x)| Ok((k.clone(), T::from_json(x, &child(path, k))?)))
            .collect()
    }
}

/// The field conversions [`message!`] names.
mod conv {
    use super::*;

    /// By the field's type ([`Convert`]).
    pub(super) mod auto {
        use super::*;
        pub(crate) fn to_json<T: Convert>(x: &T, path: &str) -> Result<Option<Value>, ProtoError> {
            if x.omit() {
                Ok(None)
            } else {
                x.to_json(path).map(Some)
            }
        }
        pub(crate) fn from_json<T: Convert>(v: &Value, path: &str) -> Result<T, ProtoError> {
            T::from_json(v, path)
        }
    }

    /// A Go non-pointer number or boolean with `omitempty`: protobuf
    /// always carries it, JSON leaves it out when zero.
    pub(super) mod zero {
        use super::*;
        pub(crate) fn to_json<T: Convert + Default + PartialEq>(
            x: &Option<T>,
            path: &str,
        ) -> Result<Option<Value>, ProtoError> {
            match x {
                Some(v) if *v != T::default() => v.to_json(path).map(Some),
                _ => Ok(None),
            }
        }
        pub(crate) fn from_json<T: Convert>(v: &Value, path: &str) -> Result<T, ProtoError> {
            T::from_json(v, path)
        }
    }

    /// A field this server does not map: refused when set.
    pub(super) mod unsupported {
        use super::*;
        pub(crate) fn to_json<T: Default + PartialEq>(
            x: &T,
            path: &str,
        ) -> Result<Option<Value>, ProtoError> {
            if *x == T::default() {
                Ok(None)
            } else {
                Err(ProtoError::Unsupported(path.to_owned()))
            }
        }
        pub(crate) fn from_json<T>(_: &Value, path: &str) -> Result<T, ProtoError> {
            Err(ProtoError::Unsupported(path.to_owned()))
        }
    }

    /// A `map<string, bytes>`: base64 strings in JSON.
    pub(super) mod bytes_map {
        use super::*;
        pub(crate) fn to_json(
            x: &BTreeMap<String, Vec<u8>>,
            _: &str,
        ) -> Result<Option<Value>, ProtoError> {
            if x.is_empty() {
                return Ok(None);
            }
            let b64 = base64::engine::general_purpose::STANDARD;
            Ok(Some(Value::Object(
                x.iter()
                    .map(|(k, v)| (k.clone(), Value::String(b64.encode(v))))
                    .collect(),
            )))
        }
        pub(crate) fn from_json(
            v: &Value,
            path: &str,
        ) -> Result<BTreeMap<String, Vec<u8>>, ProtoError> {
            let b64 = base64::engine::general_purpose::STANDARD;
            v.as_object()
                .ok_or_else(|| invalid(path, "expected an object"))?
                .iter()
                .map(|(k, x)| {
                    let p = child(path, k);
                    let s = x.as_str().ok_or_else(|| invalid(&p, "expected a string"))?;
                    let bytes = b64
                        .decode(s)
                        .map_err(|e| invalid(&p, format!("illegal base64 data: {e}")))?;
                    Ok((k.clone(), bytes))
                })
                .collect()
        }
    }
}

/// Declares the JSON mapping of a prost message: `field: "jsonName" => conv`
/// for every field, where `conv` is `auto` (by type), `zero` (a Go
/// non-pointer scalar: left out of JSON when zero), `bytes_map` or
/// `unsupported`. `top` messages (objects with a kind) also accept and
/// ignore `kind` and `apiVersion` keys.
macro_rules! message {
    (@ignored top) => { &["kind", "apiVersion"] };
    (@ignored nested) => { &[] };
    ($level:ident $ty:path { $($f:ident : $j:literal => $conv:ident),* $(,)? }) => {
        impl $crate::proto::Convert for $ty {
            fn to_json(&self, path: &str) -> Result<serde_json::Value, $crate::proto::ProtoError> {
                let Self { $($f),* } = self;
                let mut m = serde_json::Map::new();
                $(
                    if let Some(v) = $crate::proto::conv::$conv::to_json($f, &$crate::proto::child(path, $j))? {
                        m.insert($j.to_owned(), v);
                    }
                )*
                Ok(serde_json::Value::Object(m))
            }
            fn from_json(v: &serde_json::Value, path: &str) -> Result<Self, $crate::proto::ProtoError> {
                let obj = v.as_object().ok_or_else(|| $crate::proto::invalid(path, "expected an object"))?;
                let ignored: &[&str] = message!(@ignored $level);
                for k in obj.keys() {
                    if ![$($j),*].contains(&k.as_str()) && !ignored.contains(&k.as_str()) {
                        return Err($crate::proto::ProtoError::Unsupported($crate::proto::child(path, k)));
                    }
                }
                Ok(Self {
                    $(
                        $f: match obj.get($j) {
                            None | Some(serde_json::Value::Null) => Default::default(),
                            Some(v) => $crate::proto::conv::$conv::from_json(v, &$crate::proto::child(path, $j))?,
                        },
                    )*
                })
            }
        }
    };
}
pub(crate) use message;

/// How a kind is encoded: its message type's conversions.
struct Codec {
    to_pb: fn(&Value) -> Result<Vec<u8>, ProtoError>,
    from_pb: fn(&[u8]) -> Result<Value, ProtoError>,
}

fn to_pb<T: Convert + prost::Message>(v: &Value) -> Result<Vec<u8>, ProtoError> {
    Ok(T::from_json(v, "")?.encode_to_vec())
}

fn from_pb<T: Convert + prost::Message + Default>(b: &[u8]) -> Result<Value, ProtoError> {
    T::decode(b)
        .map_err(|e| ProtoError::Decode(e.to_string()))?
        .to_json("")
}

fn codec(api_version: &str, kind: &str) -> Option<Codec> {
    macro_rules! c {
        ($t:ty) => {
            Some(Codec {
                to_pb: to_pb::<$t>,
                from_pb: from_pb::<$t>,
            })
        };
    }
    use k8s_pb::api::{apps::v1 as apps, autoscaling::v1 as autoscaling, core::v1 as core};
    match (api_version, kind) {
        ("apps/v1", "Deployment") => c!(apps::Deployment),
        ("apps/v1", "ReplicaSet") => c!(apps::ReplicaSet),
        ("v1", "ConfigMap") => c!(core::ConfigMap),
        ("v1", "Secret") => c!(core::Secret),
        ("v1", "Namespace") => c!(core::Namespace),
        ("autoscaling/v1", "Scale") => c!(autoscaling::Scale),
        ("v1" | "meta.k8s.io/v1", "Status") => c!(metav1::Status),
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => c!(metav1::DeleteOptions),
        ("meta.k8s.io/v1", "PartialObjectMetadata") => c!(metav1::PartialObjectMetadata),
        _ => None,
    }
}

/// Whether objects of this kind have a protobuf encoding here.
pub(crate) fn supports(api_version: &str, kind: &str) -> bool {
    codec(api_version, kind).is_some()
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let u = pbruntime::Unknown {
        type_meta: Some(pbruntime::TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = Vec::with_capacity(u.encoded_len() + MAGIC.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&u.encode_to_vec());
    out
}

/// An object (JSON with `apiVersion` and `kind`) in its enveloped protobuf form.
pub(crate) fn encode_object(v: &Value) -> Result<Vec<u8>, ProtoError> {
    let api_version = v["apiVersion"].as_str().unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or_default();
    let c = codec(api_version, kind)
        .ok_or_else(|| ProtoError::UnknownKind(format!("{api_version}, Kind={kind}")))?;
    Ok(envelope(api_version, kind, (c.to_pb)(v)?))
}

/// A list of objects of one kind (`XxxList`: ListMeta in field 1, the
/// items in field 2, as every list of the built-in kinds).
pub(crate) fn encode_list(
    api_version: &str,
    list_kind: &str,
    list_meta: &Value,
    items: &[Value],
) -> Result<Vec<u8>, ProtoError> {
    let item_kind = list_kind.strip_suffix("List").unwrap_or(list_kind);
    let c = codec(api_version, item_kind)
        .ok_or_else(|| ProtoError::UnknownKind(format!("{api_version}, Kind={list_kind}")))?;
    let meta = metav1::ListMeta::from_json(list_meta, "metadata")?;
    let mut raw = Vec::new();
    prost::encoding::message::encode(1, &meta, &mut raw);
    for (i, item) in items.iter().enumerate() {
        let b = (c.to_pb)(item).map_err(|e| prefix_error(e, &format!("items[{i}]")))?;
        prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, &mut raw);
        prost::encoding::encode_varint(b.len() as u64, &mut raw);
        raw.extend_from_slice(&b);
    }
    Ok(envelope(api_version, list_kind, raw))
}

/// A `meta.k8s.io/v1` `PartialObjectMetadataList` of the objects whose
/// `metadata` the iterator gives, encoded from them directly (no copy of
/// an object or of its metadata).
pub(crate) fn encode_metadata_list<'a>(
    list_meta: &Value,
    metadata: impl Iterator<Item = &'a Value>,
) -> Result<Vec<u8>, ProtoError> {
    let meta = metav1::ListMeta::from_json(list_meta, "metadata")?;
    let mut raw = Vec::new();
    prost::encoding::message::encode(1, &meta, &mut raw);
    for (i, m) in metadata.enumerate() {
        let item = metav1::PartialObjectMetadata {
            metadata: Some(metav1::ObjectMeta::from_json(
                m,
                &format!("items[{i}].metadata"),
            )?),
        };
        prost::encoding::message::encode(2, &item, &mut raw);
    }
    Ok(envelope("meta.k8s.io/v1", "PartialObjectMetadataList", raw))
}

fn prefix_error(e: ProtoError, prefix: &str) -> ProtoError {
    match e {
        ProtoError::Unsupported(f) => ProtoError::Unsupported(child(prefix, &f)),
        ProtoError::Invalid { field, message } => ProtoError::Invalid {
            field: child(prefix, &field),
            message,
        },
        other => other,
    }
}

/// An enveloped object to JSON, `apiVersion` and `kind` from the envelope.
pub(crate) fn decode_object(bytes: &[u8]) -> Result<Value, ProtoError> {
    let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or_else(|| {
        ProtoError::Decode("the body does not start with the k8s\\0 prefix".into())
    })?;
    let u = pbruntime::Unknown::decode(rest).map_err(|e| ProtoError::Decode(e.to_string()))?;
    let tm = u.type_meta.unwrap_or_default();
    let api_version = tm.api_version.unwrap_or_default();
    let kind = tm.kind.unwrap_or_default();
    if u.content_encoding.as_deref().is_some_and(|e| !e.is_empty()) {
        return Err(ProtoError::Decode(format!(
            "content encoding {:?} is not supported",
            u.content_encoding.unwrap_or_default()
        )));
    }
    let c = codec(&api_version, &kind)
        .ok_or_else(|| ProtoError::UnknownKind(format!("{api_version}, Kind={kind}")))?;
    let mut v = (c.from_pb)(u.raw.as_deref().unwrap_or_default())?;
    if let Some(m) = v.as_object_mut() {
        // apiVersion and kind first, as in JSON bodies
        let mut out = Map::new();
        out.insert("kind".into(), Value::String(kind));
        out.insert("apiVersion".into(), Value::String(api_version));
        out.append(m);
        v = Value::Object(out);
    }
    Ok(v)
}

/// One frame of a protobuf watch stream: the 4-byte big-endian length of
/// a `meta/v1` WatchEvent (not enveloped) whose object holds the enveloped
/// object.
pub(crate) fn watch_frame(event_type: &str, object: Vec<u8>) -> Vec<u8> {
    let ev = metav1::WatchEvent {
        r#type: Some(event_type.to_owned()),
        object: Some(pbruntime::RawExtension { raw: Some(object) }),
    };
    let body = ev.encode_to_vec();
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests;
