//! Wire types of list, watch and delete answers: [`ObjectList`],
//! [`WatchEvent`] (with [`Bookmark`]), [`DeleteResponse`]. They decode
//! straight from the response bytes into the caller's type (no intermediate
//! `serde_json::Value`), and serialize back to the same JSON, so an
//! in-process test server can use them too.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::serde_util::null_as_empty;
use crate::status::Status;

/// The annotation on the bookmark that ends the initial events of a
/// `sendInitialEvents` watch.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// A page of a list answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "K: Deserialize<'de>", serialize = "K: Serialize")
)]
pub struct ObjectList<K> {
    /// `apiVersion` of the list (`v1`, `apps/v1`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` of the list (`ConfigMapList`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `resourceVersion`, `continue`, `remainingItemCount`.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The objects (a `null` reads as empty).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub items: Vec<K>,
}

impl<K> Default for ObjectList<K> {
    fn default() -> Self {
        Self {
            api_version: None,
            kind: None,
            metadata: ListMeta::default(),
            items: Vec::new(),
        }
    }
}

impl<K> ObjectList<K> {
    /// The list's resourceVersion: where a following watch starts.
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata
            .resource_version
            .as_deref()
            .filter(|v| !v.is_empty())
    }

    /// The token of the next page; `None` on the last page.
    pub fn continue_token(&self) -> Option<&str> {
        self.metadata.continue_.as_deref().filter(|c| !c.is_empty())
    }

    /// How many items the remaining pages hold, when the server says.
    pub fn remaining_item_count(&self) -> Option<i64> {
        self.metadata.remaining_item_count
    }

    /// Iterates the objects.
    pub fn iter(&self) -> std::slice::Iter<'_, K> {
        self.items.iter()
    }
}

impl<K> IntoIterator for ObjectList<K> {
    type Item = K;
    type IntoIter = std::vec::IntoIter<K>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

/// The metadata a bookmark carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BookmarkMeta {
    /// The resourceVersion the watch has reached.
    #[serde(default)]
    pub resource_version: String,
    /// Annotations (`k8s.io/initial-events-end`).
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
}

/// A `BOOKMARK` event's object: only `apiVersion`, `kind` and the metadata
/// below are meaningful, so it is not decoded as the watched type (whose
/// required fields a bookmark lacks).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bookmark {
    /// `apiVersion` of the watched resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` of the watched resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The resourceVersion and annotations.
    #[serde(default)]
    pub metadata: BookmarkMeta,
}

impl Bookmark {
    /// The resourceVersion the watch has reached.
    pub fn resource_version(&self) -> &str {
        &self.metadata.resource_version
    }

    /// Whether this bookmark ends the initial events of a
    /// `sendInitialEvents` watch (`k8s.io/initial-events-end: "true"`).
    pub fn is_initial_events_end(&self) -> bool {
        self.metadata
            .annotations
            .get(INITIAL_EVENTS_END_ANNOTATION)
            .map(String::as_str)
            == Some("true")
    }
}

/// One event of a watch stream.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<K> {
    /// `ADDED`.
    Added(K),
    /// `MODIFIED`.
    Modified(K),
    /// `DELETED`: the object's last state.
    Deleted(K),
    /// `BOOKMARK`: progress without a change.
    Bookmark(Bookmark),
    /// `ERROR`: the server ends the watch with this `Status` (a 410
    /// `Expired`/`Gone` means: relist). Check it with
    /// [`Status::is_expired`] or turn it into an [`Error`](crate::Error) with `.into()`.
    Error(Status),
    /// An event type this client does not know (a newer server's): its
    /// `object` is not decoded, only its `metadata.resourceVersion` is kept.
    /// client-go logs such an event and goes on; so does the reflector.
    Unknown {
        /// The `type` as sent.
        event_type: String,
        /// The object's `metadata.resourceVersion`, if it had one.
        resource_version: Option<String>,
    },
}

