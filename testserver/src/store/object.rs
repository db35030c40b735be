//! One stored object: its JSON value, its encoded bytes (shared with the
//! watch frame that announced it, so lists and watches never re-encode),
//! its resourceVersion and the labels selectors match against.

use crate::meta;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;
use std::collections::BTreeMap;

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl WatchEventType {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// An object as stored, immutable and shared.
#[derive(Debug)]
pub struct StoredObject {
    value: Value,
    json: Bytes,
    rv: u64,
    key: String,
    labels: BTreeMap<String, String>,
}

impl StoredObject {
    /// The object.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// Its compact JSON encoding, exactly as lists and watches send it.
    pub fn json(&self) -> &Bytes {
        &self.json
    }

    /// `metadata.resourceVersion` as a number.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// Storage key: `namespace/name`, or `name` when cluster-scoped.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        meta::name(&self.value)
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        meta::namespace(&self.value)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        meta::meta_str(&self.value, "uid")
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }
}

/// Encodes `value` (whose resourceVersion is already `rv`) as a watch
/// frame of type `kind` and returns the object sharing the frame's bytes.
pub(crate) fn encode(
    kind: WatchEventType,
    value: Value,
    rv: u64,
    key: String,
) -> Result<(StoredObject, Bytes), serde_json::Error> {
    let body = serde_json::to_vec(&value)?;
    let prefix = format!("{{\"type\":\"{}\",\"object\":", kind.as_str());
    let mut buf = BytesMut::with_capacity(prefix.len() + body.len() + 2);
    buf.put_slice(prefix.as_bytes());
    buf.put_slice(&body);
    buf.put_slice(b"}\n");
    let frame = buf.freeze();
    let json = frame.slice(prefix.len()..prefix.len() + body.len());
    let labels = meta::labels(&value);
    Ok((
        StoredObject {
            value,
            json,
            rv,
            key,
            labels,
        },
        frame,
    ))
}

/// Builds an object that is not stored (dry runs, tests).
pub(crate) fn from_value(
    value: Value,
    rv: u64,
    key: String,
) -> Result<StoredObject, serde_json::Error> {
    encode(WatchEventType::Added, value, rv, key).map(|(o, _)| o)
}

impl StoredObject {
    /// An object that is not stored (dry-run answers).
    pub(crate) fn detached(value: Value, rv: u64, key: String) -> Result<Self, serde_json::Error> {
        from_value(value, rv, key)
    }
}
