//! The envelope every protobuf object travels in: the magic `k8s\0`, then
//! a `runtime.Unknown` message (`typeMeta` with `apiVersion` and `kind`,
//! `raw`: the object's message, `contentEncoding`, `contentType`).

use serde::Deserialize;

use crate::de::{from_slice, DecodeOptions, MessageDe};
use crate::error::Error;
use crate::schema::{kind, Message};
use crate::wire::{Reader, Value};

/// The four bytes every enveloped object starts with.
pub const MAGIC: &[u8] = b"k8s\0";

/// An enveloped object, borrowed from its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope<'de> {
    /// `typeMeta.apiVersion` (`v1`, `apps/v1`).
    pub api_version: &'de str,
    /// `typeMeta.kind` (`ConfigMap`, `ConfigMapList`, `Status`).
    pub kind: &'de str,
    /// The object's message.
    pub raw: &'de [u8],
}

fn text<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, Error> {
    std::str::from_utf8(bytes).map_err(|_| Error::new(format!("{what} is not UTF-8")))
}

/// `apiVersion` and `kind` of a `TypeMeta` message.
pub(crate) fn type_meta(bytes: &[u8]) -> Result<(&str, &str), Error> {
    let mut reader = Reader::new(bytes);
    let (mut api_version, mut kind) = ("", "");
    while let Some((number, value)) = reader.field()? {
        match (number, value) {
            (1, Value::Len(v)) => api_version = text(v, "typeMeta.apiVersion")?,
            (2, Value::Len(k)) => kind = text(k, "typeMeta.kind")?,
            (1 | 2, _) => return Err(Error::wire("typeMeta field of the wrong wire type")),
            _ => {}
        }
    }
    Ok((api_version, kind))
}

/// Checks an envelope's `contentEncoding` (3) or `contentType` (4).
pub(crate) fn check_content(number: u32, value: &[u8]) -> Result<(), Error> {
    if number == 3 && !value.is_empty() {
        return Err(Error::new(format!(
            "content encoding {:?} is not supported",
            String::from_utf8_lossy(value)
        )));
    }
    Ok(())
}

/// Reads an envelope.
pub fn envelope(bytes: &[u8]) -> Result<Envelope<'_>, Error> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| Error::new("the body does not start with the protobuf magic k8s\\0"))?;
    let mut reader = Reader::new(rest);
    let mut out = Envelope {
        api_version: "",
        kind: "",
        raw: &[],
    };
    while let Some((number, value)) = reader.field()? {
        let Value::Len(bytes) = value else {
            return Err(Error::wire("an envelope field is not length-delimited"));
        };
        match number {
            1 => (out.api_version, out.kind) = type_meta(bytes)?,
            2 => out.raw = bytes,
            n => check_content(n, bytes)?,
        }
    }
    Ok(out)
}

/// The schema of an envelope's kind, or an error naming it.
pub(crate) fn schema_of(api_version: &str, kind_name: &str) -> Result<&'static Message, Error> {
    kind(api_version, kind_name).ok_or_else(|| {
        Error::new(format!(
            "no protobuf schema for {api_version}, Kind={kind_name}"
        ))
    })
}

/// The Deserializer of an enveloped object.
pub(crate) fn object_de(bytes: &[u8], options: DecodeOptions) -> Result<MessageDe<'_>, Error> {
    let e = envelope(bytes)?;
    Ok(MessageDe {
        bytes: e.raw,
        message: schema_of(e.api_version, e.kind)?,
        type_meta: Some((e.api_version, e.kind)),
        options,
    })
}

/// Decodes an enveloped object (a GET's body, a watch event's object, an
/// error's `Status`) into `T`, by the schema of the kind the envelope
/// names; `apiVersion` and `kind` come first, as in JSON.
pub fn from_object<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
    from_object_with(bytes, DecodeOptions::default())
}

/// [`from_object`] with `options`.
pub fn from_object_with<'de, T: Deserialize<'de>>(
    bytes: &'de [u8],
    options: DecodeOptions,
) -> Result<T, Error> {
    T::deserialize(object_de(bytes, options)?)
}

/// Decodes the `raw` of an envelope by `message` (without `apiVersion`
/// and `kind`).
pub fn from_raw<'de, T: Deserialize<'de>>(
    raw: &'de [u8],
    message: &'static Message,
) -> Result<T, Error> {
    from_slice(raw, message)
}
