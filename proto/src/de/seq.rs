//! The runs of a field: [`Repeated`] (a `repeated` field, packed or not, as
//! a serde sequence), [`MapEntries`] (a `map<string, V>` field's entry
//! messages as a serde map) and [`ArrayItems`] (a Go-slice message such as
//! `Verbs`, as a sequence of its items).

use serde::de::{DeserializeSeed, MapAccess, SeqAccess};

use super::value::{utf8, Single};
use super::StrDe;
use crate::error::Error;
use crate::schema::{Field, Ty};
use crate::wire::{Reader, Value};

/// The next value of field `number` in `run`, if the run goes on.
fn next_in_run<'de>(run: &mut Reader<'de>, number: u32) -> Result<Option<Value<'de>>, Error> {
    if run.peek_number() != Some(number) {
        return Ok(None);
    }
    Ok(run.field()?.map(|(_, v)| v))
}

/// Scalars that may be packed in one length-delimited value.
fn packable(ty: &Ty) -> bool {
    matches!(ty, Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Double)
}

/// One value out of a packed run.
fn packed_value<'de>(ty: &Ty, packed: &mut Reader<'de>) -> Result<Value<'de>, Error> {
    let wire = if matches!(ty, Ty::Double) {
        crate::wire::WireType::Fixed64
    } else {
        crate::wire::WireType::Varint
    };
    packed.value(wire)
}

/// A `repeated` field's run as a sequence.
pub(crate) struct Repeated<'a, 'de> {
    field: &'static Field,
    first: Option<Value<'de>>,
    packed: Option<Reader<'de>>,
    run: &'a mut Reader<'de>,
}

impl<'a, 'de> Repeated<'a, 'de> {
    pub(crate) fn new(field: &'static Field, first: Value<'de>, run: &'a mut Reader<'de>) -> Self {
        Self {
            field,
            first: Some(first),
            packed: None,
            run,
        }
    }
}

impl<'de> SeqAccess<'de> for Repeated<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let ty = &self.field.ty;
        loop {
            if let Some(packed) = &mut self.packed {
                if !packed.is_empty() {
                    let value = packed_value(ty, packed)?;
                    return seed.deserialize(Single::new(ty, value)).map(Some);
                }
                self.packed = None;
            }
            let value = match self.first.take() {
                Some(v) => v,
                None => match next_in_run(self.run, self.field.number)? {
                    Some(v) => v,
                    None => return Ok(None),
                },
            };
            match value {
                Value::Len(bytes) if packable(ty) => self.packed = Some(Reader::new(bytes)),
                value => return seed.deserialize(Single::new(ty, value)).map(Some),
            }
        }
    }
}

/// A map field's run of entry messages (`1`: key, `2`: value).
pub(crate) struct MapEntries<'a, 'de> {
    field: &'static Field,
    value_ty: &'static Ty,
    first: Option<Value<'de>>,
    value: Option<Value<'de>>,
    run: &'a mut Reader<'de>,
}

impl<'a, 'de> MapEntries<'a, 'de> {
    pub(crate) fn new(
        field: &'static Field,
        value_ty: &'static Ty,
        first: Value<'de>,
        run: &'a mut Reader<'de>,
    ) -> Self {
        Self {
            field,
            value_ty,
            first: Some(first),
            value: None,
            run,
        }
    }
}

/// The value an entry without one has: the zero value of its type.
fn absent(ty: &Ty) -> Value<'static> {
    match ty {
        Ty::Bool | Ty::Int32 | Ty::Int64 => Value::Varint(0),
        Ty::Double => Value::Fixed64(0),
        _ => Value::Len(&[]),
    }
}

impl<'de> MapAccess<'de> for MapEntries<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let entry = match self.first.take() {
            Some(v) => v,
            None => match next_in_run(self.run, self.field.number)? {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        let Value::Len(bytes) = entry else {
            return Err(Error::wire("a map entry is not length-delimited"));
        };
        let mut reader = Reader::new(bytes);
        let (mut key, mut value) = ("", absent(self.value_ty));
        while let Some((number, v)) = reader.field()? {
            match (number, v) {
                (1, Value::Len(k)) => key = utf8(k)?,
                (1, _) => return Err(Error::wire("a map key is not a string")),
                (2, v) => value = v,
                _ => {}
            }
        }
        self.value = Some(value);
        seed.deserialize(StrDe(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let value = self
            .value
            .take()
            .ok_or_else(|| Error::new("next_value called before next_key"))?;
        seed.deserialize(Single::new(self.value_ty, value))
    }
}

/// The items (field 1) of a Go-slice message.
pub(crate) struct ArrayItems<'de> {
    elem: &'static Ty,
    reader: Reader<'de>,
    packed: Option<Reader<'de>>,
}

impl<'de> ArrayItems<'de> {
    pub(crate) fn new(elem: &'static Ty, bytes: &'de [u8]) -> Self {
        Self {
            elem,
            reader: Reader::new(bytes),
            packed: None,
        }
    }
}

impl<'de> SeqAccess<'de> for ArrayItems<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        loop {
            if let Some(packed) = &mut self.packed {
                if !packed.is_empty() {
                    let value = packed_value(self.elem, packed)?;
                    return seed.deserialize(Single::new(self.elem, value)).map(Some);
                }
                self.packed = None;
            }
            match self.reader.field()? {
                None => return Ok(None),
                Some((1, Value::Len(b))) if packable(self.elem) => {
                    self.packed = Some(Reader::new(b))
                }
                Some((1, value)) => {
                    return seed.deserialize(Single::new(self.elem, value)).map(Some)
                }
                Some(_) => {}
            }
        }
    }
}
