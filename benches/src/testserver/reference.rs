//! The in-process reference of the `testserver` rows: a bare hyper
//! HTTP/1.1 server on loopback that serves bytes built in advance, so the
//! same client reading the same bytes shows what the transport alone costs.
//!
//! `GET /part/<i>` answers part `i` whole (with a Content-Length, as a list
//! is served); `GET /stream` answers every part in order as chunks of one
//! chunked body (as a watch is served).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A running reference server; stops when dropped.
pub struct Reference {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Reference {
    /// Serves `parts` on a free port of 127.0.0.1.
    pub async fn start(parts: Vec<Bytes>) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("binding the reference server: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("reference server address: {e}"))?;
        let parts = Arc::new(parts);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = tcp.set_nodelay(true);
                let parts = Arc::clone(&parts);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let response = answer(&parts, &req);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Ok(Self { addr, task })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(parts: &Arc<Vec<Bytes>>, req: &Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    if path == "/stream" {
        let body = Chunked(parts.as_ref().clone().into_iter());
        return Response::new(body.boxed());
    }
    let part = path
        .strip_prefix("/part/")
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| parts.get(i));
    match part {
        Some(bytes) => Response::new(Full::new(bytes.clone()).boxed()),
        None => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"no such part")).boxed());
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    }
}

/// Every part in order, one data frame each, with no length announced
/// (so it is sent chunked, as a watch is).
struct Chunked(std::vec::IntoIter<Bytes>);

impl hyper::body::Body for Chunked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.next().map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testserver::conn::{read_frames, Conn};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_parts_whole_and_streamed() {
        let parts = vec![Bytes::from_static(b"a\nb\n"), Bytes::from_static(b"c\n")];
        let reference = Reference::start(parts).await.unwrap();
        let mut conn = Conn::open(reference.addr()).await.unwrap();
        assert_eq!(conn.fetch("/part/1").await.unwrap(), "c\n");
        assert_eq!(conn.drain("/part/0").await.unwrap().bytes, 4);
        assert!(conn.get("/part/2").await.is_err());
        let mut conn = Conn::open(reference.addr()).await.unwrap();
        let mut body = conn.get("/stream").await.unwrap();
        let mut seen = Vec::new();
        let bytes = read_frames(&mut body, 3, |_, n, _| seen.push(n))
            .await
            .unwrap();
        assert_eq!(bytes, 6);
        assert_eq!(seen.last(), Some(&3));
    }
}
