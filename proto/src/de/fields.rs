//! [`Fields`]: a message's fields as a serde map, in wire order, with
//! inlined messages flattened, unknown field numbers and zero values of
//! `omit_zero` fields skipped.

use serde::de::{DeserializeSeed, MapAccess};

use super::special::is_go_zero_time;
use super::value::ValueDe;
use super::{DecodeOptions, StrDe};
use crate::error::Error;
use crate::schema::{Field, Message, Ty};
use crate::wire::{Reader, Value};

/// `ObjectMeta`'s field that [`DecodeOptions::strip_managed_fields`] skips.
const MANAGED_FIELDS: &str = "managedFields";

/// What the next `next_value` hands out.
enum Pending<'de> {
    None,
    Str(&'de str),
    Field(&'static Field, Value<'de>),
}

/// The fields of one message as a serde [`MapAccess`].
pub(crate) struct Fields<'de> {
    reader: Reader<'de>,
    message: &'static Message,
    /// The messages an inlined field was entered from.
    outer: Vec<(Reader<'de>, &'static Message)>,
    type_meta: Option<(&'de str, &'de str)>,
    type_meta_step: u8,
    pending: Pending<'de>,
    options: DecodeOptions,
}

impl<'de> Fields<'de> {
    pub(crate) fn new(
        bytes: &'de [u8],
        message: &'static Message,
        type_meta: Option<(&'de str, &'de str)>,
        options: DecodeOptions,
    ) -> Self {
        Self {
            reader: Reader::new(bytes),
            message,
            outer: Vec::new(),
            type_meta,
            type_meta_step: 0,
            pending: Pending::None,
            options,
        }
    }

    /// `apiVersion`, then `kind`, when the envelope gave them.
    fn next_type_meta(&mut self) -> Option<(&'static str, &'de str)> {
        let (api_version, kind) = self.type_meta?;
        let step = self.type_meta_step;
        self.type_meta_step += 1;
        match step {
            0 if !api_version.is_empty() => Some(("apiVersion", api_version)),
            0 | 1 if !kind.is_empty() => {
                self.type_meta_step = 2;
                Some(("kind", kind))
            }
            _ => {
                self.type_meta = None;
                None
            }
        }
    }

    /// The next field to hand out, `None` at the end of the message.
    fn next_field(&mut self) -> Result<Option<(&'static Field, Value<'de>)>, Error> {
        loop {
            let Some((number, value)) = self.reader.field()? else {
                match self.outer.pop() {
                    Some((reader, message)) => {
                        self.reader = reader;
                        self.message = message;
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            let Some(field) = self.message.field(number) else {
                continue; // unknown to this schema: skipped, as protobuf does
            };
            if self.options.strips_managed_fields() && field.json == MANAGED_FIELDS {
                continue; // each entry of the run, unread
            }
            if field.inline {
                let (Ty::Message(inner), Value::Len(bytes)) = (&field.ty, value) else {
                    return Err(Error::wire("an inlined field is not a message"));
                };
                let parent = std::mem::replace(&mut self.reader, Reader::new(bytes));
                self.outer.push((parent, self.message));
                self.message = inner;
                continue;
            }
            if !field.repeated && is_zero_to_skip(field, &value)? {
                continue;
            }
            return Ok(Some((field, value)));
        }
    }
}

/// Whether a present value is one JSON leaves out: a zero `omit_zero`
/// scalar, or Go's zero time (JSON `null`).
fn is_zero_to_skip(field: &Field, value: &Value<'_>) -> Result<bool, Error> {
    if field.omit_zero && value.is_zero() {
        return Ok(true);
    }
    match (&field.ty, value) {
        (Ty::Time | Ty::MicroTime, Value::Len(bytes)) => is_go_zero_time(bytes),
        _ => Ok(false),
    }
}

impl<'de> MapAccess<'de> for Fields<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if let Some((name, value)) = self.next_type_meta() {
            self.pending = Pending::Str(value);
            return seed.deserialize(StrDe(name)).map(Some);
        }
        match self.next_field()? {
            Some((field, value)) => {
                self.pending = Pending::Field(field, value);
                seed.deserialize(StrDe(field.json)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::Str(s) => seed.deserialize(StrDe(s)),
            Pending::Field(field, value) => seed
                .deserialize(ValueDe {
                    field,
                    value,
                    run: &mut self.reader,
                    options: self.options,
                })
                .map_err(|e| e.in_field(field.json)),
            Pending::None => Err(Error::new("next_value called before next_key")),
        }
    }
}
