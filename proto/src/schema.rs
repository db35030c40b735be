//! The schema the Deserializer is driven by: per protobuf message, each
//! field's number, JSON name and type ([`Ty`]), and the index of the kinds
//! that have one ([`kind`]). The tables themselves (`tables.rs`) are
//! generated from k8s-pb, k8s-openapi and the Go API types by
//! `scripts/proto-tables`.

use crate::tables::KINDS;

/// One protobuf message: its fields sorted by number.
#[derive(Debug)]
pub struct Message {
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [Field],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub(crate) struct Field {
    /// The protobuf field number.
    pub(crate) number: u32,
    /// The JSON name (empty for an inlined field).
    pub(crate) json: &'static str,
    /// The value type (of each element, when repeated).
    pub(crate) ty: Ty,
    /// `repeated` (a JSON array); maps are [`Ty::Map`], not repeated.
    pub(crate) repeated: bool,
    /// A Go non-pointer scalar with `omitempty`: protobuf always carries it,
    /// JSON leaves it out when zero, so a zero value is not handed out.
    pub(crate) omit_zero: bool,
    /// An embedded Go struct without a JSON name: its fields are the
    /// parent's in JSON (`Probe.handler`).
    pub(crate) inline: bool,
}

/// The type of a field's value, as JSON sees it. (The generated tables
/// use the variants the messages reachable from a kind need.)
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) enum Ty {
    /// `string`: a JSON string, borrowed from the input.
    String,
    /// `bytes`: a base64 JSON string.
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `double`.
    Double,
    /// A nested message: a JSON object.
    Message(&'static Message),
    /// `map<string, V>`: a JSON object.
    Map(&'static Ty),
    /// A message that is a Go slice (`Verbs`, `ExtraValue`): a JSON array of
    /// its one repeated field.
    Array(&'static Ty),
    /// `meta/v1` Time: RFC 3339, seconds.
    Time,
    /// `meta/v1` MicroTime: RFC 3339, microseconds.
    MicroTime,
    /// `meta/v1` Duration: Go's duration string (`1m30s`).
    Duration,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `RawExtension`, `FieldsV1`, apiextensions `JSON`: raw JSON bytes
    /// (or an enveloped protobuf object).
    RawJson,
    /// A type whose JSON form is not mapped (never in a kind of [`KINDS`]).
    Unsupported,
}

impl Message {
    /// The message's name (`ConfigMap`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The field with protobuf number `number`.
    #[inline]
    pub(crate) fn field(&self, number: u32) -> Option<&'static Field> {
        // fields are numbered 1, 2, 3... in most messages: try the slot first
        let guess = (number as usize).wrapping_sub(1);
        match self.fields.get(guess) {
            Some(f) if f.number == number => Some(f),
            _ => self
                .fields
                .binary_search_by_key(&number, |f| f.number)
                .ok()
                .and_then(|i| self.fields.get(i)),
        }
    }

    /// The item message of a list message (field 2, repeated, as in every
    /// Kubernetes list).
    pub fn list_item(&self) -> Option<&'static Message> {
        match self.field(2) {
            Some(Field {
                ty: Ty::Message(m),
                repeated: true,
                ..
            }) => Some(m),
            _ => None,
        }
    }

    /// The list metadata message of a list message (field 1).
    pub(crate) fn list_meta(&self) -> Option<&'static Message> {
        match self.field(1) {
            Some(Field {
                ty: Ty::Message(m),
                repeated: false,
                ..
            }) => Some(m),
            _ => None,
        }
    }
}

/// The schema of objects of `kind` in `api_version` (`"v1"`,
/// `"ConfigMap"`; lists too: `"ConfigMapList"`), when this crate has a
/// complete one; `None` otherwise (custom resources, kinds whose JSON form
/// is not mapped): such objects are asked for in JSON.
pub fn kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    KINDS
        .binary_search_by(|(v, k, _)| (*v, *k).cmp(&(api_version, kind)))
        .ok()
        .and_then(|i| KINDS.get(i))
        .map(|(_, _, m)| *m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_sorted_and_found() {
        assert!(KINDS
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
        assert_eq!(
            kind("v1", "ConfigMap").map(Message::name),
            Some("ConfigMap")
        );
        assert_eq!(
            kind("v1", "ConfigMapList")
                .and_then(Message::list_item)
                .map(Message::name),
            Some("ConfigMap")
        );
        assert_eq!(
            kind("apps/v1", "Deployment").map(Message::name),
            Some("Deployment")
        );
        assert_eq!(
            kind("meta.k8s.io/v1", "PartialObjectMetadataList")
                .and_then(Message::list_item)
                .map(Message::name),
            Some("PartialObjectMetadata")
        );
        assert_eq!(kind("v1", "Status").map(Message::name), Some("Status"));
        assert!(kind("samplecontroller.k8s.io/v1alpha1", "Foo").is_none());
        // a union JSON form this decoder does not map: JSON only
        assert!(kind("apiextensions.k8s.io/v1", "CustomResourceDefinition").is_none());
    }

    #[test]
    fn every_field_is_sorted_and_named() {
        for (_, _, m) in KINDS {
            let mut seen = std::collections::HashSet::new();
            check(m, &mut seen);
        }
        fn check(m: &'static Message, seen: &mut std::collections::HashSet<*const Message>) {
            if !seen.insert(m) {
                return;
            }
            assert!(
                m.fields.windows(2).all(|w| w[0].number < w[1].number),
                "{}",
                m.name
            );
            for f in m.fields {
                assert!(f.inline || !f.json.is_empty(), "{}.{}", m.name, f.number);
                assert!(m.field(f.number).is_some());
                let mut ty = &f.ty;
                while let Ty::Map(t) | Ty::Array(t) = ty {
                    ty = t;
                }
                assert!(!matches!(ty, Ty::Unsupported), "{}.{}", m.name, f.json);
                if let Ty::Message(inner) = ty {
                    check(inner, seen);
                }
            }
        }
    }
}
