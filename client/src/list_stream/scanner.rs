//! [`ListScanner`]: an incremental scanner over the bytes of a list answer
//! (`{"kind":..,"apiVersion":..,"metadata":{..},"items":[..]}`) that cuts
//! out each element of `items` and each other top-level field as its own
//! byte range, as body chunks arrive.
//!
//! The scanner only finds where values begin and end (string- and
//! escape-aware bracket counting); the values themselves are validated by
//! whoever decodes them (`serde_json`). It holds at most the bytes of the
//! value being scanned: a value inside one chunk is handed out without a
//! copy, one spanning chunks is gathered into a buffer, which is limited to
//! `max_value_size` bytes. Nothing here panics on any input.

use bytes::{Buf, Bytes, BytesMut};

/// One piece of a list answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListPart {
    /// The JSON bytes of one element of `items`.
    Item(Bytes),
    /// A top-level field other than an `items` array: its name and the JSON
    /// bytes of its value (`"items": null` comes out this way too).
    Field(String, Bytes),
}

/// Why a list body is malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed list body at byte {offset}: {message}")]
pub struct ScanError {
    /// Where in the body the problem was found.
    pub offset: u64,
    /// What was wrong.
    pub message: String,
}

/// Where the scanner is in the top-level object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the opening `{`.
    Start,
    /// Expecting a key, or `}` when `first`.
    KeyOrEnd { first: bool },
    /// Scanning a key.
    InKey,
    /// Expecting `:`.
    Colon,
    /// Expecting a field's value.
    ValueStart,
    /// Scanning a field's value.
    InValue,
    /// Inside `items`: expecting an element, or `]` when `first`.
    ItemOrEnd { first: bool },
    /// Scanning an element of `items`.
    InItem,
    /// After an element: expecting `,` or `]`.
    AfterItem,
    /// After a field: expecting `,` or `}`.
    AfterField,
    /// After the closing `}`: only whitespace may follow.
    Done,
}

/// What kind of JSON value is being scanned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    NotStarted,
    /// An object or array: ends when the brackets balance.
    Container,
    /// A string: ends at the closing quote.
    String,
    /// A number, `true`, `false` or `null`: ends before the first byte that
    /// cannot belong to one.
    Scalar,
}

/// The scan state of one value, kept across chunks.
#[derive(Clone, Copy, Debug, Default)]
struct ValueScan {
    kind: Kind,
    depth: u32,
    in_string: bool,
    escape: bool,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_scalar_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')
}

impl ValueScan {
    /// Scans `buf`, the next bytes of the value. Returns the number of bytes
    /// of `buf` that complete the value, or `None` if it goes on after `buf`.
    fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, &'static str> {
        let mut i = 0;
        if self.kind == Kind::NotStarted {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            self.kind = match first {
                b'{' | b'[' => {
                    self.depth = 1;
                    Kind::Container
                }
                b'"' => {
                    self.in_string = true;
                    Kind::String
                }
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => Kind::Scalar,
                _ => return Err("expected a JSON value"),
            };
            i = 1;
        }
        match self.kind {
            Kind::Scalar => Ok(buf
                .iter()
                .skip(i)
                .position(|&b| !is_scalar_byte(b))
                .map(|off| i + off)),
            Kind::String | Kind::Container => self.scan_nested(buf, i),
            Kind::NotStarted => Ok(None),
        }
    }

    /// Scans a string or a container from `i`.
    fn scan_nested(&mut self, buf: &[u8], mut i: usize) -> Result<Option<usize>, &'static str> {
        loop {
            let Some(rest) = buf.get(i..) else {
                return Ok(None);
            };
            if rest.is_empty() {
                return Ok(None);
            }
            if self.in_string {
                if self.escape {
                    self.escape = false;
                    i += 1;
                    continue;
                }
                let Some(off) = memchr::memchr2(b'"', b'\\', rest) else {
                    return Ok(None);
                };
                i += off + 1;
                if rest.get(off) == Some(&b'\\') {
                    self.escape = true;
                } else {
                    self.in_string = false;
                    if self.kind == Kind::String {
                        return Ok(Some(i));
                    }
                }
                continue;
            }
            match self.scan_structure(rest)? {
                Step::Ended(off) => return Ok(Some(i + off)),
                Step::StringAt(off) => {
                    self.in_string = true;
                    i += off + 1;
                }
                Step::NeedMore => return Ok(None),
            }
        }
    }

    /// Scans container bytes outside strings until a string starts or the
    /// container closes.
    fn scan_structure(&mut self, rest: &[u8]) -> Result<Step, &'static str> {
        for (off, &b) in rest.iter().enumerate() {
            match b {
                b'"' => return Ok(Step::StringAt(off)),
                b'{' | b'[' => {
                    self.depth = self.depth.checked_add(1).ok_or("nesting too deep")?;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Ok(Step::Ended(off + 1));
                    }
                }
                _ => {}
            }
        }
        Ok(Step::NeedMore)
    }
}

