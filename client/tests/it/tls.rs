//! TLS against a loopback HTTPS server with certificates made by rcgen:
//! client-certificate authentication, and failures that say whether the CA,
//! the host name or the client certificate was wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Api, Client, ClientIdentity, Config, Error, TlsErrorKind};
use support::{configmap, json, Pki, TestServer};

fn ok(_: &support::Recorded) -> http::Response<support::Body> {
    json(200, configmap("ns1", "a", "1"))
}

fn config_for(server: &TestServer, url: String, ca_pem: &str) -> Config {
    let mut config = Config::new(url.parse().unwrap()).with_rate_limit(None);
    let _ = server;
    config.tls.root_certs = rustls_pki_types::pem::PemObject::pem_slice_iter(ca_pem.as_bytes())
        .collect::<Result<Vec<rustls_pki_types::CertificateDer<'static>>, _>>()
        .unwrap();
    config
}

async fn get(config: Config) -> Result<ConfigMap, Error> {
    Api::<ConfigMap>::namespaced(Client::try_from(config)?, "ns1")
        .get("a")
        .await
}

fn tls_kind(err: &Error) -> TlsErrorKind {
    match err {
        Error::Tls(tls) => tls.kind,
        other => {
            let mut chain = format!("{other:?}");
            let mut cur = std::error::Error::source(other);
            while let Some(e) = cur {
                chain.push_str(&format!(" -> {e:?}"));
                cur = e.source();
            }
            panic!("expected a TLS error, got {other}: {chain}")
        }
    }
}

#[tokio::test]
async fn client_certificate_authentication() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(true), ok).await;
    let mut config = config_for(&server, server.url(), &pki.ca_pem);
    config.tls.client_identity = Some(
        ClientIdentity::from_pem(
            pki.client_cert_pem.as_bytes(),
            pki.client_key_pem.as_bytes(),
        )
        .unwrap(),
    );
    get(config).await.unwrap();
}

#[tokio::test]
async fn missing_client_certificate_is_named() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(true), ok).await;
    let err = get(config_for(&server, server.url(), &pki.ca_pem))
        .await
        .unwrap_err();
    assert_eq!(tls_kind(&err), TlsErrorKind::ClientCertificate, "{err}");
    assert!(
        err.to_string().contains("rejected the client certificate"),
        "{err}"
    );
}

async fn client_certificate_from(stranger: Pki) -> Error {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(true), ok).await;
    let mut config = config_for(&server, server.url(), &pki.ca_pem);
    config.tls.client_identity = Some(
        ClientIdentity::from_pem(
            stranger.client_cert_pem.as_bytes(),
            stranger.client_key_pem.as_bytes(),
        )
        .unwrap(),
    );
    get(config).await.unwrap_err()
}

#[tokio::test]
async fn client_certificate_from_an_unknown_ca_is_named() {
    let err = client_certificate_from(Pki::with_ca_name(&["localhost"], "stranger CA")).await;
    assert_eq!(tls_kind(&err), TlsErrorKind::ClientCertificate, "{err}");
}

#[tokio::test]
async fn client_certificate_from_a_lookalike_ca_is_named() {
    // Same CA name, different key: the server finds the issuer by name and
    // then fails to verify the signature.
    let err = client_certificate_from(Pki::new()).await;
    assert_eq!(tls_kind(&err), TlsErrorKind::ClientCertificate, "{err}");
}

#[tokio::test]
async fn wrong_ca_is_named() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(false), ok).await;
    let err = get(config_for(&server, server.url(), &Pki::other_ca_pem()))
        .await
        .unwrap_err();
    assert_eq!(tls_kind(&err), TlsErrorKind::UnknownCa, "{err}");
    assert!(
        err.to_string().contains("not signed by a trusted CA"),
        "{err}"
    );
    assert!(err.to_string().contains("certificate-authority"), "{err}");
}

#[tokio::test]
async fn wrong_hostname_is_named() {
    let pki = Pki::new_for(&["apiserver.example"]);
    let server = TestServer::https(pki.server_config(false), ok).await;
    let err = get(config_for(&server, server.url(), &pki.ca_pem))
        .await
        .unwrap_err();
    assert_eq!(tls_kind(&err), TlsErrorKind::Hostname, "{err}");
    assert!(err.to_string().contains("tls-server-name"), "{err}");
}

#[tokio::test]
async fn tls_server_name_overrides_the_url_host() {
    let pki = Pki::new_for(&["kubernetes.default.svc"]);
    let server = TestServer::https(pki.server_config(false), ok).await;
    let mut config = config_for(&server, server.url(), &pki.ca_pem);
    config.tls.server_name = Some("kubernetes.default.svc".into());
    get(config).await.unwrap();
}

#[tokio::test]
async fn dns_names_in_urls_are_verified() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(false), ok).await;
    get(config_for(&server, server.localhost_url(), &pki.ca_pem))
        .await
        .unwrap();
}

#[tokio::test]
async fn insecure_skip_verify_accepts_any_certificate() {
    let pki = Pki::new_for(&["somewhere.else"]);
    let server = TestServer::https(pki.server_config(false), ok).await;
    let mut config = Config::new(server.url().parse().unwrap());
    config.tls.insecure_skip_verify = true;
    get(config).await.unwrap();
}

#[tokio::test]
async fn system_roots_do_not_trust_a_private_ca() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(false), ok).await;
    let err = get(Config::new(server.url().parse().unwrap()))
        .await
        .unwrap_err();
    assert_eq!(tls_kind(&err), TlsErrorKind::UnknownCa, "{err}");
}
