//! The watch stream: the server sends one JSON event per line over a
//! chunked body, or (`application/vnd.kubernetes.protobuf;stream=watch`)
//! length-prefixed protobuf WatchEvents. [`FrameDecoder`] cuts the chunks
//! into JSON frames (a frame may span chunks, a chunk may hold several
//! frames, frames larger than the limit are an error) without copying
//! frames that sit inside one chunk, kcontrol-proto's decoder the protobuf
//! ones; [`WatchStream`] decodes each frame straight into a [`WatchEvent`].
//!
//! After an error item (transport, oversized or undecodable frame) the
//! stream ends. Nothing here panics on any input.

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::Stream;
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::wire::WatchEvent;

/// Splits a byte stream into newline-terminated frames.
#[derive(Debug)]
pub struct FrameDecoder {
    /// The unscanned rest of the last chunk.
    current: Bytes,
    /// The start of a frame that continues in a later chunk.
    partial: BytesMut,
    max_frame_size: usize,
}

impl FrameDecoder {
    /// A decoder that rejects frames longer than `max_frame_size` bytes
    /// (not counting the newline).
    pub fn new(max_frame_size: usize) -> Self {
        Self {
            current: Bytes::new(),
            partial: BytesMut::new(),
            max_frame_size,
        }
    }

    /// Adds a chunk. Call [`FrameDecoder::next_frame`] until it returns
    /// `None` before pushing the next one (pushing earlier works, but copies).
    pub fn push(&mut self, chunk: Bytes) {
        crate::chunks::append(&mut self.current, chunk);
    }

    fn too_large(&self) -> Error {
        Error::FrameTooLarge {
            limit: self.max_frame_size,
        }
    }

    /// The next complete frame, `None` when more input is needed. Empty
    /// lines are skipped; a trailing `\r` is removed.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            if self.current.is_empty() {
                return Ok(None);
            }
            let Some(newline) = memchr::memchr(b'\n', &self.current) else {
                if self.partial.len() + self.current.len() > self.max_frame_size {
                    return Err(self.too_large());
                }
                self.partial.extend_from_slice(&self.current);
                self.current = Bytes::new();
                return Ok(None);
            };
            let mut line = self.current.split_to(newline + 1);
            line.truncate(newline);
            let frame = if self.partial.is_empty() {
                line
            } else {
                if self.partial.len() + line.len() > self.max_frame_size {
                    return Err(self.too_large());
                }
                self.partial.extend_from_slice(&line);
                self.partial.split().freeze()
            };
            if let Some(frame) = self.finish_frame(frame)? {
                return Ok(Some(frame));
            }
        }
    }

    /// Trims a frame and checks its size; `None` for a blank line.
    fn finish_frame(&self, mut frame: Bytes) -> Result<Option<Bytes>, Error> {
        if frame.last() == Some(&b'\r') {
            frame.truncate(frame.len() - 1);
        }
        if frame.len() > self.max_frame_size {
            return Err(self.too_large());
        }
        if frame.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        Ok(Some(frame))
    }

    /// At the end of the body: the last frame if it had no newline.
    pub fn finish(&mut self) -> Result<Option<Bytes>, Error> {
        if let Some(frame) = self.next_frame()? {
            return Ok(Some(frame));
        }
        let rest = self.partial.split().freeze();
        self.finish_frame(rest)
    }
}

/// A boxed stream of body chunks.
type ChunkStream = Pin<Box<dyn Stream<Item = Result<Bytes, Error>> + Send>>;

/// How the frames of a stream are cut.
enum Framing {
    /// One JSON event per line.
    Json(FrameDecoder),
    /// 4-byte length + protobuf WatchEvent.
    Protobuf(kcontrol_proto::watch::FrameDecoder),
}

impl Framing {
    fn push(&mut self, chunk: Bytes) {
        match self {
            Framing::Json(d) => d.push(chunk),
            Framing::Protobuf(d) => d.push(chunk),
        }
    }
}

