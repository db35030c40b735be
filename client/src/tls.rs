//! TLS for the transport: the rustls client configuration built from a
//! [`TlsConfig`] (ring provider, CA bundle or system roots, insecure mode,
//! client certificates that an exec plugin may replace at run time), and the
//! classification of handshake failures into [`TlsError`]s that say whether
//! the CA, the hostname or the client certificate was wrong.

use std::sync::Arc;

use parking_lot::RwLock;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{AlertDescription, CertificateError, DigitallySignedStruct, SignatureScheme};

use crate::config::{ClientIdentity, ConfigError, TlsConfig};

/// What a failed TLS handshake was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsErrorKind {
    /// The server certificate does not chain to a trusted CA.
    UnknownCa,
    /// The server certificate is not valid for the host name.
    Hostname,
    /// The server refused the client certificate (missing, expired, or not
    /// signed by a CA it trusts).
    ClientCertificate,
    /// The server certificate is otherwise invalid (expired, not yet valid,
    /// revoked, malformed).
    ServerCertificate,
    /// Anything else (protocol versions, cipher suites...).
    Other,
}

impl std::fmt::Display for TlsErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::UnknownCa => "the server's certificate is not signed by a trusted CA (check certificate-authority / certificate-authority-data)",
            Self::Hostname => "the server's certificate is not valid for this host name (check the server URL or tls-server-name)",
            Self::ClientCertificate => "the server rejected the client certificate (missing, expired, or not signed by a CA the server trusts; check client-certificate / client-key)",
            Self::ServerCertificate => "the server's certificate is invalid",
            Self::Other => "the TLS handshake failed",
        })
    }
}

/// A TLS failure talking to the API server.
#[derive(Debug, thiserror::Error)]
#[error("TLS error with {server}: {kind}: {source}")]
pub struct TlsError {
    /// What was wrong.
    pub kind: TlsErrorKind,
    /// The server.
    pub server: String,
    /// The rustls error.
    #[source]
    pub source: rustls::Error,
}

/// Classifies a rustls error.
pub(crate) fn classify(error: &rustls::Error) -> TlsErrorKind {
    use rustls::Error as E;
    match error {
        E::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                TlsErrorKind::UnknownCa
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsErrorKind::Hostname
            }
            _ => TlsErrorKind::ServerCertificate,
        },
        E::AlertReceived(
            AlertDescription::CertificateRequired
            | AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            // The server could not verify a signature the client made: the
            // client certificate's (e.g. one from a CA with the same name).
            | AlertDescription::DecryptError,
        ) => TlsErrorKind::ClientCertificate,
        _ => TlsErrorKind::Other,
    }
}

/// Walks an error's source chain. hyper and tokio-rustls wrap errors in
/// `io::Error`s, whose `source()` skips the wrapped error, so those are
/// opened with `get_ref()`. The depth is bounded.
fn walk_chain<'a, T>(
    error: &'a (dyn std::error::Error + 'static),
    mut visit: impl FnMut(&'a (dyn std::error::Error + 'static)) -> Option<T>,
) -> Option<T> {
    let mut pending: Vec<&'a (dyn std::error::Error + 'static)> = vec![error];
    let mut visited = 0;
    while let Some(e) = pending.pop() {
        visited += 1;
        if visited > 32 {
            return None;
        }
        if let Some(found) = visit(e) {
            return Some(found);
        }
        if let Some(source) = e.source() {
            pending.push(source);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            pending.push(inner);
        }
    }
    None
}

/// The alert a server sent, when the error chain reports one only as text
/// (rustls reports alerts received after the handshake, as TLS 1.3 client
/// certificate rejections are, through an `io::Error` message).
fn alert_from_message(message: &str) -> Option<AlertDescription> {
    let name = message.strip_prefix("received fatal alert: ")?.trim();
    let known = [
        AlertDescription::CertificateRequired,
        AlertDescription::BadCertificate,
        AlertDescription::UnknownCA,
        AlertDescription::UnsupportedCertificate,
        AlertDescription::CertificateRevoked,
        AlertDescription::CertificateExpired,
        AlertDescription::CertificateUnknown,
        AlertDescription::AccessDenied,
        AlertDescription::HandshakeFailure,
        AlertDescription::ProtocolVersion,
        AlertDescription::DecryptError,
        AlertDescription::InternalError,
    ];
    known.into_iter().find(|alert| format!("{alert:?}") == name)
}