/// What a structural byte does.
enum Transition {
    /// Consume the byte and move to this state.
    Consume(State),
    /// A value starts at this byte: scan it in this state.
    BeginValue(State),
}

/// The outcome of scanning container structure.
enum Step {
    /// The container ends after this many bytes.
    Ended(usize),
    /// A string starts at this offset.
    StringAt(usize),
    /// The input ran out.
    NeedMore,
}

/// Cuts a list answer into [`ListPart`]s as its chunks arrive.
///
/// ```
/// use bytes::Bytes;
/// use kcontrol_client::list_stream::{ListPart, ListScanner};
///
/// let mut scanner = ListScanner::new(1 << 20);
/// scanner.push(Bytes::from_static(br#"{"metadata":{"resourceVersion":"5"},"items":[{"a":"]"},"#));
/// let mut parts = Vec::new();
/// while let Some(part) = scanner.next_part()? {
///     parts.push(part);
/// }
/// scanner.push(Bytes::from_static(br#"{"b":2}]}"#));
/// while let Some(part) = scanner.next_part()? {
///     parts.push(part);
/// }
/// scanner.finish()?;
/// assert_eq!(parts, [
///     ListPart::Field("metadata".into(), Bytes::from_static(br#"{"resourceVersion":"5"}"#)),
///     ListPart::Item(Bytes::from_static(br#"{"a":"]"}"#)),
///     ListPart::Item(Bytes::from_static(br#"{"b":2}"#)),
/// ]);
/// # Ok::<(), kcontrol_client::list_stream::ScanError>(())
/// ```
#[derive(Debug)]
pub struct ListScanner {
    /// The unscanned rest of the last chunk.
    current: Bytes,
    /// The start of a value that continues in a later chunk.
    partial: BytesMut,
    state: State,
    value: ValueScan,
    /// The key of the field being read.
    key: Option<String>,
    items_seen: bool,
    /// Body bytes before `current`.
    consumed: u64,
    max_value_size: usize,
}

impl ListScanner {
    /// A scanner that rejects any single value (an item, or another
    /// top-level field) longer than `max_value_size` bytes.
    pub fn new(max_value_size: usize) -> Self {
        Self {
            current: Bytes::new(),
            partial: BytesMut::new(),
            state: State::Start,
            value: ValueScan::default(),
            key: None,
            items_seen: false,
            consumed: 0,
            max_value_size,
        }
    }

    /// Adds a chunk of the body. Call [`next_part`](Self::next_part) until it
    /// returns `None` before pushing the next one (pushing earlier works,
    /// but copies).
    pub fn push(&mut self, chunk: Bytes) {
        crate::chunks::append(&mut self.current, chunk);
    }