impl<K> WatchEvent<K> {
    /// The wire name of the event type.
    pub fn type_name(&self) -> &str {
        match self {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
            WatchEvent::Unknown { event_type, .. } => event_type,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
    Unknown(String),
}

/// Just enough of an unknown event's object to find its version.
#[derive(Deserialize)]
struct VersionOnly {
    #[serde(default)]
    metadata: Option<VersionOnlyMeta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionOnlyMeta {
    #[serde(default)]
    resource_version: Option<String>,
}

impl From<&str> for EventType {
    fn from(v: &str) -> Self {
        match v {
            "ADDED" => EventType::Added,
            "MODIFIED" => EventType::Modified,
            "DELETED" => EventType::Deleted,
            "BOOKMARK" => EventType::Bookmark,
            "ERROR" => EventType::Error,
            other => EventType::Unknown(other.to_owned()),
        }
    }
}

/// Decodes a protobuf watch frame (a `meta/v1` WatchEvent whose object is
/// enveloped) into an event, the object by the schema of the kind its
/// envelope names.
pub(crate) fn decode_protobuf_event<K: DeserializeOwned>(
    frame: &[u8],
    options: kcontrol_proto::DecodeOptions,
) -> Result<WatchEvent<K>, kcontrol_proto::Error> {
    use kcontrol_proto::from_object_with;
    let event = kcontrol_proto::watch::event(frame)?;
    let object = event.object;
    Ok(match EventType::from(event.event_type) {
        EventType::Added => WatchEvent::Added(from_object_with(object, options)?),
        EventType::Modified => WatchEvent::Modified(from_object_with(object, options)?),
        EventType::Deleted => WatchEvent::Deleted(from_object_with(object, options)?),
        EventType::Bookmark => WatchEvent::Bookmark(from_object_with(object, options)?),
        EventType::Error => WatchEvent::Error(from_object_with(object, options)?),
        EventType::Unknown(event_type) => WatchEvent::Unknown {
            event_type,
            // an object of a kind without a schema keeps no version
            resource_version: from_object_with::<VersionOnly>(object, options)
                .ok()
                .and_then(|v| v.metadata)
                .and_then(|m| m.resource_version),
        },
    })
}

impl<'de> Deserialize<'de> for EventType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = EventType;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a watch event type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EventType, E> {
                Ok(EventType::from(v))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// The keys of a watch event, read without allocating.
enum EventField {
    Type,
    Object,
    Other,
}

impl<'de> Deserialize<'de> for EventField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = EventField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EventField, E> {
                Ok(match v {
                    "type" => EventField::Type,
                    "object" => EventField::Object,
                    _ => EventField::Other,
                })
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

/// Decodes an event's `object` once its type is known.
struct ObjectSeed<K> {
    event_type: EventType,
    _k: PhantomData<fn() -> K>,
}

impl<'de, K: Deserialize<'de>> DeserializeSeed<'de> for ObjectSeed<K> {
    type Value = WatchEvent<K>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(match self.event_type {
            EventType::Added => WatchEvent::Added(K::deserialize(d)?),
            EventType::Modified => WatchEvent::Modified(K::deserialize(d)?),
            EventType::Deleted => WatchEvent::Deleted(K::deserialize(d)?),
            EventType::Bookmark => WatchEvent::Bookmark(Bookmark::deserialize(d)?),
            EventType::Error => WatchEvent::Error(Status::deserialize(d)?),
            EventType::Unknown(event_type) => WatchEvent::Unknown {
                event_type,
                resource_version: VersionOnly::deserialize(d)?
                    .metadata
                    .and_then(|m| m.resource_version),
            },
        })
    }
}

/// Decoding reads `type` first when the server sends it first (kube-apiserver
/// does) and then decodes `object` straight into `K`; if `object` comes
/// first, it is kept as raw JSON and decoded once `type` is known.
/// Only JSON input is supported.
impl<'de, K: DeserializeOwned> Deserialize<'de> for WatchEvent<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventVisitor<K>(PhantomData<fn() -> K>);

        impl<'de, K: DeserializeOwned> Visitor<'de> for EventVisitor<K> {
            type Value = WatchEvent<K>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a watch event {\"type\": ..., \"object\": ...}")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut event_type: Option<EventType> = None;
                let mut event: Option<WatchEvent<K>> = None;
                let mut raw: Option<Box<RawValue>> = None;
                while let Some(key) = map.next_key::<EventField>()? {
                    match key {
                        EventField::Type => {
                            if event_type.is_some() {
                                return Err(de::Error::duplicate_field("type"));
                            }
                            event_type = Some(map.next_value()?);
                        }
                        EventField::Object => {
                            if event.is_some() || raw.is_some() {
                                return Err(de::Error::duplicate_field("object"));
                            }
                            match event_type.clone() {
                                Some(t) => {
                                    event = Some(map.next_value_seed(ObjectSeed {
                                        event_type: t,
                                        _k: PhantomData,
                                    })?)
                                }
                                None => raw = Some(map.next_value()?),
                            }
                        }
                        EventField::Other => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                if let Some(event) = event {
                    return Ok(event);
                }
                let event_type = event_type.ok_or_else(|| de::Error::missing_field("type"))?;
                let raw = raw.ok_or_else(|| de::Error::missing_field("object"))?;
                let mut inner = serde_json::Deserializer::from_str(raw.get());
                ObjectSeed {
                    event_type,
                    _k: PhantomData,
                }
                .deserialize(&mut inner)
                .map_err(de::Error::custom)
            }
        }

        deserializer.deserialize_map(EventVisitor(PhantomData))
    }
}

impl<K: Serialize> Serialize for WatchEvent<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("type", self.type_name())?;
        match self {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                map.serialize_entry("object", o)?
            }
            WatchEvent::Bookmark(b) => map.serialize_entry("object", b)?,
            WatchEvent::Error(s) => map.serialize_entry("object", &StatusWithKind(s))?,
            WatchEvent::Unknown {
                resource_version, ..
            } => map.serialize_entry(
                "object",
                &serde_json::json!({"metadata": {"resourceVersion": resource_version}}),
            )?,
        }
        map.end()
    }
}

