//! Kubernetes protobuf on the wire (`application/vnd.kubernetes.protobuf`),
//! decoded straight into any serde type: the envelope (`k8s\0` +
//! `runtime.Unknown`), list bodies cut item by item as they arrive
//! ([`ListDecoder`]), watch streams (4-byte length + `meta/v1` WatchEvent:
//! [`watch`]), and a serde `Deserializer` over the wire format driven by a
//! schema per message ([`from_object`], [`from_slice`]).
//!
//! The schema (field number → JSON name, type, nested message, and the
//! Kubernetes types with their own JSON form: Time, MicroTime, Duration,
//! Quantity, IntOrString, RawExtension, FieldsV1) is generated for every
//! message of the `k8s-pb` crate by `scripts/proto-tables`; [`kind`] says
//! whether a kind has one (a client asks protobuf only for those). The
//! decoder hands a target exactly what the object's JSON would: strings
//! are borrowed from the input, fields the target ignores are skipped
//! without being read, and Go's zero values that JSON leaves out
//! (`generation: 0`, an empty `generateName`, a zero `creationTimestamp`)
//! are not handed out, while a pointer set to zero (`spec.replicas: 0`) is.
//!
//! Nothing here panics on any input: malformed bytes are an [`Error`].
//!
//! ```
//! use kcontrol_proto::{from_object, kind};
//!
//! // a ConfigMap as kube-apiserver sends it: k8s\0, then runtime.Unknown
//! // { typeMeta { apiVersion: "v1", kind: "ConfigMap" }, raw: ConfigMap {
//! //   metadata { name: "a", generation: 0 }, data { "k": "v" } } }
//! let raw = [0x0a, 0x05, 0x0a, 0x01, b'a', 0x38, 0x00,
//!            0x12, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v'];
//! let mut body = b"k8s\0".to_vec();
//! body.extend([0x0a, 0x0f, 0x0a, 0x02, b'v', b'1', 0x12, 0x09]);
//! body.extend(b"ConfigMap");
//! body.extend([0x12, raw.len() as u8]);
//! body.extend(raw);
//! let cm: serde_json::Value = from_object(&body)?;
//! assert_eq!(cm, serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "a"}, "data": {"k": "v"}}));
//! assert!(kind("v1", "ConfigMap").is_some());
//! # Ok::<(), kcontrol_proto::Error>(())
//! ```

mod de;
mod envelope;
mod error;
pub mod list;
#[cfg(feature = "k8s-openapi")]
mod meta;
mod schema;
mod tables;
pub mod watch;
mod wire;

pub use de::{from_slice, from_slice_with, DecodeOptions};
pub use envelope::{envelope, from_object, from_object_with, from_raw, Envelope, MAGIC};
pub use error::Error;
pub use list::{ListDecoder, ListPart};
#[cfg(feature = "k8s-openapi")]
pub use meta::{deserialize_object_meta, object_meta};
pub use schema::{kind, Message};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The `;stream=watch` parameter of a protobuf watch answer.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
