//! The wire server: loopback HTTPS (HTTP/2 or HTTP/1.1 by ALPN) that does
//! nothing but answer ConfigMap reads of namespace `bench` with the
//! captured kube-apiserver bytes, paced as its [`Pace`] says:
//!
//! - a list (no `watch`): the list capture, or the metadata-only one when
//!   the first media range of `Accept` asks `as=PartialObjectMetadataList`;
//! - a watch with `sendInitialEvents=true`: the WatchList capture, then the
//!   connection held open without a byte (as a real server holds a watch)
//!   until `timeoutSeconds` or the client goes;
//! - any other watch (the one after a list): held open, no events;
//!
//! each in the encoding the first media range of `Accept` names
//! (`application/vnd.kubernetes.protobuf...` or JSON). There is no
//! metadata-only WatchList capture: such a watch is answered 406, as is any
//! other request this server cannot answer from the captures (404 for
//! another path).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::fixture::{Body, Capture};
use super::pace::PacedBody;
use super::{Encoding, Pace};

/// The only collection served.
pub const PATH: &str = "/api/v1/namespaces/bench/configmaps";

/// How long a watch without `timeoutSeconds` is held open.
const DEFAULT_HOLD: Duration = Duration::from_secs(1800);

/// The captures, shared by every connection.
pub type Captures = Arc<HashMap<Capture, Bytes>>;

type AnswerBody = BoxBody<Bytes, Infallible>;

/// How many times each capture was answered.
type Served = Arc<Mutex<HashMap<Capture, u64>>>;

/// A running wire server; stops accepting when dropped.
pub struct WireServer {
    addr: SocketAddr,
    accept: JoinHandle<()>,
    served: Served,
}

impl WireServer {
    /// Serves `captures` at `pace` on a free port of 127.0.0.1.
    pub async fn start(
        captures: Captures,
        pace: Pace,
        tls: Arc<rustls::ServerConfig>,
    ) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("binding the wire server: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("wire server address: {e}"))?;
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let served = Served::default();
        let counts = Arc::clone(&served);
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = tcp.set_nodelay(true);
                let (acceptor, captures) = (acceptor.clone(), Arc::clone(&captures));
                let counts = Arc::clone(&counts);
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let answer = answer(&captures, pace, &req, &counts);
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            accept,
            served,
        })
    }

    /// `https://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// How many requests `capture` answered so far: which encoding and
    /// body a client really asked for.
    pub fn served(&self, capture: Capture) -> u64 {
        self.served.lock().get(&capture).copied().unwrap_or(0)
    }
}

impl Drop for WireServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// What a request asks, read from its query and `Accept`.
#[derive(Debug, PartialEq, Eq)]
pub struct Asked {
    /// The encoding of `Accept`'s first media range.
    pub encoding: Encoding,
    /// Whether that range asks for `PartialObjectMetadata(List)`.
    pub metadata: bool,
    /// `watch=true` or `watch=1`.
    pub watch: bool,
    /// `sendInitialEvents=true`.
    pub initial_events: bool,
    /// `timeoutSeconds`, when given and a number.
    pub timeout: Option<Duration>,
}

impl Asked {
    /// Reads `query` (without the `?`) and the `Accept` header.
    pub fn of(query: &str, accept: &str) -> Self {
        let mut asked = Self {
            encoding: Encoding::Json,
            metadata: false,
            watch: false,
            initial_events: false,
            timeout: None,
        };
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "watch" => asked.watch = matches!(value, "true" | "1"),
                "sendInitialEvents" => asked.initial_events = value == "true",
                "timeoutSeconds" => {
                    asked.timeout = value.parse().ok().map(Duration::from_secs);
                }
                _ => {}
            }
        }
        let first = accept.split(',').next().unwrap_or("").trim();
        let mut params = first.split(';').map(str::trim);
        if params.next() == Some("application/vnd.kubernetes.protobuf") {
            asked.encoding = Encoding::Protobuf;
        }
        asked.metadata = params.any(|p| p.starts_with("as=PartialObjectMetadata"));
        asked
    }
}

/// The answer to one request (a capture's counted in `served`).
fn answer(
    captures: &Captures,
    pace: Pace,
    req: &Request<Incoming>,
    served: &Served,
) -> Response<AnswerBody> {
    if req.uri().path() != PATH {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "not a path of this server",
        );
    }
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let asked = Asked::of(req.uri().query().unwrap_or(""), accept);
    let body = match (asked.watch, asked.initial_events, asked.metadata) {
        (false, _, false) => Some(Body::List),
        (false, _, true) => Some(Body::MetadataList),
        (true, true, false) => Some(Body::WatchList),
        (true, false, _) => None,
        (true, true, true) => {
            return status(
                StatusCode::NOT_ACCEPTABLE,
                "NotAcceptable",
                "no metadata-only WatchList capture",
            )
        }
    };
    let hold = asked.watch.then(|| asked.timeout.unwrap_or(DEFAULT_HOLD));
    let content_type = Capture {
        body: body.unwrap_or(Body::WatchList),
        encoding: asked.encoding,
    }
    .content_type();
    let (data, rate) = match body {
        Some(body) => {
            let capture = Capture {
                body,
                encoding: asked.encoding,
            };
            let Some(data) = captures.get(&capture) else {
                return status(
                    StatusCode::NOT_ACCEPTABLE,
                    "NotAcceptable",
                    "that capture is not loaded",
                );
            };
            *served.lock().entry(capture).or_default() += 1;
            (data.clone(), capture.rate(pace))
        }
        None => (Bytes::new(), None),
    };
    let mut response = Response::new(PacedBody::new(data, rate, hold).boxed());
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

