//! The wire server's TLS: a CA and a certificate for `127.0.0.1` made
//! with rcgen at start (ring provider, HTTP/2 and HTTP/1.1 by ALPN, as
//! kube-apiserver offers); the measuring children trust the CA, handed to
//! them as PEM.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The server's TLS configuration and the PEM of the CA that signed it.
pub struct ServerTls {
    /// For the acceptor.
    pub config: Arc<rustls::ServerConfig>,
    /// For the clients' trust store.
    pub ca_pem: String,
}

fn tls_err(what: &str) -> impl Fn(rcgen::Error) -> String + '_ {
    move |e| format!("making the wire server's {what}: {e}")
}

/// Generates a CA and a server certificate for `127.0.0.1`.
pub fn generate() -> Result<ServerTls, String> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err("CA"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kcontrol-bench-wire-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(tls_err("CA key"))?;
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(tls_err("CA"))?;
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_owned()]).map_err(tls_err("certificate"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kcontrol-bench-wire");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(tls_err("key"))?;
    let cert = params
        .signed_by(&key, &ca)
        .map_err(tls_err("certificate"))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("wire server TLS versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .map_err(|e| format!("wire server certificate: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        ca_pem: ca.pem(),
    })
}

/// The certificates in a PEM text (the CA a child is handed).
pub fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the wire server's CA: {e}"))?;
    if certs.is_empty() {
        return Err("the wire server's CA PEM holds no certificate".to_owned());
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