/// A `Status` serialized with its `kind` and `apiVersion`, as the server
/// sends it.
pub(crate) struct StatusWithKind<'a>(pub(crate) &'a Status);

impl Serialize for StatusWithKind<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Full<'a> {
            kind: &'static str,
            api_version: &'static str,
            metadata: serde_json::Map<String, serde_json::Value>,
            #[serde(flatten)]
            status: &'a Status,
        }
        Full {
            kind: "Status",
            api_version: "v1",
            metadata: serde_json::Map::new(),
            status: self.0,
        }
        .serialize(serializer)
    }
}

/// The answer to a delete: the object while its deletion is still in
/// progress (finalizers, graceful deletion), or a `Status` once it is gone.
#[derive(Clone, Debug, PartialEq)]
// `K` is a whole object, usually larger than a `Status`; the lint cannot see that.
#[allow(clippy::large_enum_variant)]
pub enum DeleteResponse<K> {
    /// Deletion started; the object still exists (with a deletionTimestamp).
    Pending(K),
    /// The object is gone.
    Deleted(Status),
}

/// Peeks at the `kind` of a JSON object without decoding the rest.
#[derive(Deserialize)]
pub(crate) struct KindOnly<'a> {
    #[serde(default, borrow)]
    pub(crate) kind: Option<std::borrow::Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn decodes_every_event_type() {
        let added: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#,
        )
        .unwrap();
        assert!(
            matches!(&added, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("a"))
        );
        let bookmark: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
        )
        .unwrap();
        let WatchEvent::Bookmark(b) = bookmark else {
            panic!("not a bookmark")
        };
        assert_eq!(b.resource_version(), "12");
        assert!(b.is_initial_events_end());
        let error: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#,
        )
        .unwrap();
        assert!(matches!(&error, WatchEvent::Error(s) if s.is_expired()));
    }

    #[test]
    fn object_before_type_still_decodes() {
        let e: WatchEvent<ConfigMap> =
            serde_json::from_str(r#"{"object":{"metadata":{"name":"b"}},"type":"DELETED"}"#)
                .unwrap();
        assert!(matches!(e, WatchEvent::Deleted(cm) if cm.metadata.name.as_deref() == Some("b")));
    }

    #[test]
    fn unknown_types_decode_with_their_version() {
        let e: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"type":"SOMETHING","object":{"metadata":{"resourceVersion":"5"}}}"#,
        )
        .unwrap();
        assert_eq!(e.type_name(), "SOMETHING");
        assert!(matches!(
            e,
            WatchEvent::Unknown { resource_version: Some(v), .. } if v == "5"
        ));
    }

    #[test]
    fn rejects_bad_events() {
        for bad in [
            r#"{"type":"SOMETHING","object":{"metadata":5}}"#,
            r#"{"type":"ADDED"}"#,
            r#"{"object":{}}"#,
            r#"{"type":"ADDED","object":{"metadata":5}}"#,
            r#"{"type":"ADDED","type":"ADDED","object":{}}"#,
            r#"[]"#,
        ] {
            assert!(
                serde_json::from_str::<WatchEvent<ConfigMap>>(bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn round_trips() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("x".into());
        let events = vec![
            WatchEvent::Added(cm.clone()),
            WatchEvent::Modified(cm.clone()),
            WatchEvent::Deleted(cm),
            WatchEvent::Bookmark(Bookmark {
                metadata: BookmarkMeta {
                    resource_version: "3".into(),
                    ..Default::default()
                },
                ..Default::default()
            }),
            WatchEvent::Error(Status::failure(410, "Expired", "gone")),
        ];
        for event in events {
            let text = serde_json::to_string(&event).unwrap();
            let back: WatchEvent<ConfigMap> = serde_json::from_str(&text).unwrap();
            assert_eq!(back, event, "{text}");
        }
    }

    #[test]
    fn list_metadata_accessors() {
        let list: ObjectList<ConfigMap> = serde_json::from_str(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"tok","remainingItemCount":4},"items":null}"#,
        )
        .unwrap();
        assert_eq!(list.resource_version(), Some("9"));
        assert_eq!(list.continue_token(), Some("tok"));
        assert_eq!(list.remaining_item_count(), Some(4));
        assert!(list.items.is_empty());
        let last: ObjectList<ConfigMap> =
            serde_json::from_str(r#"{"metadata":{"continue":""},"items":[]}"#).unwrap();
        assert_eq!(last.continue_token(), None);
    }
}
