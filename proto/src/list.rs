//! [`ListDecoder`]: a protobuf list answer (`k8s\0` + `runtime.Unknown`
//! whose `raw` is an `XxxList` message: `1` ListMeta, `2` the items) cut
//! into its parts as body chunks arrive, so a list of any size is never
//! held whole: each item comes out as its own bytes, without a copy when it
//! sits inside one chunk, gathered into a buffer of exactly its size when
//! it spans chunks.

use bytes::{Bytes, BytesMut};

use crate::envelope::{check_content, schema_of, type_meta, MAGIC};
use crate::error::Error;
use crate::schema::Message;
use crate::wire::complete_varint;

/// One part of a list answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListPart {
    /// The `ListMeta` message (decode it with [`ListDecoder::list_meta`]'s schema).
    Meta(Bytes),
    /// One item's message (decode it with [`ListDecoder::item`]'s schema).
    Item(Bytes),
}

/// Where the decoder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the magic.
    Magic,
    /// At a field of the envelope.
    Envelope,
    /// Inside `raw` (the list message), `remaining` bytes of it left.
    List { remaining: u64 },
}

/// What a value being gathered is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gathering {
    /// An envelope field (type meta, content encoding...).
    Envelope(u32),
    /// A field of the list message.
    List(u32),
}

/// Cuts a protobuf list body into [`ListPart`]s.
#[derive(Debug)]
pub struct ListDecoder {
    current: Bytes,
    partial: BytesMut,
    /// The value being gathered into `partial`, and its length.
    gathering: Option<(Gathering, usize)>,
    state: State,
    list: Option<&'static Message>,
    api_version: String,
    kind: String,
    saw_raw: bool,
    max_item_size: usize,
    offset: u64,
}

impl ListDecoder {
    /// A decoder that rejects an item (or any other value) over
    /// `max_item_size` bytes.
    pub fn new(max_item_size: usize) -> Self {
        Self {
            current: Bytes::new(),
            partial: BytesMut::new(),
            gathering: None,
            state: State::Magic,
            list: None,
            api_version: String::new(),
            kind: String::new(),
            saw_raw: false,
            max_item_size,
            offset: 0,
        }
    }

