//! A minimal HTTP(S) client for the conformance tests (hyper-util's client
//! with rustls), independent of kcontrol-client: the server is the oracle
//! that client is tested against.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use kcontrol_testserver::TestServer;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(10);

/// A response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Resp {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

/// Client identity options.
#[derive(Clone, Default)]
pub struct Auth {
    pub token: Option<String>,
    pub client_cert: bool,
    pub http2_only: bool,
}

#[derive(Clone)]
pub struct Client {
    inner: HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
    token: Option<String>,
}

fn tls_config(server: &TestServer, auth: &Auth) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = server.ca_pem() {
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()).flatten() {
            roots.add(c).expect("CA certificate");
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    match (auth.client_cert, server.client_identity_pem()) {
        (true, Some((cert, key))) => {
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .flatten()
                    .collect();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("client key");
            builder
                .with_client_auth_cert(certs, key)
                .expect("client identity")
        }
        _ => builder.with_no_client_auth(),
    }
}

impl Client {
    pub fn new(server: &TestServer) -> Self {
        Self::with_auth(server, Auth::default())
    }

    pub fn with_auth(server: &TestServer, auth: Auth) -> Self {
        let schemes = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(server, &auth))
            .https_or_http();
        let connector = if auth.http2_only {
            schemes.enable_http2().build()
        } else {
            schemes.enable_http1().enable_http2().build()
        };
        let mut b = HyperClient::builder(TokioExecutor::new());
        if auth.http2_only {
            b.http2_only(true);
        }
        Self {
            inner: b.build(connector),
            base: server.url().to_owned(),
            token: auth.token,
        }
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> http::Request<Full<Bytes>> {
        let mut b = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(ct) = content_type {
            b = b.header("Content-Type", ct);
        }
        if let Some(a) = accept {
            b = b.header("Accept", a);
        }
        if let Some(t) = &self.token {
            b = b.header("Authorization", format!("Bearer {t}"));
        }
        b.body(Full::new(Bytes::from(body.unwrap_or_default())))
            .expect("request")
    }

    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Resp {
        let req = self.request(method, path, content_type, accept, body);
        self.send(req).await
    }

    /// A request sent with this `User-Agent` (the server tells clients
    /// apart by it).
    pub async fn send_raw_with_agent(&self, method: &str, path: &str, agent: &str) -> Resp {
        let mut req = self.request(method, path, None, Some("application/json"), None);
        req.headers_mut().insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_str(agent).expect("a header value"),
        );
        self.send(req).await
    }

    async fn send(&self, req: http::Request<Full<Bytes>>) -> Resp {
        let resp = tokio::time::timeout(WAIT, self.inner.request(req))
            .await
            .expect("response in time")
            .expect("response");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = tokio::time::timeout(WAIT, resp.into_body().collect())
            .await
            .expect("body in time")
            .expect("body")
            .to_bytes();
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send_raw("GET", path, None, Some("application/json"), None)
            .await
    }

    pub async fn get_as(&self, path: &str, accept: &str) -> Resp {
        self.send_raw("GET", path, None, Some(accept), None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send_raw(
            "POST",
            path,
            Some("application/json"),
            Some("application/json"),
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.send_raw(
            "PUT",
            path,
            Some("application/json"),
            Some("application/json"),
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: &str) -> Resp {
        self.send_raw(
            "PATCH",
            path,
            Some(content_type),
            Some("application/json"),
            Some(body.as_bytes().to_vec()),
        )
        .await
    }

    pub async fn delete(&self, path: &str, body: Option<&Value>) -> Resp {
        let ct = body.map(|_| "application/json");
        self.send_raw(
            "DELETE",
            path,
            ct,
            Some("application/json"),
            body.map(|b| b.to_string().into_bytes()),
        )
        .await
    }

    /// Starts a watch (or any streaming GET).
    pub async fn stream(&self, path: &str) -> Stream {
        self.stream_as(path, "application/json").await
    }

    pub async fn stream_as(&self, path: &str, accept: &str) -> Stream {
        let req = self.request("GET", path, None, Some(accept), None);
        let resp = tokio::time::timeout(WAIT, self.inner.request(req))
            .await
            .expect("response in time")
            .expect("response");
        Stream {
            status: resp.status().as_u16(),
            body: resp.into_body(),
            buf: Vec::new(),
            ended: false,
        }
    }
}

/// A streaming response read line by line (watch frames).
pub struct Stream {
    pub status: u16,
    body: Incoming,
    buf: Vec<u8>,
    ended: bool,
}

/// One line of a watch stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    Json(Value),
    Garbage(String),
}

impl Stream {
    /// The next line, `None` when the stream ended or `timeout` passed.
    pub async fn next_line(&mut self, timeout: Duration) -> Option<Line> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let text = &line[..line.len() - 1];
                return Some(match serde_json::from_slice(text) {
                    Ok(v) => Line::Json(v),
                    Err(_) => Line::Garbage(String::from_utf8_lossy(text).into_owned()),
                });
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return None,
                Ok(None) => self.ended = true,
                Ok(Some(Err(_))) => self.ended = true,
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
            }
        }
    }

    /// The next `n` bytes of the stream (protobuf watch frames), `None`
    /// when the stream ended first or `timeout` passed.
    pub async fn next_bytes(&mut self, n: usize, timeout: Duration) -> Option<Vec<u8>> {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.buf.len() < n {
            if self.ended {
                return None;
            }
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return None,
                Ok(None) | Ok(Some(Err(_))) => self.ended = true,
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
            }
        }
        Some(self.buf.drain(..n).collect())
    }

    /// The next event (panics on garbage).
    pub async fn next_event(&mut self, timeout: Duration) -> Option<Value> {
        match self.next_line(timeout).await? {
            Line::Json(v) => Some(v),
            Line::Garbage(g) => panic!("unexpected non-JSON frame: {g}"),
        }
    }

    /// The next event that is not a BOOKMARK.
    pub async fn next_non_bookmark(&mut self, timeout: Duration) -> Option<Value> {
        loop {
            let e = self.next_event(timeout).await?;
            if e["type"] != "BOOKMARK" {
                return Some(e);
            }
        }
    }

    /// Whether the server ended the stream within `timeout` (reading and
    /// dropping anything still sent).
    pub async fn ends_within(&mut self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            if self.next_line(left).await.is_none() {
                return self.ended;
            }
        }
    }
}
