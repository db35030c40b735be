//! The Kubernetes types with their own JSON form: `Time` and `MicroTime`
//! (RFC 3339, as Go's `MarshalJSON`), `Duration` (Go's duration string),
//! `Quantity` (its string), `IntOrString` (a number or a string) and the
//! raw JSON of `RawExtension`, `FieldsV1` and apiextensions `JSON`.

use serde::de::{Deserializer, Visitor};

use super::value::utf8;
use super::DecodeOptions;
use crate::error::Error;
use crate::schema::Ty;
use crate::wire::{Reader, Value};

/// Go's zero time (0001-01-01T00:00:00Z) in Unix seconds.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// `seconds` (field 1) and `nanos` (field 2) of a Time or MicroTime.
fn seconds_nanos(bytes: &[u8]) -> Result<(i64, i32), Error> {
    let mut reader = Reader::new(bytes);
    let (mut seconds, mut nanos) = (0i64, 0i32);
    while let Some((number, value)) = reader.field()? {
        match (number, value) {
            (1, Value::Varint(v)) => seconds = v as i64,
            (2, Value::Varint(v)) => nanos = v as i64 as i32,
            (1 | 2, _) => return Err(Error::wire("a time field is not a varint")),
            _ => {}
        }
    }
    Ok((seconds, nanos))
}

/// Whether a Time or MicroTime message holds Go's zero time (JSON
/// `null`): Go marshals it as an empty message (and reads an empty one as
/// the zero time); a timestamp at year 1 is the zero time too.
pub(crate) fn is_go_zero_time(bytes: &[u8]) -> Result<bool, Error> {
    Ok(bytes.is_empty() || seconds_nanos(bytes)? == (GO_ZERO_TIME, 0))
}

/// The civil date of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A Time (`micro`: a MicroTime) as Go's JSON has it: RFC 3339 in UTC,
/// whole seconds (`2006-01-02T15:04:05Z`: Go reads a Time's seconds only)
/// or microseconds (`2006-01-02T15:04:05.000000Z`).
pub(crate) fn time(bytes: &[u8], micro: bool) -> Result<TimeText, Error> {
    if bytes.is_empty() {
        // Go's zero time: seconds -62135596800
        const ZERO: [u8; 11] = [
            0x08, 0x80, 0x92, 0xb8, 0xc3, 0x98, 0xfe, 0xff, 0xff, 0xff, 0x01,
        ];
        return time(&ZERO, micro);
    }
    let (seconds, nanos) = seconds_nanos(bytes)?;
    if micro && !(0..1_000_000_000).contains(&nanos) {
        return Err(Error::new(format!("time nanos {nanos} out of range")));
    }
    let (year, month, day) = civil_date(seconds)?;
    let secs = seconds.rem_euclid(86_400);
    // written digit by digit: this runs twice per object of a list
    let mut buf = *b"0000-00-00T00:00:00.000000Z";
    put_digits(&mut buf[0..4], year as u64);
    put_digits(&mut buf[5..7], u64::from(month));
    put_digits(&mut buf[8..10], u64::from(day));
    put_digits(&mut buf[11..13], (secs / 3600) as u64);
    put_digits(&mut buf[14..16], (secs / 60 % 60) as u64);
    put_digits(&mut buf[17..19], (secs % 60) as u64);
    let len = if micro {
        put_digits(&mut buf[20..26], (nanos / 1000) as u64);
        buf.len()
    } else {
        buf[19] = b'Z';
        20
    };
    Ok(TimeText { buf, len })
}

/// The civil date of Unix `seconds`, in the years 0-9999 JSON can hold.
fn civil_date(seconds: i64) -> Result<(i64, u32, u32), Error> {
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    if !(0..=9999).contains(&year) {
        return Err(Error::new(format!(
            "time {seconds}s is outside the years 0-9999 JSON can hold"
        )));
    }
    Ok((year, month, day))
}

/// The Unix seconds of a non-empty Time message, checked as [`time`]
/// checks them (what the RFC 3339 text would hold; nanos are dropped, as
/// Go's JSON drops them).
#[cfg(feature = "k8s-openapi")]
pub(crate) fn time_seconds(bytes: &[u8]) -> Result<i64, Error> {
    let (seconds, _) = seconds_nanos(bytes)?;
    civil_date(seconds)?;
    Ok(seconds)
}

/// A formatted time, on the stack.
pub(crate) struct TimeText {
    buf: [u8; 27],
    len: usize,
}

impl TimeText {
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self.buf.get(..self.len).unwrap_or_default()).unwrap_or_default()
    }
}

/// Writes `v` as decimal digits filling `out` (zero-padded on the left).
fn put_digits(out: &mut [u8], mut v: u64) {
    for d in out.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// `v / 10^prec` and the fraction's digits without trailing zeros
/// (Go's `fmtFrac`).
fn frac(v: u64, prec: u32, out: &mut String) -> u64 {
    let scale = 10u64.pow(prec);
    let fraction = v % scale;
    if fraction != 0 {
        let digits = format!("{fraction:0width$}", width = prec as usize);
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    v / scale
}

/// A Duration (`duration`, field 1, nanoseconds) as Go's
/// `time.Duration.String()`: `1h2m3.5s`, `150ms`, `0s`.
pub(crate) fn duration(bytes: &[u8]) -> Result<String, Error> {
    let mut reader = Reader::new(bytes);
    let mut nanos = 0i64;
    while let Some((number, value)) = reader.field()? {
        if let (1, Value::Varint(v)) = (number, value) {
            nanos = v as i64;
        }
    }
    Ok(go_duration(nanos))
}

pub(crate) fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    let mut fraction = String::new();
    if u < 1_000_000_000 {
        let (prec, unit) = match u {
            0..=999 => (0, "ns"),
            1_000..=999_999 => (3, "µs"),
            _ => (6, "ms"),
        };
        let whole = frac(u, prec, &mut fraction);
        return format!("{sign}{whole}{fraction}{unit}");
    }
    let seconds = frac(u, 9, &mut fraction);
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{sign}{s}{fraction}s"),
        (0, m) => format!("{sign}{m}m{s}{fraction}s"),
        (h, m) => format!("{sign}{h}h{m}m{s}{fraction}s"),
    }
}