    /// `apiVersion` of the list, once read.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// `kind` of the list (`ConfigMapList`), once read.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The schema of the items, once the envelope's type meta was read.
    pub fn item(&self) -> Option<&'static Message> {
        self.list.and_then(Message::list_item)
    }

    /// The schema of the list metadata, once the type meta was read.
    pub fn list_meta(&self) -> Option<&'static Message> {
        self.list.and_then(Message::list_meta)
    }

    /// Adds a chunk. Call [`next_part`](Self::next_part) until it returns
    /// `None` before pushing the next one.
    pub fn push(&mut self, mut chunk: Bytes) {
        if let Some((_, len)) = self.gathering {
            let take = (len - self.partial.len()).min(chunk.len());
            self.partial.extend_from_slice(&chunk.split_to(take));
            self.count(take);
        }
        if self.current.is_empty() {
            self.current = chunk;
        } else if !chunk.is_empty() {
            // an unfinished tag or length: a few bytes, joined with the chunk
            let mut joined = BytesMut::with_capacity(self.current.len() + chunk.len());
            joined.extend_from_slice(&self.current);
            joined.extend_from_slice(&chunk);
            self.current = joined.freeze();
        }
    }

    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::new(format!(
            "malformed protobuf list at byte {}: {message}",
            self.offset
        ))
    }

    /// Counts `n` bytes read (the offset, and what is left of the list).
    fn count(&mut self, n: usize) {
        self.offset += n as u64;
        if let State::List { remaining } = &mut self.state {
            *remaining = remaining.saturating_sub(n as u64);
        }
    }

    fn consume(&mut self, n: usize) -> Bytes {
        self.count(n);
        self.current.split_to(n)
    }

    /// A tag and, for a length-delimited field, its length; `None` when
    /// more bytes are needed.
    fn header(&mut self) -> Result<Option<(u32, u8, u64)>, Error> {
        let Some((key, n)) = complete_varint(&self.current).map_err(|e| self.error(e))? else {
            return Ok(None);
        };
        let wire = (key & 7) as u8;
        let number = u32::try_from(key >> 3).map_err(|_| self.error("field number too large"))?;
        if wire != 2 {
            return Err(self.error(format!("field {number} is not length-delimited")));
        }
        let Some((len, m)) = complete_varint(self.current.get(n..).unwrap_or_default())
            .map_err(|e| self.error(e))?
        else {
            return Ok(None);
        };
        self.consume(n + m);
        Ok(Some((number, wire, len)))
    }

    /// Starts gathering a value of `len` bytes: at once when the chunk holds it.
    fn gather(&mut self, what: Gathering, len: u64) -> Result<Option<(Gathering, Bytes)>, Error> {
        let len = usize::try_from(len)
            .ok()
            .filter(|l| *l <= self.max_item_size)
            .ok_or_else(|| {
                self.error(format!(
                    "a value of {len} bytes exceeds the limit of {} bytes",
                    self.max_item_size
                ))
            })?;
        if let State::List { remaining } = self.state {
            if len as u64 > remaining {
                return Err(self.error("a list field overruns the list"));
            }
        }
        if self.current.len() >= len {
            return Ok(Some((what, self.consume(len))));
        }
        let have = self.current.len();
        let start = self.consume(have);
        self.partial.reserve(len);
        self.partial.extend_from_slice(&start);
        self.gathering = Some((what, len));
        Ok(None)
    }

    /// The next part, `None` when more input is needed.
    pub fn next_part(&mut self) -> Result<Option<ListPart>, Error> {
        loop {
            let value = match self.gathering {
                Some((what, len)) if self.partial.len() == len => {
                    self.gathering = None;
                    Some((what, self.partial.split().freeze()))
                }
                Some(_) => return Ok(None),
                None => match self.step()? {
                    Step::Value(what, bytes) => Some((what, bytes)),
                    Step::Again => None,
                    Step::NeedMore => return Ok(None),
                },
            };
            if let Some((what, bytes)) = value {
                if let Some(part) = self.finish_value(what, bytes)? {
                    return Ok(Some(part));
                }
            }
        }
    }

    /// One step of the state machine over `current`.
    fn step(&mut self) -> Result<Step, Error> {
        match self.state {
            State::Magic => {
                if self.current.len() < MAGIC.len() {
                    return Ok(Step::NeedMore);
                }
                if self.consume(MAGIC.len()) != MAGIC {
                    return Err(
                        self.error("the body does not start with the protobuf magic k8s\\0")
                    );
                }
                self.state = State::Envelope;
                Ok(Step::Again)
            }
            State::List { remaining: 0 } => {
                self.state = State::Envelope;
                Ok(Step::Again)
            }
            State::Envelope | State::List { .. } => {
                let Some((number, _, len)) = self.header()? else {
                    return Ok(Step::NeedMore);
                };
                let what = match self.state {
                    State::Envelope if number == 2 => {
                        if self.list.is_none() {
                            return Err(
                                self.error("the list's raw bytes come before its type meta")
                            );
                        }
                        self.saw_raw = true;
                        self.state = State::List { remaining: len };
                        return Ok(Step::Again);
                    }
                    State::Envelope => Gathering::Envelope(number),
                    _ => Gathering::List(number),
                };
                Ok(match self.gather(what, len)? {
                    Some((what, bytes)) => Step::Value(what, bytes),
                    None => Step::NeedMore,
                })
            }
        }
    }

    /// A value read whole: a part to hand out, or envelope bookkeeping.
    fn finish_value(&mut self, what: Gathering, bytes: Bytes) -> Result<Option<ListPart>, Error> {
        match what {
            Gathering::List(1) => Ok(Some(ListPart::Meta(bytes))),
            Gathering::List(2) => Ok(Some(ListPart::Item(bytes))),
            Gathering::List(_) => Ok(None),
            Gathering::Envelope(1) => {
                let (api_version, kind) = type_meta(&bytes).map_err(|e| self.error(e))?;
                self.list = Some(schema_of(api_version, kind)?);
                if self.item().is_none() {
                    return Err(self.error(format!("{kind} is not a list")));
                }
                self.api_version = api_version.to_owned();
                self.kind = kind.to_owned();
                Ok(None)
            }
            Gathering::Envelope(n) => {
                check_content(n, &bytes)?;
                Ok(None)
            }
        }
    }

    /// At the end of the body: an error unless the list was complete.
    pub fn finish(&self) -> Result<(), Error> {
        let clean =
            self.state == State::Envelope && self.gathering.is_none() && self.current.is_empty();
        if !clean {
            return Err(self.error("the body ended inside the list"));
        }
        if !self.saw_raw {
            return Err(self.error("the envelope holds no list"));
        }
        Ok(())
    }
}

/// What one step found.
enum Step {
    Value(Gathering, Bytes),
    Again,
    NeedMore,
}
