//! The serde [`Deserializer`] over protobuf bytes: a message is a JSON
//! object whose keys are its fields' JSON names (from the schema), in wire
//! order; `repeated` fields are arrays, maps are objects, and the
//! Kubernetes types with their own JSON form (Time, Quantity,
//! IntOrString...) are handed out as that form. Strings are borrowed from
//! the input, so a target that keeps `&str` or copies once allocates
//! nothing more; a field the target ignores (`IgnoredAny`: managedFields
//! in compact types) is skipped without being looked at.
//!
//! Zero values: a Go non-pointer scalar with `omitempty` (the schema's
//! `omit_zero`) that is zero is not handed out, nor is a Time at Go's zero
//! time (JSON `null`), so the result equals what the object's JSON
//! decodes to; every other field present on the wire is handed out, a
//! pointer set to zero (`spec.replicas: 0`) included.

mod fields;
mod seq;
pub(crate) mod special;
mod value;

use serde::de::{Deserialize, Deserializer, Visitor};

use crate::error::Error;
use crate::schema::Message;

pub(crate) use fields::Fields;
pub(crate) use special::raw_bytes as raw_field;
#[cfg(feature = "k8s-openapi")]
pub(crate) use value::utf8;

/// The newtype name under which a target asks for an ObjectMeta's raw
/// message (`deserialize_object_meta`, with the `k8s-openapi` feature).
pub(crate) const OBJECT_META_TOKEN: &str = "$kcontrol_proto::ObjectMeta";

/// How [`from_slice_with`] and [`from_object_with`](crate::from_object_with)
/// decode, beyond the schema. The default decodes every field.
///
/// ```
/// use kcontrol_proto::DecodeOptions;
///
/// let options = DecodeOptions::default().strip_managed_fields(true);
/// assert!(options.strips_managed_fields());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    strip_managed_fields: bool,
}

impl DecodeOptions {
    /// Skips `metadata.managedFields` unread: the object comes without
    /// them, as if they had been stripped after decoding, without the
    /// allocations of decoding them (the object's own metadata and that of
    /// nested templates; not inside lists or maps of messages, where
    /// Kubernetes objects carry none).
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = on;
        self
    }

    /// Whether `managedFields` are skipped.
    pub fn strips_managed_fields(&self) -> bool {
        self.strip_managed_fields
    }
}

/// Decodes the bytes of one `message` (not enveloped: a list item, the
/// `raw` of an envelope) into `T`.
pub fn from_slice<'de, T: Deserialize<'de>>(
    bytes: &'de [u8],
    message: &'static Message,
) -> Result<T, Error> {
    from_slice_with(bytes, message, DecodeOptions::default())
}

/// [`from_slice`] with `options`.
pub fn from_slice_with<'de, T: Deserialize<'de>>(
    bytes: &'de [u8],
    message: &'static Message,
    options: DecodeOptions,
) -> Result<T, Error> {
    T::deserialize(MessageDe {
        bytes,
        message,
        type_meta: None,
        options,
    })
}

/// A whole message as a serde [`Deserializer`]; `type_meta`
/// (`apiVersion`, `kind`) from an envelope is handed out first, as a JSON
/// object carries them.
pub(crate) struct MessageDe<'de> {
    pub(crate) bytes: &'de [u8],
    pub(crate) message: &'static Message,
    pub(crate) type_meta: Option<(&'de str, &'de str)>,
    pub(crate) options: DecodeOptions,
}

impl<'de> Deserializer<'de> for MessageDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(Fields::new(
            self.bytes,
            self.message,
            self.type_meta,
            self.options,
        ))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// A `&'static str` (a field's JSON name) or a borrowed string as a
/// serde value.
pub(crate) struct StrDe<'de>(pub(crate) &'de str);

impl<'de> Deserializer<'de> for StrDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(serde::de::value::BorrowedStrDeserializer::new(self.0))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}