/// A Quantity's string (field 1).
pub(crate) fn quantity(bytes: &[u8]) -> Result<&str, Error> {
    let mut reader = Reader::new(bytes);
    let mut out = "";
    while let Some((number, value)) = reader.field()? {
        if let (1, Value::Len(s)) = (number, value) {
            out = utf8(s)?;
        }
    }
    Ok(out)
}

/// An IntOrString: `Ok(int)` or `Err(string)` (`type` 1).
pub(crate) fn int_or_string(bytes: &[u8]) -> Result<Result<i32, &str>, Error> {
    let mut reader = Reader::new(bytes);
    let (mut is_string, mut int, mut string) = (false, 0i32, "");
    while let Some((number, value)) = reader.field()? {
        match (number, value) {
            (1, Value::Varint(t)) => is_string = t == 1,
            (2, Value::Varint(v)) => int = v as i64 as i32,
            (3, Value::Len(s)) => string = utf8(s)?,
            (1..=3, _) => return Err(Error::wire("an IntOrString field of the wrong wire type")),
            _ => {}
        }
    }
    Ok(if is_string { Err(string) } else { Ok(int) })
}

/// The `raw` bytes (field 1) of a RawExtension, FieldsV1 or JSON.
pub(crate) fn raw_bytes(bytes: &[u8]) -> Result<&[u8], Error> {
    let mut reader = Reader::new(bytes);
    let mut out: &[u8] = &[];
    while let Some((number, value)) = reader.field()? {
        if let (1, Value::Len(raw)) = (number, value) {
            out = raw;
        }
    }
    Ok(out)
}

/// Raw bytes handed to `visitor`: an enveloped protobuf object
/// (`k8s\0`...) is decoded by its kind's schema; anything else is JSON;
/// no bytes are `null`.
pub(crate) fn raw_json<'de, V: Visitor<'de>>(
    bytes: &'de [u8],
    visitor: V,
) -> Result<V::Value, Error> {
    let raw = raw_bytes(bytes)?;
    if raw.is_empty() {
        return visitor.visit_unit();
    }
    if raw.starts_with(crate::envelope::MAGIC) {
        return crate::envelope::object_de(raw, DecodeOptions::default())?.deserialize_any(visitor);
    }
    let mut json = serde_json::Deserializer::from_slice(raw);
    let value = json
        .deserialize_any(visitor)
        .map_err(|e| Error::new(format!("raw JSON: {e}")))?;
    json.end()
        .map_err(|e| Error::new(format!("raw JSON: {e}")))?;
    Ok(value)
}

/// How a type is named in errors.
pub(crate) fn ty_name(ty: &Ty) -> &'static str {
    match ty {
        Ty::String => "string",
        Ty::Bytes => "bytes",
        Ty::Bool => "bool",
        Ty::Int32 => "int32",
        Ty::Int64 => "int64",
        Ty::Double => "double",
        Ty::Message(m) => m.name,
        Ty::Map(_) => "map",
        Ty::Array(_) => "list",
        Ty::Time => "Time",
        Ty::MicroTime => "MicroTime",
        Ty::Duration => "Duration",
        Ty::Quantity => "Quantity",
        Ty::IntOrString => "IntOrString",
        Ty::RawJson => "RawExtension",
        Ty::Unsupported => "type without a JSON mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time_bytes(seconds: i64, nanos: i32) -> Vec<u8> {
        let mut b = vec![0x08];
        crate::wire::encode_varint(seconds as u64, &mut b);
        b.push(0x10);
        crate::wire::encode_varint(nanos as i64 as u64, &mut b);
        b
    }

    #[test]
    fn times_format_as_go_does() {
        assert_eq!(
            time(&time_bytes(0, 0), false).unwrap().as_str(),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            time(&time_bytes(1_795_302_000, 123_456_789), false)
                .unwrap()
                .as_str(),
            "2026-11-21T23:00:00Z"
        );
        assert_eq!(
            time(&time_bytes(1_795_302_000, 123_456_789), true)
                .unwrap()
                .as_str(),
            "2026-11-21T23:00:00.123456Z"
        );
        assert_eq!(
            time(&time_bytes(951_782_400, 0), false).unwrap().as_str(),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            time(&time_bytes(-1, 0), false).unwrap().as_str(),
            "1969-12-31T23:59:59Z"
        );
        assert_eq!(
            time(&time_bytes(GO_ZERO_TIME, 0), false).unwrap().as_str(),
            "0001-01-01T00:00:00Z"
        );
        assert!(is_go_zero_time(&time_bytes(GO_ZERO_TIME, 0)).unwrap());
        assert!(is_go_zero_time(&[]).unwrap());
        assert!(!is_go_zero_time(&time_bytes(0, 0)).unwrap());
        assert!(time(&time_bytes(i64::MAX, 0), false).is_err());
        assert!(time(&time_bytes(0, -1), true).is_err());
        assert_eq!(
            time(&time_bytes(0, -1), false).unwrap().as_str(),
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn durations_format_as_go_does() {
        for (nanos, want) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (60_000_000_000, "1m0s"),
            (4_000_000_000 * 60 + 5_000_000_000, "4m5s"),
            (3_600_000_000_000, "1h0m0s"),
            (-1_500_000_000, "-1.5s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(go_duration(nanos), want);
        }
    }
}
