//! Calling a webhook: the endpoint from `clientConfig` (`url`, or
//! `service`, which the server resolves through the address a test
//! registered for it with [`TestServer::register_service`](crate::TestServer::register_service):
//! the server has no cluster network), HTTPS verified against `caBundle`
//! and nothing else (an empty bundle trusts nothing), the server name
//! `<service>.<namespace>.svc` or the URL's host, `?timeout=<n>s` on the
//! URL as kube-apiserver adds it, one POST within the timeout. Failures
//! read as Go's HTTP client words them in kube-apiserver's messages:
//! `Post "https://…?timeout=10s": context deadline exceeded`.

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use parking_lot::RwLock;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls_pki_types::pem::PemObject;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The largest webhook answer read.
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// Where the Services webhooks name are reached.
#[derive(Debug, Default)]
pub(crate) struct Services {
    addrs: RwLock<HashMap<(String, String), SocketAddr>>,
}

impl Services {
    pub(crate) fn register(&self, namespace: &str, name: &str, addr: SocketAddr) {
        self.addrs
            .write()
            .insert((namespace.to_owned(), name.to_owned()), addr);
    }

    fn resolve(&self, namespace: &str, name: &str) -> Option<SocketAddr> {
        self.addrs
            .read()
            .get(&(namespace.to_owned(), name.to_owned()))
            .copied()
    }
}

/// A webhook's endpoint.
#[derive(Debug)]
struct Endpoint {
    /// The URL as kube-apiserver shows it (with `?timeout=`).
    url: String,
    host: String,
    authority: String,
    path_and_query: String,
    /// Where to connect, or why it is unknown.
    addr: Result<SocketAddr, String>,
}

/// Go's duration string for whole seconds.
fn go_seconds(timeout: Duration) -> String {
    format!("{}s", timeout.as_secs_f64().ceil() as u64)
}

fn endpoint(
    services: &Services,
    config: &WebhookClientConfig,
    timeout: Duration,
) -> Result<Endpoint, String> {
    let query = format!("timeout={}", go_seconds(timeout));
    if let Some(s) = &config.service {
        let port = s.port.unwrap_or(443);
        let host = format!("{}.{}.svc", s.name, s.namespace);
        let path = s.path.clone().unwrap_or_else(|| "/".into());
        let authority = format!("{host}:{port}");
        let addr = services
            .resolve(&s.namespace, &s.name)
            .ok_or_else(|| format!("service \"{}\" not found", s.name));
        return Ok(Endpoint {
            url: format!("https://{authority}{path}?{query}"),
            host,
            authority,
            path_and_query: format!("{path}?{query}"),
            addr,
        });
    }
    let url = config.url.as_deref().unwrap_or("");
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("invalid URL {url:?}: {e}"))?;
    let host = uri.host().unwrap_or("").trim_matches(['[', ']']).to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let authority = uri
        .authority()
        .map_or_else(String::new, |a| a.as_str().to_owned());
    let path = match uri.path() {
        "" => "/",
        p => p,
    };
    let addr = match host.as_str() {
        "localhost" => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        h => h
            .parse::<std::net::IpAddr>()
            .map(|ip| SocketAddr::new(ip, port))
            .map_err(|_| format!("dial tcp: lookup {h}: no such host")),
    };
    Ok(Endpoint {
        url: format!("https://{authority}{path}?{query}"),
        host,
        authority,
        path_and_query: format!("{path}?{query}"),
        addr,
    })
}

/// The TLS client configuration trusting exactly the PEM certificates in
/// `ca_bundle`.
fn tls_config(ca_bundle: Option<&[u8]>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = ca_bundle {
        // caBundle is PEM; tolerate a bundle that is base64 of PEM once more
        let decoded = base64::engine::general_purpose::STANDARD.decode(pem).ok();
        let pem = decoded
            .as_deref()
            .filter(|d| d.starts_with(b"-----"))
            .unwrap_or(pem);
        for cert in CertificateDer::pem_slice_iter(pem).flatten() {
            let _ = roots.add(cert);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth());
    match config {
        Ok(mut c) => {
            c.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(c)
        }
        // the ring provider supports the default versions
        Err(_) => Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        ),
    }
}

/// Go's wording of a TLS failure.
fn tls_message(e: &std::io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature,
        )) => "tls: failed to verify certificate: x509: certificate signed by unknown authority".into(),
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
            | rustls::CertificateError::NotValidForNameContext { .. },
        )) => "tls: failed to verify certificate: x509: certificate is not valid for the requested name".into(),
        Some(other) => format!("tls: {other}"),
        None => format!("tls: {e}"),
    }
}