    /// Whether the closing `}` of the list has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn error(&self, message: impl Into<String>) -> ScanError {
        ScanError {
            offset: self.consumed + self.partial.len() as u64,
            message: message.into(),
        }
    }

    fn advance(&mut self, n: usize) {
        self.current.advance(n);
        self.consumed += n as u64;
    }

    /// The next complete part, `None` when more input is needed.
    pub fn next_part(&mut self) -> Result<Option<ListPart>, ScanError> {
        loop {
            match self.state {
                State::InKey | State::InValue | State::InItem => {
                    let Some(bytes) = self.scan_value()? else {
                        return Ok(None);
                    };
                    if let Some(part) = self.value_done(bytes)? {
                        return Ok(Some(part));
                    }
                }
                _ => {
                    let Some(&b) = self.current.first() else {
                        return Ok(None);
                    };
                    if is_whitespace(b) {
                        self.advance(1);
                        continue;
                    }
                    self.structural(b)?;
                }
            }
        }
    }

    /// At the end of the body, once [`next_part`](Self::next_part) returned
    /// `None`: fails unless the list was complete.
    pub fn finish(&mut self) -> Result<(), ScanError> {
        if let Some(part) = self.next_part()? {
            let what = match part {
                ListPart::Item(_) => "an item".to_owned(),
                ListPart::Field(name, _) => format!("field {name:?}"),
            };
            return Err(self.error(format!("{what} was not taken before finish")));
        }
        if self.state == State::Done {
            Ok(())
        } else {
            Err(self.error("the body ended before the list was complete"))
        }
    }

    /// Handles one structural byte (not whitespace) outside any value.
    fn structural(&mut self, b: u8) -> Result<(), ScanError> {
        match self.transition(b)? {
            Transition::Consume(next) => {
                self.advance(1);
                self.state = next;
            }
            Transition::BeginValue(state) => {
                self.value = ValueScan::default();
                self.state = state;
            }
        }
        Ok(())
    }

    /// Where a structural byte leads.
    fn transition(&mut self, b: u8) -> Result<Transition, ScanError> {
        Ok(match (self.state, b) {
            (State::Start, b'{') => Transition::Consume(State::KeyOrEnd { first: true }),
            (State::KeyOrEnd { .. }, b'"') => Transition::BeginValue(State::InKey),
            (State::KeyOrEnd { first: true }, b'}') | (State::AfterField, b'}') => {
                Transition::Consume(State::Done)
            }
            (State::Colon, b':') => Transition::Consume(State::ValueStart),
            (State::ValueStart, _) if self.key.as_deref() == Some("items") => {
                if self.items_seen {
                    return Err(self.error("duplicate field \"items\""));
                }
                self.items_seen = true;
                if b != b'[' {
                    return Ok(Transition::BeginValue(State::InValue));
                }
                self.key = None;
                Transition::Consume(State::ItemOrEnd { first: true })
            }
            (State::ValueStart, _) => Transition::BeginValue(State::InValue),
            (State::ItemOrEnd { first: true }, b']') | (State::AfterItem, b']') => {
                Transition::Consume(State::AfterField)
            }
            (State::ItemOrEnd { .. }, _) => Transition::BeginValue(State::InItem),
            (State::AfterItem, b',') => Transition::Consume(State::ItemOrEnd { first: false }),
            (State::AfterField, b',') => Transition::Consume(State::KeyOrEnd { first: false }),
            (state, b) => return Err(self.error(unexpected(state, b))),
        })
    }

    /// Scans the value under way; its bytes once complete.
    fn scan_value(&mut self) -> Result<Option<Bytes>, ScanError> {
        let scanned = self.value.scan(&self.current);
        match scanned {
            Err(message) => Err(self.error(message)),
            Ok(None) => {
                if self.partial.len() + self.current.len() > self.max_value_size {
                    return Err(self.too_large());
                }
                self.partial.extend_from_slice(&self.current);
                let n = self.current.len();
                self.advance(n);
                Ok(None)
            }
            Ok(Some(end)) => {
                if self.partial.len() + end > self.max_value_size {
                    return Err(self.too_large());
                }
                let head = self.current.split_to(end);
                self.consumed += end as u64;
                if self.partial.is_empty() {
                    Ok(Some(head))
                } else {
                    self.partial.extend_from_slice(&head);
                    Ok(Some(self.partial.split().freeze()))
                }
            }
        }
    }

    fn too_large(&self) -> ScanError {
        self.error(format!(
            "a value exceeds the maximum size of {} bytes",
            self.max_value_size
        ))
    }

    /// Moves on after a complete value; the part it makes, if any.
    fn value_done(&mut self, bytes: Bytes) -> Result<Option<ListPart>, ScanError> {
        match self.state {
            State::InKey => {
                let key: String = serde_json::from_slice(&bytes)
                    .map_err(|e| self.error(format!("invalid key: {e}")))?;
                self.key = Some(key);
                self.state = State::Colon;
                Ok(None)
            }
            State::InItem => {
                self.state = State::AfterItem;
                Ok(Some(ListPart::Item(bytes)))
            }
            _ => {
                self.state = State::AfterField;
                let key = self.key.take().unwrap_or_default();
                Ok(Some(ListPart::Field(key, bytes)))
            }
        }
    }
}

