//! [`ValueDe`]: a field's value, which for a `repeated` field or a map is
//! the run of consecutive wire fields with its number; [`Single`]: one wire
//! value as the JSON its type has.

use base64::Engine as _;
use serde::de::{Deserializer, Visitor};

use super::seq::{ArrayItems, MapEntries, Repeated};
use super::special;
use super::{DecodeOptions, Fields, StrDe, OBJECT_META_TOKEN};
use crate::error::Error;
use crate::schema::{Field, Ty};
use crate::tables::APIMACHINERY__PKG__APIS__META__V1__OBJECT_META as OBJECT_META;
use crate::wire::{Reader, Value};

/// A field's value; a repeated field or map goes on in `run`.
pub(crate) struct ValueDe<'a, 'de> {
    pub(crate) field: &'static Field,
    pub(crate) value: Value<'de>,
    pub(crate) run: &'a mut Reader<'de>,
    pub(crate) options: DecodeOptions,
}

impl<'de> ValueDe<'_, 'de> {
    fn is_run(&self) -> bool {
        self.field.repeated || matches!(self.field.ty, Ty::Map(_))
    }

    /// Skips the rest of a run (a field the target ignores).
    fn skip_run(&mut self) -> Result<(), Error> {
        if self.is_run() {
            while self.run.peek_number() == Some(self.field.number) {
                self.run.field()?;
            }
        }
        Ok(())
    }
}

impl<'de> Deserializer<'de> for ValueDe<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.field.repeated {
            return visitor.visit_seq(Repeated::new(self.field, self.value, self.run));
        }
        if let Ty::Map(value_ty) = &self.field.ty {
            return visitor.visit_map(MapEntries::new(self.field, value_ty, self.value, self.run));
        }
        Single::with_options(&self.field.ty, self.value, self.options).deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        // an ObjectMeta target that decodes the raw message itself
        // (`deserialize_object_meta`), when managedFields are stripped
        match (&self.field.ty, self.value) {
            (Ty::Message(m), Value::Len(bytes))
                if name == OBJECT_META_TOKEN
                    && self.options.strips_managed_fields()
                    && !self.is_run()
                    && std::ptr::eq(*m, &OBJECT_META) =>
            {
                visitor.visit_borrowed_bytes(bytes)
            }
            _ => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if self.is_run() {
            return self.deserialize_any(visitor);
        }
        Single::with_options(&self.field.ty, self.value, self.options)
            .deserialize_enum(name, variants, visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, Error> {
        self.skip_run()?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// One wire value of type `ty`.
pub(crate) struct Single<'de> {
    ty: &'static Ty,
    value: Value<'de>,
    options: DecodeOptions,
}

impl<'de> Single<'de> {
    /// An element of a list or map (decoded with the default options).
    pub(crate) fn new(ty: &'static Ty, value: Value<'de>) -> Self {
        Self::with_options(ty, value, DecodeOptions::default())
    }

    /// A singular field's value, a message's fields decoded with `options`.
    pub(crate) fn with_options(ty: &'static Ty, value: Value<'de>, options: DecodeOptions) -> Self {
        Self { ty, value, options }
    }

    fn wrong(&self) -> Error {
        Error::wire(format!(
            "a {:?} value where a {} was expected",
            self.value,
            special::ty_name(self.ty)
        ))
    }

    /// The value of a message-typed special (Time, Quantity...).
    fn special<V: Visitor<'de>>(self, bytes: &'de [u8], visitor: V) -> Result<V::Value, Error> {
        match self.ty {
            Ty::Time => visitor.visit_str(special::time(bytes, false)?.as_str()),
            Ty::MicroTime => visitor.visit_str(special::time(bytes, true)?.as_str()),
            Ty::Duration => visitor.visit_str(&special::duration(bytes)?),
            Ty::Quantity => visitor.visit_borrowed_str(special::quantity(bytes)?),
            Ty::IntOrString => match special::int_or_string(bytes)? {
                Ok(n) => visitor.visit_i32(n),
                Err(s) => visitor.visit_borrowed_str(s),
            },
            Ty::RawJson => special::raw_json(bytes, visitor),
            Ty::Message(m) => visitor.visit_map(Fields::new(bytes, m, None, self.options)),
            Ty::Array(elem) => visitor.visit_seq(ArrayItems::new(elem, bytes)),
            _ => Err(self.wrong()),
        }
    }
}

/// The string of a `string` field.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(bytes).map_err(|e| Error::new(format!("a string field is not UTF-8: {e}")))
}

impl<'de> Deserializer<'de> for Single<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match (self.ty, self.value) {
            (Ty::String, Value::Len(b)) => visitor.visit_borrowed_str(utf8(b)?),
            (Ty::Bytes, Value::Len(b)) => {
                visitor.visit_string(base64::engine::general_purpose::STANDARD.encode(b))
            }
            (Ty::Bool, Value::Varint(v)) => visitor.visit_bool(v != 0),
            // int32 is sign-extended to 64 bits on the wire
            (Ty::Int32, Value::Varint(v)) => visitor.visit_i32(v as i64 as i32),
            (Ty::Int64, Value::Varint(v)) => visitor.visit_i64(v as i64),
            (Ty::Double, Value::Fixed64(v)) => visitor.visit_f64(f64::from_bits(v)),
            (Ty::Unsupported | Ty::Map(_), _) => Err(Error::new(format!(
                "a {} has no JSON mapping here",
                special::ty_name(self.ty)
            ))),
            (_, Value::Len(b)) => self.special(b, visitor),
            _ => Err(self.wrong()),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match (self.ty, self.value) {
            // RawExtension without bytes: JSON `null`
            (Ty::RawJson, Value::Len(b)) if special::raw_bytes(b)?.is_empty() => {
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
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
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match (self.ty, self.value) {
            (Ty::String, Value::Len(b)) => {
                StrDe(utf8(b)?).deserialize_enum(name, variants, visitor)
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}