/// Go's wording of an HTTP answer other than 2xx (client-go's
/// `newUnstructuredResponseError`, or the Status the body carries).
fn status_message(code: u16, body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        if v["kind"] == "Status" {
            if let Some(m) = v["message"].as_str() {
                return m.to_owned();
            }
        }
    }
    match code {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "Unauthorized".into(),
        403 => "forbidden".into(),
        404 => "the server could not find the requested resource".into(),
        500 => format!(
            "an error on the server ({:?}) has prevented the request from succeeding",
            String::from_utf8_lossy(&body[..body.len().min(512)])
        ),
        503 => "the server is currently unable to handle the request".into(),
        c => format!(
            "the server responded with the status code {c} but did not return more information"
        ),
    }
}

/// Why an exchange failed: before an answer (Go's `*url.Error`, shown
/// after `Post "<url>": `), or the answer's HTTP error.
enum Failure {
    Transport(String),
    Status(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Self::Transport(s)
    }
}

async fn exchange(
    ep: &Endpoint,
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    body: Vec<u8>,
) -> Result<Bytes, Failure> {
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            format!("dial tcp {addr}: connect: connection refused")
        } else {
            format!("dial tcp {addr}: {e}")
        }
    })?;
    let name = ServerName::try_from(ep.host.clone())
        .map_err(|e| format!("invalid server name {:?}: {e}", ep.host))?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| Failure::Transport(tls_message(&e)))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Failure::Transport(e.to_string()))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = hyper::Request::post(&ep.path_and_query)
        .header(http::header::HOST, &ep.authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .header(http::header::USER_AGENT, "kcontrol-testserver")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| Failure::Transport(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| Failure::Transport(e.to_string()))?;
    let code = response.status().as_u16();
    let bytes = Limited::new(response.into_body(), MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| Failure::Transport(format!("reading the response: {e}")))?
        .to_bytes();
    if !(200..300).contains(&code) {
        return Err(Failure::Status(status_message(code, &bytes)));
    }
    Ok(bytes)
}

/// POSTs `body` to the webhook within `timeout`; the answer's body, or
/// why not as kube-apiserver words it after `failed to call webhook: `
/// (`Post "<url>": <why>` before an answer, the HTTP error's message
/// after one).
pub(crate) async fn post(
    services: &Services,
    config: &WebhookClientConfig,
    timeout: Duration,
    body: Vec<u8>,
) -> Result<Bytes, String> {
    let ep = endpoint(services, config, timeout)?;
    let addr = ep
        .addr
        .clone()
        .map_err(|e| format!("Post {:?}: {e}", ep.url))?;
    let tls = tls_config(config.ca_bundle.as_ref().map(|b| b.0.as_slice()));
    match tokio::time::timeout(timeout, exchange(&ep, addr, tls, body)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(Failure::Transport(e))) => Err(format!("Post {:?}: {e}", ep.url)),
        Ok(Err(Failure::Status(e))) => Err(e),
        Err(_) => Err(format!("Post {:?}: context deadline exceeded", ep.url)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::ServiceReference;

    #[test]
    fn endpoints_read_as_kube_apiserver_writes_them() {
        let services = Services::default();
        services.register("system", "hooks", SocketAddr::from(([127, 0, 0, 1], 9443)));
        let by_service = WebhookClientConfig {
            service: Some(ServiceReference {
                name: "hooks".into(),
                namespace: "system".into(),
                path: Some("/validate".into()),
                port: Some(443),
            }),
            ..Default::default()
        };
        let ep = endpoint(&services, &by_service, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ep.url, "https://hooks.system.svc:443/validate?timeout=10s");
        assert_eq!(ep.host, "hooks.system.svc");
        assert_eq!(ep.addr, Ok(SocketAddr::from(([127, 0, 0, 1], 9443))));
        let by_url = WebhookClientConfig {
            url: Some("https://127.0.0.1:8443/mutate".into()),
            ..Default::default()
        };
        let ep = endpoint(&services, &by_url, Duration::from_millis(1500))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ep.url, "https://127.0.0.1:8443/mutate?timeout=2s");
        let unknown = WebhookClientConfig {
            service: Some(ServiceReference {
                name: "nobody".into(),
                namespace: "system".into(),
                path: None,
                port: None,
            }),
            ..Default::default()
        };
        let ep = endpoint(&services, &unknown, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ep.addr, Err("service \"nobody\" not found".to_owned()));
    }
}