/// The message for an unexpected byte.
fn unexpected(state: State, b: u8) -> String {
    let expected = match state {
        State::Start => "'{' (a list is a JSON object)",
        State::KeyOrEnd { first: true } => "a key or '}'",
        State::KeyOrEnd { first: false } => "a key",
        State::Colon => "':'",
        State::AfterItem => "',' or ']' after an item",
        State::AfterField => "',' or '}' after a field",
        State::Done => "nothing after the end of the list",
        _ => "a JSON value",
    };
    format!("expected {expected}, found {:?}", char::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(chunks: &[&[u8]]) -> Result<Vec<ListPart>, ScanError> {
        let mut s = ListScanner::new(1 << 20);
        let mut parts = Vec::new();
        for chunk in chunks {
            s.push(Bytes::copy_from_slice(chunk));
            while let Some(p) = s.next_part()? {
                parts.push(p);
            }
        }
        s.finish()?;
        Ok(parts)
    }

    fn item(s: &str) -> ListPart {
        ListPart::Item(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn field(k: &str, v: &str) -> ListPart {
        ListPart::Field(k.into(), Bytes::copy_from_slice(v.as_bytes()))
    }

    #[test]
    fn strings_with_brackets_quotes_and_escapes_do_not_end_values() {
        let body = br#" { "items" : [ {"a":"}]\"\\"} , ["x",{"y":[]}] , "s\"]" , -1.5e3 , null ] , "kind" : "L" } "#;
        assert_eq!(
            scan_all(&[body]).unwrap(),
            [
                item(r#"{"a":"}]\"\\"}"#),
                item(r#"["x",{"y":[]}]"#),
                item(r#""s\"]""#),
                item("-1.5e3"),
                item("null"),
                field("kind", r#""L""#),
            ]
        );
    }

    #[test]
    fn every_split_gives_the_same_parts() {
        let body = br#"{"metadata":{"continue":"a\"b"},"items":[{"k":"v\\"},{"k":"w"}],"x":[1,2]}"#;
        let whole = scan_all(&[body]).unwrap();
        for i in 0..=body.len() {
            for j in i..=body.len() {
                let got = scan_all(&[&body[..i], &body[i..j], &body[j..]]).unwrap();
                assert_eq!(got, whole, "split at {i}, {j}");
            }
        }
    }

    #[test]
    fn values_inside_one_chunk_are_not_copied() {
        let chunk = Bytes::from_static(br#"{"items":[{"a":1},{"b":2}]}"#);
        let mut s = ListScanner::new(100);
        s.push(chunk.clone());
        let Some(ListPart::Item(first)) = s.next_part().unwrap() else {
            panic!("no item")
        };
        assert_eq!(first.as_ptr(), chunk[10..].as_ptr());
    }

    #[test]
    fn empty_and_null_items() {
        assert_eq!(scan_all(&[br#"{"items":[]}"#]).unwrap(), []);
        assert_eq!(
            scan_all(&[br#"{"items":null}"#]).unwrap(),
            [field("items", "null")]
        );
        assert_eq!(scan_all(&[b"{}"]).unwrap(), []);
    }

    #[test]
    fn malformed_bodies_fail() {
        for bad in [
            &br#""#[..],
            br#"[]"#,
            br#"{"items":[1,]}"#,
            br#"{"items":[1 2]}"#,
            br#"{"items":[],}"#,
            br#"{"items":[]"#,
            br#"{"items":[{"a":1}"#,
            br#"{"items":[] "kind":"x"}"#,
            br#"{"items":[]} x"#,
            br#"{"items":[],"items":[]}"#,
            br#"{items:[]}"#,
            br#"{"items" []}"#,
            br#"{"items":[}]}"#,
            br#"{"a":"unterminated}"#,
        ] {
            assert!(
                scan_all(&[bad]).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn oversized_values_fail_within_and_across_chunks() {
        let mut s = ListScanner::new(8);
        s.push(Bytes::from_static(br#"{"items":["12345678901"]}"#));
        let err = s.next_part().unwrap_err();
        assert!(err.message.contains("maximum size"), "{err}");
        let mut s = ListScanner::new(8);
        s.push(Bytes::from_static(br#"{"items":["12345"#));
        assert_eq!(s.next_part().unwrap(), None);
        s.push(Bytes::from_static(br#"678901"]}"#));
        assert!(s.next_part().is_err());
    }

    #[test]
    fn errors_name_the_offset() {
        let err = scan_all(&[br#"{"items":[1,]}"#]).unwrap_err();
        assert_eq!(err.offset, 12);
        assert!(err.to_string().contains("byte 12"), "{err}");
    }
}
