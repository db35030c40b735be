//! `meta/v1` ObjectMeta decoded straight into k8s-openapi's type, without
//! the serde walk: what a metadata-only informer decodes for every object
//! of a list. A target opts in with [`deserialize_object_meta`] (a serde
//! `deserialize_with`): this crate's Deserializer then hands it the
//! message's bytes, when it strips managedFields (as informers do); every
//! other Deserializer (JSON, or protobuf keeping managedFields) goes the
//! usual way. The result is the one the serde walk gives (a property test
//! holds them equal): zero values JSON leaves out are left out, a repeated
//! field or map met again after other fields replaces the first run, and
//! managedFields and unknown fields are skipped unread.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

use crate::de::special::{is_go_zero_time, time_seconds};
use crate::de::{utf8, OBJECT_META_TOKEN};
use crate::error::Error;
use crate::wire::{Reader, Value};

/// Deserializes a k8s-openapi `ObjectMeta`; from this crate's Deserializer
/// with managedFields stripped, by [`object_meta`] straight from the
/// bytes. For `#[serde(deserialize_with = "...")]` on a metadata field.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
///
/// #[derive(serde::Deserialize)]
/// struct MetadataOnly {
///     #[serde(deserialize_with = "kcontrol_proto::deserialize_object_meta")]
///     metadata: ObjectMeta,
/// }
///
/// let json: MetadataOnly = serde_json::from_str(r#"{"metadata":{"name":"a"}}"#).unwrap();
/// assert_eq!(json.metadata.name.as_deref(), Some("a"));
/// ```
pub fn deserialize_object_meta<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    deserializer.deserialize_newtype_struct(OBJECT_META_TOKEN, MetaVisitor)
}

struct MetaVisitor;

impl<'de> Visitor<'de> for MetaVisitor {
    type Value = ObjectMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ObjectMeta")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<ObjectMeta, D::Error> {
        ObjectMeta::deserialize(d)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectMeta, A::Error> {
        ObjectMeta::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    fn visit_borrowed_bytes<E: de::Error>(self, bytes: &'de [u8]) -> Result<ObjectMeta, E> {
        object_meta(bytes).map_err(E::custom)
    }
}

/// Decodes an ObjectMeta message, managedFields skipped unread.
///
/// Fails on malformed bytes, a string that is not UTF-8 or a value of the
/// wrong wire type, as the serde walk does.
pub fn object_meta(bytes: &[u8]) -> Result<ObjectMeta, Error> {
    let mut meta = ObjectMeta::default();
    let mut reader = Reader::new(bytes);
    let mut previous = 0;
    while let Some((number, value)) = reader.field()? {
        let continues_run = number == previous;
        previous = number;
        set_field(&mut meta, number, value, continues_run).map_err(|e| e.in_field(name(number)))?;
    }
    Ok(meta)
}

/// The JSON name of ObjectMeta field `number` (for errors).
fn name(number: u32) -> &'static str {
    match number {
        1 => "name",
        2 => "generateName",
        3 => "namespace",
        4 => "selfLink",
        5 => "uid",
        6 => "resourceVersion",
        7 => "generation",
        8 => "creationTimestamp",
        9 => "deletionTimestamp",
        10 => "deletionGracePeriodSeconds",
        11 => "labels",
        12 => "annotations",
        13 => "ownerReferences",
        14 => "finalizers",
        _ => "",
    }
}

/// Sets field `number` from `value`; `continues_run`: the field before had
/// the same number (a repeated field or map goes on, else starts over).
fn set_field(
    meta: &mut ObjectMeta,
    number: u32,
    value: Value<'_>,
    continues_run: bool,
) -> Result<(), Error> {
    match number {
        1 => omitted_string(&mut meta.name, value),
        2 => omitted_string(&mut meta.generate_name, value),
        3 => omitted_string(&mut meta.namespace, value),
        4 => omitted_string(&mut meta.self_link, value),
        5 => omitted_string(&mut meta.uid, value),
        6 => omitted_string(&mut meta.resource_version, value),
        7 if value.is_zero() => Ok(()),
        7 => int64(value).map(|v| meta.generation = Some(v)),
        8 => time(&mut meta.creation_timestamp, value),
        9 => time(&mut meta.deletion_timestamp, value),
        10 => int64(value).map(|v| meta.deletion_grace_period_seconds = Some(v)),
        11 => map_entry(run(&mut meta.labels, continues_run), value),
        12 => map_entry(run(&mut meta.annotations, continues_run), value),
        13 => {
            let reference = owner_reference(value)?;
            run(&mut meta.owner_references, continues_run).push(reference);
            Ok(())
        }
        14 => {
            let finalizer = string(value)?.to_owned();
            run(&mut meta.finalizers, continues_run).push(finalizer);
            Ok(())
        }
        _ => Ok(()), // managedFields (17) and fields this schema does not know
    }
}

