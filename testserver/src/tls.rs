//! The server's PKI, generated at start with rcgen: a CA, a server
//! certificate for `127.0.0.1` and `localhost`, and a client certificate
//! (CN `kcontrol-admin`, O `system:masters`) for client-certificate
//! authentication; and the rustls server configuration.

use crate::Error;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::sync::Arc;

/// Certificates and keys of one server instance.
pub(crate) struct Pki {
    pub ca_pem: String,
    ca_der: CertificateDer<'static>,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

fn name(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(o) = org {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}

impl Pki {
    /// Generates a fresh CA, server and client certificate.
    pub(crate) fn generate() -> Result<Self, Error> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
        ca_params.distinguished_name = name("kcontrol-testserver-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(tls_err)?)
            .map_err(tls_err)?;

        let mut server_params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .map_err(tls_err)?;
        server_params.distinguished_name = name("kcontrol-testserver", None);
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().map_err(tls_err)?;
        let server_cert = server_params.signed_by(&server_key, &ca).map_err(tls_err)?;

        let mut client_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
        client_params.distinguished_name = name("kcontrol-admin", Some("system:masters"));
        client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate().map_err(tls_err)?;
        let client_cert = client_params.signed_by(&client_key, &ca).map_err(tls_err)?;

        Ok(Self {
            ca_pem: ca.pem(),
            ca_der: ca.der().clone(),
            server_cert: server_cert.der().clone(),
            server_key: server_key.serialize_der(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        })
    }

    /// The rustls configuration: HTTP/2 and HTTP/1.1 by ALPN; client
    /// certificates signed by the CA are verified when offered.
    pub(crate) fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).map_err(tls_err)?;
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(tls_err)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![self.server_cert.clone()], key)
            .map_err(tls_err)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}