/// A stream of [`WatchEvent`]s decoded from a stream of body chunks.
///
/// Returned by [`Api::watch`](crate::Api::watch); it can also be built over
/// any chunk stream (tests, benchmarks, recorded bodies).
pub struct WatchStream<K> {
    source: ChunkStream,
    decoder: Framing,
    source_done: bool,
    done: bool,
    decode: kcontrol_proto::DecodeOptions,
    _k: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for WatchStream<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<K: DeserializeOwned> WatchStream<K> {
    /// Decodes the events in `chunks`, rejecting frames over `max_frame_size` bytes.
    pub fn new<S>(chunks: S, max_frame_size: usize) -> Self
    where
        S: Stream<Item = Result<Bytes, Error>> + Send + 'static,
    {
        Self::with_framing(chunks, Framing::Json(FrameDecoder::new(max_frame_size)))
    }

    /// Decodes the protobuf events (`;stream=watch`) in `chunks`, rejecting
    /// frames over `max_frame_size` bytes.
    pub fn new_protobuf<S>(chunks: S, max_frame_size: usize) -> Self
    where
        S: Stream<Item = Result<Bytes, Error>> + Send + 'static,
    {
        Self::with_framing(
            chunks,
            Framing::Protobuf(kcontrol_proto::watch::FrameDecoder::new(max_frame_size)),
        )
    }

    fn with_framing<S>(chunks: S, decoder: Framing) -> Self
    where
        S: Stream<Item = Result<Bytes, Error>> + Send + 'static,
    {
        Self {
            source: Box::pin(chunks),
            decoder,
            source_done: false,
            done: false,
            decode: kcontrol_proto::DecodeOptions::default(),
            _k: PhantomData,
        }
    }

    /// Decodes the objects of protobuf events without
    /// `metadata.managedFields`, skipped unread
    /// ([`WatchParams::strip_managed_fields`](crate::WatchParams::strip_managed_fields));
    /// JSON events keep them.
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.decode = self.decode.strip_managed_fields(on);
        self
    }

    /// Ends the stream with `item` (an error or the last event).
    fn last(
        &mut self,
        item: Result<WatchEvent<K>, Error>,
    ) -> Poll<Option<Result<WatchEvent<K>, Error>>> {
        if item.is_err() {
            self.done = true;
        }
        Poll::Ready(Some(item))
    }
}

/// Decodes one frame into an event.
pub fn decode_event<K: DeserializeOwned>(frame: &[u8]) -> Result<WatchEvent<K>, Error> {
    serde_json::from_slice(frame).map_err(|source| Error::Decode {
        what: "watch event".to_owned(),
        source,
    })
}

/// Decodes one protobuf frame (a `meta/v1` WatchEvent) into an event.
pub fn decode_protobuf_event<K: DeserializeOwned>(frame: &[u8]) -> Result<WatchEvent<K>, Error> {
    decode_protobuf_event_with(frame, kcontrol_proto::DecodeOptions::default())
}

/// [`decode_protobuf_event`] with `options` for the event's object.
fn decode_protobuf_event_with<K: DeserializeOwned>(
    frame: &[u8],
    options: kcontrol_proto::DecodeOptions,
) -> Result<WatchEvent<K>, Error> {
    crate::wire::decode_protobuf_event(frame, options).map_err(|source| Error::DecodeProtobuf {
        what: "watch event".to_owned(),
        source,
    })
}

impl<K: DeserializeOwned> WatchStream<K> {
    /// The next item of a JSON stream, `None` when more input is needed.
    fn next_json(&mut self) -> Option<Option<Result<WatchEvent<K>, Error>>> {
        let Framing::Json(decoder) = &mut self.decoder else {
            return None;
        };
        let (frame, unterminated) = match decoder.next_frame() {
            Ok(None) if self.source_done => (decoder.finish(), true),
            other => (other, false),
        };
        match frame {
            Ok(Some(frame)) if unterminated => match decode_event(&frame) {
                // the body ended cleanly inside the last frame: the
                // connection was closed mid-event, which is how a watch
                // ends when a server or proxy goes away (client-go reads
                // it as an unexpected EOF: a normal close)
                Err(Error::Decode { source, .. }) if source.is_eof() => {
                    tracing::debug!(
                        bytes = frame.len(),
                        "watch body ended inside its last frame"
                    );
                    Some(None)
                }
                other => Some(Some(other)),
            },
            Ok(Some(frame)) => Some(Some(decode_event(&frame))),
            Err(e) => Some(Some(Err(e))),
            Ok(None) if self.source_done => Some(None),
            Ok(None) => None,
        }
    }

    /// The next item of a protobuf stream, `None` when more input is needed.
    fn next_protobuf(&mut self) -> Option<Option<Result<WatchEvent<K>, Error>>> {
        let Framing::Protobuf(decoder) = &mut self.decoder else {
            return None;
        };
        match decoder.next_frame() {
            Ok(Some(frame)) => Some(Some(decode_protobuf_event_with(&frame, self.decode))),
            Err(kcontrol_proto::watch::FrameError::TooLarge { limit, .. }) => {
                Some(Some(Err(Error::FrameTooLarge { limit })))
            }
            Ok(None) if self.source_done => {
                if decoder.has_partial_frame() {
                    // the connection closed mid-frame: a normal end, as above
                    tracing::debug!("watch body ended inside its last frame");
                }
                Some(None)
            }
            Ok(None) => None,
        }
    }
}