/// The collection a run of `field` fills: the one it has, or a new one.
fn run<T: Default>(field: &mut Option<T>, continues_run: bool) -> &mut T {
    if !continues_run {
        *field = None;
    }
    field.get_or_insert_with(T::default)
}

/// A `string` field: UTF-8 bytes.
fn string<'de>(value: Value<'de>) -> Result<&'de str, Error> {
    match value {
        Value::Len(bytes) => utf8(bytes),
        other => Err(wrong(other, "string")),
    }
}

/// A Go `string` with `omitempty`: protobuf carries it even when empty,
/// JSON leaves it out then.
fn omitted_string(field: &mut Option<String>, value: Value<'_>) -> Result<(), Error> {
    if !value.is_zero() {
        *field = Some(string(value)?.to_owned());
    }
    Ok(())
}

/// An `int64` field.
fn int64(value: Value<'_>) -> Result<i64, Error> {
    match value {
        Value::Varint(v) => Ok(v as i64),
        other => Err(wrong(other, "int64")),
    }
}

/// A `bool` field.
fn boolean(value: Value<'_>) -> Result<bool, Error> {
    match value {
        Value::Varint(v) => Ok(v != 0),
        other => Err(wrong(other, "bool")),
    }
}

/// A Time field: Go's zero time is JSON `null` (left out).
fn time(field: &mut Option<Time>, value: Value<'_>) -> Result<(), Error> {
    let Value::Len(bytes) = value else {
        return Err(wrong(value, "Time"));
    };
    if is_go_zero_time(bytes)? {
        return Ok(());
    }
    let timestamp = Timestamp::from_second(time_seconds(bytes)?)
        .map_err(|e| Error::new(format!("invalid time: {e}")))?;
    *field = Some(Time(timestamp));
    Ok(())
}

/// One `map<string, string>` entry: key 1, value 2 (absent: empty).
fn map_entry(map: &mut BTreeMap<String, String>, entry: Value<'_>) -> Result<(), Error> {
    let Value::Len(bytes) = entry else {
        return Err(Error::wire("a map entry is not length-delimited"));
    };
    let mut reader = Reader::new(bytes);
    let (mut key, mut value) = ("", "");
    while let Some((number, v)) = reader.field()? {
        match (number, v) {
            (1, Value::Len(k)) => key = utf8(k)?,
            (1, _) => return Err(Error::wire("a map key is not a string")),
            (2, v) => value = string(v)?,
            _ => {}
        }
    }
    map.insert(key.to_owned(), value.to_owned());
    Ok(())
}

/// An OwnerReference message (a missing string is empty).
fn owner_reference(value: Value<'_>) -> Result<OwnerReference, Error> {
    let Value::Len(bytes) = value else {
        return Err(wrong(value, "OwnerReference"));
    };
    let (mut kind, mut name, mut uid, mut api_version) = (None, None, None, None);
    let (mut controller, mut block_owner_deletion) = (None, None);
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        match number {
            1 => kind = Some(string(value)?),
            3 => name = Some(string(value)?),
            4 => uid = Some(string(value)?),
            5 => api_version = Some(string(value)?),
            6 => controller = Some(boolean(value)?),
            7 => block_owner_deletion = Some(boolean(value)?),
            _ => {}
        }
    }
    // k8s-openapi's own decoding leaves a missing string empty
    let text = |field: Option<&str>| field.unwrap_or_default().to_owned();
    Ok(OwnerReference {
        api_version: text(api_version),
        kind: text(kind),
        name: text(name),
        uid: text(uid),
        controller,
        block_owner_deletion,
    })
}

/// A value of the wrong wire type for `expected`.
#[cold]
fn wrong(value: Value<'_>, expected: &str) -> Error {
    Error::wire(format!("a {value:?} value where a {expected} was expected"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::tables::APIMACHINERY__PKG__APIS__META__V1__OBJECT_META as SCHEMA;

    /// The decoder knows every field of the generated schema (a field
    /// Kubernetes adds to ObjectMeta fails here until it is decoded).
    #[test]
    fn every_field_of_the_schema_is_decoded() {
        for field in SCHEMA.fields {
            if field.json != "managedFields" {
                assert_eq!(name(field.number), field.json, "field {}", field.number);
            }
        }
        assert_eq!(SCHEMA.fields.len(), 15);
    }

    #[test]
    fn a_wrong_wire_type_names_its_field() {
        // name (1) as a varint
        let e = object_meta(&[0x08, 0x05]).unwrap_err();
        assert_eq!(e.path(), "name");
        assert!(e.message().contains("string"), "{e}");
        // a zero varint where a string is: Go's JSON leaves it out
        assert_eq!(object_meta(&[0x08, 0x00]).unwrap(), ObjectMeta::default());
    }
}
