//! The protobuf wire format, read from a byte slice: varints, tags, wire
//! types, length-delimited values, skipping. Every read is bounds-checked
//! and returns an [`Error`] on truncated or malformed input.

use crate::error::Error;

/// How a field's value is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireType {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

/// One field's raw value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'de> {
    Varint(u64),
    Fixed64(u64),
    Len(&'de [u8]),
    Fixed32(u32),
}

impl<'de> Value<'de> {
    /// Whether this is the zero value of its type (0, false, empty).
    pub(crate) fn is_zero(&self) -> bool {
        match *self {
            Value::Varint(v) | Value::Fixed64(v) => v == 0,
            Value::Fixed32(v) => v == 0,
            Value::Len(b) => b.is_empty(),
        }
    }
}

/// A cursor over the bytes of one message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'de> {
    buf: &'de [u8],
    pos: usize,
}

impl<'de> Reader<'de> {
    pub(crate) fn new(buf: &'de [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, Error> {
        // most tags and lengths are one byte
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        let (v, n) = varint(self.buf.get(self.pos..).unwrap_or_default())?;
        self.pos += n;
        Ok(v)
    }

    /// The next tag: field number and wire type.
    #[inline]
    pub(crate) fn tag(&mut self) -> Result<(u32, WireType), Error> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n != 0)
            .ok_or_else(|| Error::wire(format!("invalid field number {}", key >> 3)))?;
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            5 => WireType::Fixed32,
            3 | 4 => return Err(Error::wire("protobuf groups are not supported")),
            other => return Err(Error::wire(format!("invalid wire type {other}"))),
        };
        Ok((number, wire))
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| Error::wire("truncated message"))?;
        let out = self.buf.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(out)
    }

    /// The value of a field of wire type `wire`.
    #[inline]
    pub(crate) fn value(&mut self, wire: WireType) -> Result<Value<'de>, Error> {
        Ok(match wire {
            WireType::Varint => Value::Varint(self.varint()?),
            WireType::Fixed64 => {
                let b = self.take(8)?;
                Value::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or_default()))
            }
            WireType::Fixed32 => {
                let b = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or_default()))
            }
            WireType::Len => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| Error::wire("length overflows"))?;
                Value::Len(self.take(len)?)
            }
        })
    }

    /// The next field, `None` at the end of the message.
    #[inline]
    pub(crate) fn field(&mut self) -> Result<Option<(u32, Value<'de>)>, Error> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        // the common case: a one-byte tag of a field numbered 1-15 and,
        // for a length-delimited value, a one-byte length
        if let [tag, second, ..] = *rest {
            if (8..0x80).contains(&tag) {
                match tag & 7 {
                    0 if second < 0x80 => {
                        self.pos += 2;
                        return Ok(Some((
                            u32::from(tag >> 3),
                            Value::Varint(u64::from(second)),
                        )));
                    }
                    2 if second < 0x80 => {
                        let start = self.pos + 2;
                        let end = start + usize::from(second);
                        if let Some(bytes) = self.buf.get(start..end) {
                            self.pos = end;
                            return Ok(Some((u32::from(tag >> 3), Value::Len(bytes))));
                        }
                    }
                    _ => {}
                }
            }
        } else if rest.is_empty() {
            return Ok(None);
        }
        let (number, wire) = self.tag()?;
        Ok(Some((number, self.value(wire)?)))
    }

    /// The number of the next field, without consuming it (`None` at the
    /// end, or before a tag that does not read: the next `field` says why).
    #[inline]
    pub(crate) fn peek_number(&self) -> Option<u32> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match rest.first() {
            None => None,
            Some(&b) if b < 0x80 => Some(u32::from(b >> 3)),
            Some(_) => {
                let (key, _) = varint(rest).ok()?;
                u32::try_from(key >> 3).ok()
            }
        }
    }
}

/// Decodes a varint at the start of `buf`: the value and its length.
#[inline]
pub(crate) fn varint(buf: &[u8]) -> Result<(u64, usize), Error> {
    let mut value: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            if i == 9 && b > 1 {
                return Err(Error::wire("varint overflows 64 bits"));
            }
            return Ok((value, i + 1));
        }
    }
    if buf.len() < 10 {
        Err(Error::wire("truncated varint"))
    } else {
        Err(Error::wire("varint longer than 10 bytes"))
    }
}

/// Whether `buf` starts with a complete varint (`None`: more bytes needed;
/// an error for a malformed one).
pub(crate) fn complete_varint(buf: &[u8]) -> Result<Option<(u64, usize)>, Error> {
    match varint(buf) {
        Ok(v) => Ok(Some(v)),
        Err(_) if buf.len() < 10 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Appends a varint (tests build wire bytes with it).
#[cfg(test)]
pub(crate) fn encode_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_bad_ones_fail() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            encode_varint(v, &mut b);
            assert_eq!(varint(&b).unwrap(), (v, b.len()));
            assert!(complete_varint(&b[..b.len() - 1]).unwrap().is_none());
        }
        assert!(varint(&[0xff; 11]).is_err());
        assert!(complete_varint(&[0xff; 11]).is_err());
        assert!(varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(varint(&[]).is_err());
    }

    #[test]
    fn reads_fields_and_rejects_truncation() {
        // field 1 varint 150, field 2 "hi", field 3 fixed32
        let b = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 0, 0, 0];
        let mut r = Reader::new(&b);
        assert!(matches!(r.field().unwrap(), Some((1, Value::Varint(150)))));
        assert_eq!(r.peek_number(), Some(2));
        assert!(matches!(r.field().unwrap(), Some((2, Value::Len(b"hi")))));
        assert!(matches!(r.field().unwrap(), Some((3, Value::Fixed32(1)))));
        assert!(r.field().unwrap().is_none());
        assert!(Reader::new(&[0x12, 0x05, b'a']).field().is_err());
        assert!(Reader::new(&[0x0b]).field().is_err()); // group
        assert!(Reader::new(&[0x00]).field().is_err()); // field 0
        assert!(Reader::new(&[0x0e]).field().is_err()); // wire type 6
    }

    #[test]
    fn the_one_byte_fast_path_reads_as_the_general_one() {
        // one-byte varint, one-byte length, an empty value, then the end
        let b = [0x08, 0x05, 0x12, 0x01, b'x', 0x1a, 0x00];
        let mut r = Reader::new(&b);
        assert!(matches!(r.field().unwrap(), Some((1, Value::Varint(5)))));
        assert!(matches!(r.field().unwrap(), Some((2, Value::Len(b"x")))));
        assert_eq!(r.peek_number(), Some(3));
        assert!(matches!(r.field().unwrap(), Some((3, Value::Len(b"")))));
        assert_eq!(r.peek_number(), None);
        assert!(r.field().unwrap().is_none());
        // field 0 and a length past the end fail as before
        assert!(Reader::new(&[0x00, 0x01]).field().is_err());
        assert!(Reader::new(&[0x02, 0x00]).field().is_err());
        assert!(Reader::new(&[0x0a, 0x02, b'a']).field().is_err());
        // a two-byte tag (field 17) takes the general path
        let mut r = Reader::new(&[0x8a, 0x01, 0x01, b'y']);
        assert_eq!(r.peek_number(), Some(17));
        assert!(matches!(r.field().unwrap(), Some((17, Value::Len(b"y")))));
    }
}
