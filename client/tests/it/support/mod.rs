//! Test support: certificates made with rcgen, and a small loopback HTTP(S)
//! server (hyper, HTTP/1.1 and HTTP/2) whose answers each test scripts and
//! whose requests each test inspects.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod logs;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kcontrol_client::Config;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A response body: whole or streamed.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// A CA, a server certificate for `localhost` and `127.0.0.1`, and a
/// client certificate, all made for one test.
pub struct Pki {
    pub ca_pem: String,
    pub ca_der: CertificateDer<'static>,
    pub server_cert_der: CertificateDer<'static>,
    pub server_key_der: Vec<u8>,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

fn ca(name: &str) -> (CertificateParams, KeyPair, rcgen::Certificate) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    (params, key, cert)
}

impl Pki {
    /// A fresh PKI whose server certificate is valid for `names`.
    pub fn new_for(names: &[&str]) -> Self {
        Self::with_ca_name(names, "kcontrol test CA")
    }

    /// A fresh PKI whose CA has the given name.
    pub fn with_ca_name(names: &[&str], ca_name: &str) -> Self {
        let (ca_params, ca_key, ca_cert) = ca(ca_name);
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().unwrap();
        let mut server =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        server
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server.signed_by(&server_key, &issuer).unwrap();

        let client_key = KeyPair::generate().unwrap();
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        client.distinguished_name.push(DnType::CommonName, "alice");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client.signed_by(&client_key, &issuer).unwrap();

        Self {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            server_cert_der: server_cert.der().clone(),
            server_key_der: server_key.serialize_der(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        }
    }

    /// A PKI for `localhost` and `127.0.0.1`.
    pub fn new() -> Self {
        Self::new_for(&["localhost", "127.0.0.1"])
    }

    /// A CA that signed nothing here.
    pub fn other_ca_pem() -> String {
        ca("some other CA").2.pem()
    }

    /// The server's TLS configuration; with `require_client_cert`, client
    /// certificates signed by this CA are required.
    pub fn server_config(&self, require_client_cert: bool) -> Arc<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = RootCertStore::empty();
            roots.add(self.ca_der.clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key_der.clone()));
        let mut config = builder
            .with_single_cert(vec![self.server_cert_der.clone()], key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    /// Path and query.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub version: Version,
}

impl Recorded {
    pub fn path(&self) -> &str {
        self.uri.split('?').next().unwrap_or("")
    }

    pub fn query(&self) -> Vec<(String, String)> {
        let q = self.uri.split_once('?').map(|(_, q)| q).unwrap_or("");
        form_urlencoded::parse(q.as_bytes()).into_owned().collect()
    }

    pub fn param(&self, key: &str) -> Option<String> {
        self.query()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

type Handler = Arc<dyn Fn(&Recorded) -> Response<Body> + Send + Sync>;

/// A loopback server answering with a scripted handler.
pub struct TestServer {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    tls: bool,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_one<I>(io: I, handler: Handler, requests: Arc<Mutex<Vec<Recorded>>>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let handler = handler.clone();
        let requests = requests.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let recorded = Recorded {
                method: parts.method,
                uri: parts
                    .uri
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                headers: parts.headers,
                body,
                version: parts.version,
            };
            requests.lock().unwrap().push(recorded.clone());
            Ok::<_, Infallible>(handler(&recorded))
        }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}

impl TestServer {
    /// Serves plain HTTP.
    pub async fn http(
        handler: impl Fn(&Recorded) -> Response<Body> + Send + Sync + 'static,
    ) -> Self {
        Self::start(Arc::new(handler), None).await
    }

    /// Serves HTTPS with `tls`.
    pub async fn https(
        tls: Arc<ServerConfig>,
        handler: impl Fn(&Recorded) -> Response<Body> + Send + Sync + 'static,
    ) -> Self {
        Self::start(Arc::new(handler), Some(tls)).await
    }

    async fn start(handler: Handler, tls: Option<Arc<ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let is_tls = tls.is_some();
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                let requests = recorded.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                serve_one(stream, handler, requests).await;
                            }
                        }
                        None => serve_one(tcp, handler, requests).await,
                    }
                });
            }
        });
        Self {
            addr,
            requests,
            tls: is_tls,
            task,
        }
    }

    /// `http(s)://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!(
            "{}://127.0.0.1:{}",
            if self.tls { "https" } else { "http" },
            self.addr.port()
        )
    }

    /// `https://localhost:<port>`.
    pub fn localhost_url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    /// A client configuration for this server, without rate limiting, that
    /// may send credentials to it over plain HTTP (it is on loopback).
    pub fn config(&self) -> Config {
        Config::new(self.url().parse().unwrap())
            .with_rate_limit(None)
            .with_http_credentials_allowed(true)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    pub fn last(&self) -> Recorded {
        self.requests()
            .last()
            .cloned()
            .expect("no request received")
    }
}

/// A whole JSON answer.
pub fn json(code: u16, value: serde_json::Value) -> Response<Body> {
    bytes(code, Bytes::from(value.to_string()))
}

/// A whole answer with any body.
pub fn bytes(code: u16, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(
            Full::new(body.into())
                .map_err(|never| match never {})
                .boxed(),
        )
        .unwrap()
}

/// An answer whose body is sent as these chunks, `pause` apart.
pub fn chunked(chunks: Vec<Bytes>, pause: Duration) -> Response<Body> {
    let stream = futures::stream::iter(chunks).then(move |chunk| async move {
        tokio::time::sleep(pause).await;
        Ok::<_, std::io::Error>(Frame::data(chunk))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap()
}

/// A `Status` body.
pub fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    json(
        code,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "reason": reason, "message": message, "code": code
        }),
    )
}

/// A ConfigMap as JSON.
pub fn configmap(ns: &str, name: &str, rv: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "uid": format!("uid-{name}")},
        "data": {"k": "v"}
    })
}

/// Writes a file (creating parents) and returns its path as a string.
pub fn write(dir: &std::path::Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

/// Standard base64.
pub fn b64(data: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}