/// The TLS failure in an error's source chain, if any.
pub(crate) fn find_tls_failure(error: &(dyn std::error::Error + 'static)) -> Option<rustls::Error> {
    walk_chain(error, |e| {
        if let Some(found) = e.downcast_ref::<rustls::Error>() {
            return Some(found.clone());
        }
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.get_ref().is_none())
        {
            return None;
        }
        alert_from_message(&e.to_string()).map(rustls::Error::AlertReceived)
    })
}

/// The client certificate presented in handshakes; an exec plugin can
/// replace it at run time. New connections use the new certificate.
pub(crate) struct ClientCertSlot {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    provider: Arc<CryptoProvider>,
}

impl ClientCertSlot {
    pub(crate) fn new() -> Self {
        Self {
            current: RwLock::new(None),
            provider: provider(),
        }
    }

    /// Installs a certificate and key.
    pub(crate) fn set(&self, identity: &ClientIdentity) -> Result<(), ConfigError> {
        let key = CertifiedKey::from_der(
            identity.cert_chain.clone(),
            identity.key().clone_key(),
            &self.provider,
        )
        .map_err(|e| ConfigError::Invalid {
            field: "client certificate".to_owned(),
            message: format!("the certificate and key cannot be used together ({e})"),
        })?;
        *self.current.write() = Some(Arc::new(key));
        Ok(())
    }
}

impl std::fmt::Debug for ClientCertSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertSlot")
            .field("has_certificate", &self.current.read().is_some())
            .finish()
    }
}

impl ResolvesClientCert for ClientCertSlot {
    fn resolve(
        &self,
        _root_hints: &[&[u8]],
        _schemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.current.read().clone()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The ring crypto provider.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the rustls configuration for a [`TlsConfig`].
pub(crate) fn client_config(
    tls: &TlsConfig,
    cert_slot: Arc<ClientCertSlot>,
) -> Result<rustls::ClientConfig, ConfigError> {
    let provider = provider();
    if let Some(identity) = &tls.client_identity {
        cert_slot.set(identity)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("tls", format!("no usable TLS version ({e})")))?;
    let config = if tls.insecure_skip_verify {
        tracing::warn!("insecure-skip-tls-verify is set: the server certificate is not verified; connections can be intercepted");
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_client_cert_resolver(cert_slot)
    } else {
        builder
            .with_root_certificates(root_store(tls)?)
            .with_client_cert_resolver(cert_slot)
    };
    Ok(config)
}

fn invalid(field: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        field: field.to_owned(),
        message,
    }
}

/// The configured CA certificates, or the system trust store when none is given.
fn root_store(tls: &TlsConfig) -> Result<rustls::RootCertStore, ConfigError> {
    let mut store = rustls::RootCertStore::empty();
    if tls.root_certs.is_empty() {
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::warn!(%error, "could not load a system CA certificate");
        }
        let (added, _ignored) = store.add_parsable_certificates(native.certs);
        if added == 0 {
            tracing::warn!("no CA certificate configured and none found in the system trust store");
        }
        return Ok(store);
    }
    for cert in &tls.root_certs {
        store.add(cert.clone()).map_err(|e| {
            invalid(
                "certificate-authority",
                format!("not a usable CA certificate ({e})"),
            )
        })?;
    }
    Ok(store)
}

/// Accepts any server certificate, but still checks the handshake
/// signatures (so the peer holds the key of the certificate it sent).
#[derive(Debug)]
struct NoVerification {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_three_usual_mistakes() {
        let ca = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert_eq!(classify(&ca), TlsErrorKind::UnknownCa);
        let host = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert_eq!(classify(&host), TlsErrorKind::Hostname);
        let client = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        assert_eq!(classify(&client), TlsErrorKind::ClientCertificate);
        let expired = rustls::Error::InvalidCertificate(CertificateError::Expired);
        assert_eq!(classify(&expired), TlsErrorKind::ServerCertificate);
    }

    #[test]
    fn finds_rustls_errors_inside_nested_io_errors() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let found = find_tls_failure(&io).unwrap();
        assert_eq!(classify(&found), TlsErrorKind::UnknownCa);
        let wrapped = std::io::Error::other(io);
        assert!(find_tls_failure(&wrapped).is_some());
    }

    #[test]
    fn reads_alerts_reported_as_text() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "received fatal alert: CertificateRequired",
        );
        let found = find_tls_failure(&io).unwrap();
        assert_eq!(classify(&found), TlsErrorKind::ClientCertificate);
        let other = std::io::Error::new(std::io::ErrorKind::InvalidData, "something else");
        assert!(find_tls_failure(&other).is_none());
    }
}
