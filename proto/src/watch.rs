//! Protobuf watch streams (`application/vnd.kubernetes.protobuf;stream=watch`):
//! frames of a 4-byte big-endian length and a `meta/v1` WatchEvent (not
//! enveloped) whose `object.raw` is the enveloped object.
//! [`FrameDecoder`] cuts body chunks into frames (without copying a frame
//! that sits inside one chunk); [`event`] reads one.

use bytes::{Bytes, BytesMut};

use crate::error::Error;
use crate::wire::{Reader, Value};

/// Why the frame decoder stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame announced more bytes than the limit.
    #[error("watch frame of {size} bytes exceeds the maximum frame size of {limit} bytes")]
    TooLarge {
        /// The announced size.
        size: u64,
        /// The limit.
        limit: usize,
    },
}

/// Splits a byte stream into length-prefixed frames.
#[derive(Debug)]
pub struct FrameDecoder {
    current: Bytes,
    /// The start of a frame (or of its length) that continues in a later chunk.
    partial: BytesMut,
    /// The length of the frame being gathered into `partial`.
    frame_len: Option<usize>,
    max_frame_size: usize,
}

impl FrameDecoder {
    /// A decoder that rejects frames longer than `max_frame_size` bytes.
    pub fn new(max_frame_size: usize) -> Self {
        Self {
            current: Bytes::new(),
            partial: BytesMut::new(),
            frame_len: None,
            max_frame_size,
        }
    }

    /// Adds a chunk.
    pub fn push(&mut self, chunk: Bytes) {
        if self.current.is_empty() {
            self.current = chunk;
        } else {
            let mut joined = BytesMut::with_capacity(self.current.len() + chunk.len());
            joined.extend_from_slice(&self.current);
            joined.extend_from_slice(&chunk);
            self.current = joined.freeze();
        }
    }

    /// The next complete frame (without its length), `None` when more
    /// input is needed.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            if let Some(len) = self.frame_len {
                let need = len - self.partial.len();
                if self.current.len() < need {
                    self.partial.extend_from_slice(&self.current);
                    self.current = Bytes::new();
                    return Ok(None);
                }
                self.partial.extend_from_slice(&self.current.split_to(need));
                self.frame_len = None;
                return Ok(Some(self.partial.split().freeze()));
            }
            let Some(head) = self.current.get(..4) else {
                return Ok(None);
            };
            let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let len = len as usize;
            if len > self.max_frame_size {
                return Err(FrameError::TooLarge {
                    size: len as u64,
                    limit: self.max_frame_size,
                });
            }
            if self.current.len() >= 4 + len {
                let mut frame = self.current.split_to(4 + len);
                let _ = frame.split_to(4);
                return Ok(Some(frame));
            }
            let _ = self.current.split_to(4);
            self.partial.reserve(len);
            self.frame_len = Some(len);
        }
    }

    /// Whether the input ended inside a frame (bytes left that make no
    /// whole frame).
    pub fn has_partial_frame(&self) -> bool {
        self.frame_len.is_some() || !self.current.is_empty()
    }
}

/// One watch event, borrowed from its frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<'de> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`...
    pub event_type: &'de str,
    /// The enveloped object (`k8s\0`...).
    pub object: &'de [u8],
}

/// Reads the WatchEvent of a frame.
pub fn event(frame: &[u8]) -> Result<Event<'_>, Error> {
    let mut reader = Reader::new(frame);
    let (mut event_type, mut object) = (None, None);
    while let Some((number, value)) = reader.field()? {
        match (number, value) {
            (1, Value::Len(t)) => {
                event_type = Some(
                    std::str::from_utf8(t)
                        .map_err(|_| Error::new("the event type is not UTF-8"))?,
                )
            }
            (2, Value::Len(raw)) => object = Some(crate::de::raw_field(raw)?),
            (1 | 2, _) => return Err(Error::wire("a watch event field of the wrong wire type")),
            _ => {}
        }
    }
    Ok(Event {
        event_type: event_type.ok_or_else(|| Error::new("the watch event has no type"))?,
        object: object.ok_or_else(|| Error::new("the watch event has no object"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(bodies: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    #[test]
    fn frames_split_anywhere_come_out_whole() {
        let body = framed(&[b"abc", b"", b"defgh"]);
        for step in 1..body.len() {
            let mut d = FrameDecoder::new(100);
            let mut got = Vec::new();
            for chunk in body.chunks(step) {
                d.push(Bytes::copy_from_slice(chunk));
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, vec![&b"abc"[..], b"", b"defgh"], "step {step}");
            assert!(!d.has_partial_frame());
        }
    }

    #[test]
    fn frames_inside_a_chunk_are_not_copied_and_limits_hold() {
        let body = Bytes::from(framed(&[b"abc", b"de"]));
        let mut d = FrameDecoder::new(100);
        d.push(body.clone());
        let first = d.next_frame().unwrap().unwrap();
        assert_eq!(first.as_ptr(), body[4..].as_ptr());
        let mut d = FrameDecoder::new(2);
        d.push(body);
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge { size: 3, limit: 2 })
        );
        let mut d = FrameDecoder::new(10);
        d.push(Bytes::from_static(&[0, 0, 0, 5, 1]));
        assert_eq!(d.next_frame(), Ok(None));
        assert!(d.has_partial_frame());
    }

    #[test]
    fn events_need_a_type_and_an_object() {
        // type "ADDED", object RawExtension{raw: "k8s\0"}
        let frame = [
            0x0a, 5, b'A', b'D', b'D', b'E', b'D', 0x12, 6, 0x0a, 4, b'k', b'8', b's', 0,
        ];
        let e = event(&frame).unwrap();
        assert_eq!(e.event_type, "ADDED");
        assert_eq!(e.object, b"k8s\0");
        assert!(event(&frame[..7]).is_err());
        assert!(event(&frame[7..]).is_err());
        assert!(event(&[0x0a, 1, 0xff, 0x12, 0]).is_err());
    }
}
