//! Response bodies: whole buffers, list bodies assembled from the stored
//! objects' encoded bytes in large chunks (with an exact length), and
//! channel-fed streams for watches.

use bytes::{Bytes, BytesMut};
use http_body_util::combinators::BoxBody;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// The body type of every response.
pub(crate) type ResponseBody = BoxBody<Bytes, Infallible>;

/// A whole buffer.
pub(crate) fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    http_body_util::Full::new(bytes.into()).boxed()
}

const CHUNK: usize = 256 * 1024;

/// `head`, then the items separated by commas, then `tail`.
pub(crate) struct JoinedBody {
    head: Option<Bytes>,
    items: std::vec::IntoIter<Bytes>,
    first: bool,
    tail: Option<Bytes>,
    remaining: u64,
}

impl JoinedBody {
    pub(crate) fn new(head: Bytes, items: Vec<Bytes>, tail: Bytes) -> Self {
        let items_len: usize =
            items.iter().map(Bytes::len).sum::<usize>() + items.len().saturating_sub(1);
        let remaining = (head.len() + items_len + tail.len()) as u64;
        Self {
            head: Some(head),
            items: items.into_iter(),
            first: true,
            tail: Some(tail),
            remaining,
        }
    }
}

impl Body for JoinedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let mut buf = BytesMut::with_capacity(CHUNK + 4096);
        if let Some(h) = this.head.take() {
            buf.extend_from_slice(&h);
        }
        while buf.len() < CHUNK {
            match this.items.next() {
                Some(item) => {
                    if !this.first {
                        buf.extend_from_slice(b",");
                    }
                    this.first = false;
                    buf.extend_from_slice(&item);
                }
                None => {
                    if let Some(t) = this.tail.take() {
                        buf.extend_from_slice(&t);
                    }
                    break;
                }
            }
        }
        if buf.is_empty() {
            return Poll::Ready(None);
        }
        this.remaining = this.remaining.saturating_sub(buf.len() as u64);
        Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0 && self.head.is_none() && self.tail.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// A body fed by a channel; ends when the sender is dropped.
pub(crate) struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl ChannelBody {
    pub(crate) fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self { rx }
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn joined_body_has_exact_length() {
        let items: Vec<Bytes> = (0..5000)
            .map(|i| Bytes::from(format!("{{\"i\":{i}}}")))
            .collect();
        let body = JoinedBody::new(
            Bytes::from_static(b"{\"items\":["),
            items,
            Bytes::from_static(b"]}"),
        );
        let hint = body.size_hint().exact();
        let collected = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        assert_eq!(Some(collected.len() as u64), hint);
        let v: serde_json::Value = serde_json::from_slice(&collected).unwrap_or_default();
        assert_eq!(v["items"].as_array().map(Vec::len), Some(5000));
        let empty = JoinedBody::new(
            Bytes::from_static(b"["),
            Vec::new(),
            Bytes::from_static(b"]"),
        );
        assert_eq!(
            empty
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default(),
            Bytes::from_static(b"[]")
        );
    }
}