impl<K: DeserializeOwned> Stream for WatchStream<K> {
    type Item = Result<WatchEvent<K>, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            let next = match self.decoder {
                Framing::Json(_) => self.next_json(),
                Framing::Protobuf(_) => self.next_protobuf(),
            };
            match next {
                Some(Some(item)) => return self.last(item),
                Some(None) => {
                    self.done = true;
                    return Poll::Ready(None);
                }
                None => {}
            }
            match self.source.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => self.decoder.push(chunk),
                Poll::Ready(Some(Err(e))) => return self.last(Err(e)),
                Poll::Ready(None) => self.source_done = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(decoder: &mut FrameDecoder) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(f) = decoder.next_frame().unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn several_frames_in_one_chunk_and_one_across_chunks() {
        let mut d = FrameDecoder::new(100);
        d.push(Bytes::from_static(b"{\"a\":1}\n{\"b\":2}\r\n\n{\"c\""));
        assert_eq!(
            frames(&mut d),
            vec![
                Bytes::from_static(b"{\"a\":1}"),
                Bytes::from_static(b"{\"b\":2}")
            ]
        );
        d.push(Bytes::from_static(b":3}"));
        assert!(frames(&mut d).is_empty());
        d.push(Bytes::from_static(b"\n"));
        assert_eq!(frames(&mut d), vec![Bytes::from_static(b"{\"c\":3}")]);
        assert_eq!(d.finish().unwrap(), None);
    }

    #[test]
    fn frames_inside_a_chunk_are_not_copied() {
        let chunk = Bytes::from_static(b"abc\ndef\n");
        let mut d = FrameDecoder::new(100);
        d.push(chunk.clone());
        let got = frames(&mut d);
        assert_eq!(got[1].as_ptr(), chunk[4..].as_ptr());
    }

    #[test]
    fn unterminated_last_frame_is_returned_at_the_end() {
        let mut d = FrameDecoder::new(100);
        d.push(Bytes::from_static(b"x\ny"));
        assert_eq!(frames(&mut d), vec![Bytes::from_static(b"x")]);
        assert_eq!(d.finish().unwrap(), Some(Bytes::from_static(b"y")));
    }

    fn events_of(body: &[&'static str]) -> Vec<Result<WatchEvent<serde_json::Value>, Error>> {
        let chunks: Vec<Result<Bytes, Error>> = body
            .iter()
            .map(|c| Ok(Bytes::from_static(c.as_bytes())))
            .collect();
        let stream = WatchStream::<serde_json::Value>::new(futures::stream::iter(chunks), 1 << 20);
        futures::executor::block_on(futures::StreamExt::collect(stream))
    }

    #[test]
    fn a_body_ending_inside_its_last_frame_is_a_normal_end() {
        let bookmark = r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}"#;
        let got = events_of(&[bookmark, "\n", r#"{"type":"MODIFIED","obj"#]);
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], Ok(WatchEvent::Bookmark(b)) if b.resource_version() == "7"));
        // complete but unterminated: still decoded
        let got = events_of(&[bookmark]);
        assert!(matches!(&got[..], [Ok(WatchEvent::Bookmark(_))]));
        // garbage at the end is still an error
        let got = events_of(&[bookmark, "\n", "not json"]);
        assert_eq!(got.len(), 2);
        assert!(matches!(got[1], Err(Error::Decode { .. })));
        // a bad complete frame too
        let got = events_of(&[r#"{"type":"MODIFIED","obj"#, "\n"]);
        assert!(matches!(got[..], [Err(Error::Decode { .. })]));
    }

    #[test]
    fn size_limit_applies_within_and_across_chunks() {
        let mut d = FrameDecoder::new(4);
        d.push(Bytes::from_static(b"1234\n12345\n"));
        assert_eq!(d.next_frame().unwrap(), Some(Bytes::from_static(b"1234")));
        assert!(matches!(
            d.next_frame(),
            Err(Error::FrameTooLarge { limit: 4 })
        ));
        let mut d = FrameDecoder::new(4);
        d.push(Bytes::from_static(b"12"));
        assert!(d.next_frame().unwrap().is_none());
        d.push(Bytes::from_static(b"345"));
        assert!(matches!(d.next_frame(), Err(Error::FrameTooLarge { .. })));
    }
}
