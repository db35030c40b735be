//! The wire server's TLS: a CA and a certificate for `127.0.0.1` made at
//! start by the controller crate's [`DevCertificates`] (ring provider,
//! HTTP/2 and HTTP/1.1 by ALPN, as kube-apiserver offers); the measuring
//! children trust the CA, handed to them as PEM.

use std::sync::Arc;

use kcontrol_controller::webhook::DevCertificates;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The server's TLS configuration and the PEM of the CA that signed it.
pub struct ServerTls {
    /// For the acceptor.
    pub config: Arc<rustls::ServerConfig>,
    /// For the clients' trust store.
    pub ca_pem: String,
}

/// Generates a CA and a server certificate for `127.0.0.1`.
pub fn generate() -> Result<ServerTls, String> {
    let certs = DevCertificates::generate(&["127.0.0.1"])
        .map_err(|e| format!("making the wire server's certificate: {e}"))?;
    let chain = certificates(&certs.cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(certs.key_pem.as_bytes())
        .map_err(|e| format!("the wire server's key: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("wire server TLS versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("wire server certificate: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        ca_pem: certs.ca_pem,
    })
}

/// The certificates in a PEM text (the CA a child is handed, the
/// server's chain).
pub fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the wire server's certificates: {e}"))?;
    if certs.is_empty() {
        return Err("the wire server's PEM holds no certificate".to_owned());
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_pem_round_trips_and_garbage_is_an_error() {
        let tls = generate().unwrap();
        assert_eq!(certificates(&tls.ca_pem).unwrap().len(), 1);
        assert!(certificates("no pem here").is_err());
    }
}
