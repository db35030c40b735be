//! The client side of every `testserver` measurement: one plain hyper
//! HTTP/1.1 connection over loopback, and readers that drain a response
//! body without decoding it (counting bytes, or watch frames by their
//! terminating newline).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Longest wait for the next chunk of a body before a run is abandoned
/// (a stalled server must end the benchmark, not hang it).
const STALL: Duration = Duration::from_secs(30);

/// Bytes of the start of a body kept by [`Conn::drain`]: enough for a
/// list's `kind`, `apiVersion` and `metadata`.
const HEAD: usize = 1024;

/// One HTTP/1.1 connection, reused for consecutive requests.
pub struct Conn {
    sender: SendRequest<Empty<Bytes>>,
    authority: String,
}

/// What [`Conn::drain`] read.
pub struct Drained {
    /// Bytes of the body.
    pub bytes: usize,
    /// The first bytes of the body (up to 1 KiB).
    pub head: Vec<u8>,
}

impl Conn {
    /// Connects to `addr` (TCP_NODELAY, as hyper's pooled client sets it).
    pub async fn open(addr: SocketAddr) -> Result<Self, String> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        tcp.set_nodelay(true)
            .map_err(|e| format!("TCP_NODELAY on {addr}: {e}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("HTTP handshake with {addr}: {e}"))?;
        tokio::spawn(async move {
            // Ends when the body of a watch is dropped before its end, or
            // when the connection is closed by either side.
            let _ = connection.await;
        });
        Ok(Self {
            sender,
            authority: addr.to_string(),
        })
    }

    /// Sends `GET path` and returns the body of a 2xx answer.
    pub async fn get(&mut self, path: &str) -> Result<Incoming, String> {
        self.sender
            .ready()
            .await
            .map_err(|e| format!("GET {path}: connection closed: {e}"))?;
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::ACCEPT, "application/json")
            .body(Empty::new())
            .map_err(|e| format!("GET {path}: {e}"))?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {path}: HTTP {}", response.status()));
        }
        Ok(response.into_body())
    }

    /// `GET path`, reading the whole body without keeping it.
    pub async fn drain(&mut self, path: &str) -> Result<Drained, String> {
        let mut body = self.get(path).await?;
        let mut drained = Drained {
            bytes: 0,
            head: Vec::with_capacity(HEAD),
        };
        while let Some(data) = next_data(&mut body, path).await? {
            if drained.head.len() < HEAD {
                let take = (HEAD - drained.head.len()).min(data.len());
                drained
                    .head
                    .extend_from_slice(data.get(..take).unwrap_or_default());
            }
            drained.bytes += data.len();
        }
        Ok(drained)
    }

    /// `GET path`, keeping the whole body.
    pub async fn fetch(&mut self, path: &str) -> Result<Bytes, String> {
        let mut body = self.get(path).await?;
        let mut all = BytesMut::new();
        while let Some(data) = next_data(&mut body, path).await? {
            all.extend_from_slice(&data);
        }
        Ok(all.freeze())
    }
}

/// The next data chunk of `body`, `None` at its end.
pub async fn next_data(body: &mut Incoming, what: &str) -> Result<Option<Bytes>, String> {
    loop {
        let frame = tokio::time::timeout(STALL, body.frame())
            .await
            .map_err(|_| format!("{what}: no data for {STALL:?}"))?;
        match frame {
            None => return Ok(None),
            Some(Err(e)) => return Err(format!("{what}: reading the body: {e}")),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// Reads a watch body until `events` frames (newline-terminated JSON
/// lines) arrived. `on_chunk` is called after every chunk with the number
/// of frames complete so far and when the chunk arrived. Returns the bytes
/// read.
pub async fn read_frames(
    body: &mut Incoming,
    events: usize,
    mut on_chunk: impl FnMut(&Bytes, usize, Instant),
) -> Result<usize, String> {
    let mut seen = 0usize;
    let mut bytes = 0usize;
    while seen < events {
        let Some(data) = next_data(body, "watch").await? else {
            return Err(format!("watch ended after {seen} of {events} events"));
        };
        let now = Instant::now();
        seen += memchr::memchr_iter(b'\n', &data).count();
        bytes += data.len();
        on_chunk(&data, seen, now);
    }
    Ok(bytes)
}

/// The `metadata.continue` token of a list whose body starts with `head`
/// (`None` on the last page). The token is URL-safe base64.
pub fn continue_token(head: &[u8]) -> Result<Option<String>, String> {
    const KEY: &[u8] = b"\"continue\":\"";
    let metadata_end = memchr::memmem::find(head, b"\"items\":").unwrap_or(head.len());
    let metadata = head.get(..metadata_end).unwrap_or_default();
    let Some(at) = memchr::memmem::find(metadata, KEY) else {
        return Ok(None);
    };
    let rest = metadata.get(at + KEY.len()..).unwrap_or_default();
    let end = memchr::memchr(b'"', rest).ok_or("list metadata: unterminated continue token")?;
    let token = rest.get(..end).unwrap_or_default();
    if token.is_empty()
        || !token
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
    {
        return Err("list metadata: the continue token is not URL-safe base64".into());
    }
    Ok(Some(String::from_utf8_lossy(token).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_continue_token_in_the_list_metadata_only() {
        let page = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"eyJ2Ijoi_-9"},"items":[{"continue":"no"}]}"#;
        assert_eq!(
            continue_token(page).unwrap().as_deref(),
            Some("eyJ2Ijoi_-9")
        );
        let last = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{},"data":{"x":"\"continue\":\"abc"}}]}"#;
        assert_eq!(continue_token(last).unwrap(), None);
        assert!(continue_token(br#"{"metadata":{"continue":"a b"},"items":[]}"#).is_err());
        assert!(continue_token(br#"{"metadata":{"continue":"abc"#).is_err());
    }
}
