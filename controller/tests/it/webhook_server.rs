//! The webhook server on its own, over real TLS: the certificate read
//! again when its files change (new handshakes get the new pair, a pair
//! that does not fit is kept out), `/healthz`, and the answers to bodies
//! it cannot use — not JSON, too large, the wrong content type, the wrong
//! method — and to a handler that panics (WH…).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use crate::widgets;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_controller::webhook::{AdmissionRequest, CertWatcher, DevCertificates, WebhookServer};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls_pki_types::pem::PemObject;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use support::eventually;

fn tls_client(ca_pem: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One HTTPS request trusting `ca_pem`: status, headers, body; `Err` with
/// the TLS failure.
async fn https(
    addr: SocketAddr,
    ca_pem: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> Result<(u16, Vec<(String, String)>, String), std::io::Error> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from("webhooks.system.svc").unwrap();
    let mut tls = tls_client(ca_pem).connect(name, tcp).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: webhooks.system.svc\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await?;
    tls.write_all(body).await?;
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    Ok(widgets::parse_response(&response))
}

async fn serve(server: WebhookServer) -> (SocketAddr, CancellationToken) {
    let stop = CancellationToken::new();
    let addr = server
        .serve("127.0.0.1:0".parse().unwrap(), stop.clone())
        .await
        .unwrap();
    (addr, stop)
}

fn certs_in(dir: &std::path::Path) -> DevCertificates {
    let certs = DevCertificates::for_service("system", "webhooks").unwrap();
    certs.write_to(dir).unwrap();
    certs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh_new_handshakes_use_the_certificate_files_once_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let first = certs_in(dir.path());
    let watcher = CertWatcher::from_dir(dir.path()).unwrap();
    let server =
        WebhookServer::new(Arc::clone(&watcher)).cert_reload_interval(Duration::from_millis(20));
    let (addr, _stop) = serve(server).await;
    let (code, _, body) = https(addr, &first.ca_pem, "GET", "/healthz", "text/plain", b"")
        .await
        .unwrap();
    assert_eq!((code, body.as_str()), (200, "ok\n"));

    // a key that does not fit the certificate (as while files are swapped):
    // the pair in use stays
    let second = DevCertificates::for_service("system", "webhooks").unwrap();
    std::fs::write(dir.path().join("tls.key"), &second.key_pem).unwrap();
    assert!(matches!(
        watcher.reload(),
        Err(kcontrol_controller::webhook::CertError::Mismatch { .. })
    ));
    assert_eq!(watcher.loads(), 1);
    https(addr, &first.ca_pem, "GET", "/healthz", "text/plain", b"")
        .await
        .unwrap();

    // the whole new pair: the poll takes it, new handshakes present it
    second.write_to(dir.path()).unwrap();
    eventually("the new certificate to be served", async || {
        https(addr, &second.ca_pem, "GET", "/healthz", "text/plain", b"")
            .await
            .is_ok()
    })
    .await;
    assert_eq!(watcher.loads(), 2);
    let old = https(addr, &first.ca_pem, "GET", "/healthz", "text/plain", b"").await;
    assert!(old.is_err(), "the old CA no longer verifies the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh_bodies_it_cannot_use_get_a_review_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs_in(dir.path());
    let server = widgets::webhook_server(CertWatcher::from_dir(dir.path()).unwrap())
        .admission("/panics", |req: AdmissionRequest| async move {
            // a handler bug: every request here has a uid
            assert!(req.uid.is_empty(), "a handler bug");
            kube_core::admission::AdmissionResponse::from(&req)
        })
        .max_body_bytes(4096);
    let (addr, _stop) = serve(server).await;
    let post = |path: &'static str, content_type: &'static str, body: Vec<u8>| {
        let ca = certs.ca_pem.clone();
        async move {
            let (code, _, text) = https(addr, &ca, "POST", path, content_type, &body)
                .await
                .unwrap();
            assert_eq!(code, 200, "{text}");
            serde_json::from_str::<Value>(&text).unwrap()
        }
    };
    let not_json = post(
        "/validate-v1-widget",
        "application/json",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(not_json["kind"], "AdmissionReview");
    assert_eq!(not_json["response"]["allowed"], false);
    assert_eq!(not_json["response"]["status"]["code"], 400);
    assert!(not_json["response"]["status"]["message"]
        .as_str()
        .unwrap()
        .starts_with("the body is not a JSON AdmissionReview"));

    let big = post("/validate-v1-widget", "application/json", vec![b' '; 5000]).await;
    assert_eq!(big["response"]["status"]["code"], 413);
    assert_eq!(
        big["response"]["status"]["message"],
        "request entity is too large; limit is 4096 bytes"
    );

    let text = post("/validate-v1-widget", "text/plain", b"{}".to_vec()).await;
    assert_eq!(
        text["response"]["status"]["message"],
        "contentType=text/plain, expected application/json"
    );

    // an object that is not a Widget: the uid is kept, the error says why
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-7", "kind": {"group": "hooks.kcontrol.dev", "version": "v1", "kind": "Widget"},
        "resource": {"group": "hooks.kcontrol.dev", "version": "v1", "resource": "widgets"},
        "operation": "CREATE", "userInfo": {}, "object": {"metadata": {"name": "x"}, "spec": {"size": "big"}}}});
    let wrong = post(
        "/validate-v1-widget",
        "application/json",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(wrong["response"]["uid"], "u-7");
    assert!(wrong["response"]["status"]["message"]
        .as_str()
        .unwrap()
        .starts_with("decoding the object as hooks.kcontrol.dev/v1/Widget"));

    let panicked = post(
        "/panics",
        "application/json",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(panicked["response"]["status"]["code"], 500);
    assert_eq!(panicked["response"]["uid"], "u-7");

    let conversion = post("/convert", "application/json", b"[]".to_vec()).await;
    assert_eq!(conversion["kind"], "ConversionReview");
    assert_eq!(conversion["response"]["result"]["status"], "Failure");

    // and the server goes on
    let (code, _, _) = https(
        addr,
        &certs.ca_pem,
        "GET",
        "/validate-v1-widget",
        "application/json",
        b"",
    )
    .await
    .unwrap();
    assert_eq!(code, 405);
    let (code, _, _) = https(
        addr,
        &certs.ca_pem,
        "POST",
        "/nowhere",
        "application/json",
        b"{}",
    )
    .await
    .unwrap();
    assert_eq!(code, 404);
    let (code, _, _) = https(addr, &certs.ca_pem, "GET", "/healthz", "text/plain", b"")
        .await
        .unwrap();
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh_two_handlers_at_one_path_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    certs_in(dir.path());
    let server = widgets::webhook_server(CertWatcher::from_dir(dir.path()).unwrap())
        .conversion("/convert", widgets::widget_conversion());
    let err = server
        .serve("127.0.0.1:0".parse().unwrap(), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "two webhooks registered at /convert");
}