/// A JSON `Status` answer.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<AnswerBody> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = code;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use kcontrol_client::{Client, Config};

    use super::*;
    use crate::wire::tls;

    /// A client of `server` trusting its CA, as the measuring children build it.
    fn client(server: &WireServer, ca_pem: &str) -> Client {
        let mut config = Config::new(server.url().parse().unwrap());
        config.tls.root_certs = tls::certificates(ca_pem).unwrap();
        Client::new(config).unwrap()
    }

    /// GET with `accept`: status, content type, and the body (read up to
    /// `want` bytes: a watch stays open after them; `0` reads nothing).
    async fn get(
        client: &Client,
        path_and_query: &str,
        accept: &str,
        want: usize,
    ) -> (StatusCode, String, Vec<u8>, Incoming) {
        let request = http::Request::get(path_and_query)
            .header(http::header::ACCEPT, accept)
            .body(Bytes::new())
            .unwrap();
        let response = client.request_raw(request).await.unwrap();
        let code = response.status();
        let content_type = response.headers()[hyper::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let mut body = response.into_body();
        let mut got = Vec::new();
        // a safety net: a body that stops short of `want` fails, not hangs
        let read = async {
            while got.len() < want {
                match body.frame().await {
                    Some(frame) => {
                        if let Some(data) = frame.unwrap().data_ref() {
                            got.extend_from_slice(data);
                        }
                    }
                    None => break,
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .unwrap_or_else(|_| panic!("{path_and_query}: {want} bytes not read within 30 s"));
        (code, content_type, got, body)
    }

    /// Whether a body is still open with nothing more to send a while later.
    async fn stays_open(body: &mut Incoming) -> bool {
        tokio::time::timeout(Duration::from_millis(300), body.frame())
            .await
            .is_err()
    }

    /// Over real TLS: each request gets its capture with the real server's
    /// content type; a WatchList stays open after its bytes; a plain watch
    /// sends nothing and stays open; a metadata-only WatchList and another
    /// path are refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_each_request_with_its_capture_over_tls() {
        let mut captures = HashMap::new();
        for body in [Body::List, Body::WatchList, Body::MetadataList] {
            for encoding in [Encoding::Json, Encoding::Protobuf] {
                let tag = format!("{body:?}-{encoding:?} ");
                // several 64 KiB chunks
                captures.insert(Capture { body, encoding }, Bytes::from(tag.repeat(20_000)));
            }
        }
        let captures: Captures = Arc::new(captures);
        let tls = tls::generate().unwrap();
        let server = WireServer::start(Arc::clone(&captures), Pace::Unpaced, tls.config)
            .await
            .unwrap();
        let client = client(&server, &tls.ca_pem);
        for (&capture, data) in captures.iter() {
            let (code, content_type, got, mut body) = get(
                &client,
                capture.path_and_query(),
                capture.accept(),
                data.len(),
            )
            .await;
            assert_eq!(code, StatusCode::OK, "{capture:?}");
            assert_eq!(server.served(capture), 1, "{capture:?}");
            assert_eq!(content_type, capture.content_type(), "{capture:?}");
            assert!(got == data[..], "{capture:?}: other bytes");
            if capture.body == Body::WatchList {
                assert!(stays_open(&mut body).await, "{capture:?} ended");
            } else {
                assert!(body.frame().await.is_none(), "{capture:?} did not end");
            }
        }
        let watch = format!("{PATH}?watch=true&resourceVersion=191842&allowWatchBookmarks=true");
        // nothing read here (nothing comes): stays_open sees whether a byte does
        let (code, content_type, _, mut body) = get(
            &client,
            &watch,
            "application/vnd.kubernetes.protobuf, application/json",
            0,
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            content_type,
            "application/vnd.kubernetes.protobuf;stream=watch"
        );
        assert!(stays_open(&mut body).await);
        // a watch without initial events answers no capture
        for (&capture, _) in captures.iter() {
            assert_eq!(server.served(capture), 1, "{capture:?}");
        }
        let metadata_watch_list = format!("{PATH}?watch=true&sendInitialEvents=true");
        let accept =
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        let (code, ..) = get(&client, &metadata_watch_list, accept, usize::MAX).await;
        assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
        let (code, ..) = get(&client, "/api/v1/namespaces/bench/secrets", "", usize::MAX).await;
        assert_eq!(code, StatusCode::NOT_FOUND);
    }

    #[test]
    fn reads_what_the_informer_asks() {
        let list = Asked::of("limit=500&resourceVersion=0", "application/json");
        assert_eq!(
            list,
            Asked {
                encoding: Encoding::Json,
                metadata: false,
                watch: false,
                initial_events: false,
                timeout: None,
            }
        );
        let watch_list = Asked::of(
            "watch=true&resourceVersion=&timeoutSeconds=359&allowWatchBookmarks=true\
             &sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "application/vnd.kubernetes.protobuf, application/json",
        );
        assert_eq!(watch_list.encoding, Encoding::Protobuf);
        assert!(watch_list.watch && watch_list.initial_events && !watch_list.metadata);
        assert_eq!(watch_list.timeout, Some(Duration::from_secs(359)));
        let meta = Asked::of(
            "resourceVersion=0",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        );
        assert!(meta.metadata && meta.encoding == Encoding::Json);
        // only the first media range counts
        let json_first = Asked::of("", "application/json, application/vnd.kubernetes.protobuf");
        assert_eq!(json_first.encoding, Encoding::Json);
        // garbage reads as a plain JSON list
        let odd = Asked::of("watch&&=x&timeoutSeconds=-1", ";;,");
        assert!(!odd.watch && odd.timeout.is_none() && odd.encoding == Encoding::Json);
    }
}
