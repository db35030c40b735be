//! [`CertWatcher`]: the serving certificate and key of the webhook server,
//! read from PEM files (cert-manager's Secret mount: `tls.crt`, `tls.key`)
//! and read again when they change, as controller-runtime's `certwatcher`
//! does. New TLS handshakes use the newest pair that loaded; a pair that
//! does not load (a key that does not match the certificate while the two
//! files are being replaced, a half-written file) keeps the previous one
//! serving and is tried again at the next poll.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

/// Why a certificate and key could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate file holds no PEM certificate.
    #[error("{path}: no PEM certificate found")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file holds no usable PEM private key.
    #[error("{path}: no PEM private key found ({reason})")]
    NoKey {
        /// The file.
        path: PathBuf,
        /// What the parser said (never the key).
        reason: String,
    },
    /// The key does not belong to the certificate, or is of a kind rustls
    /// cannot sign with.
    #[error("the key in {key} does not fit the certificate in {cert}: {reason}")]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        reason: String,
    },
    /// Generating a certificate failed.
    #[error("generating a certificate: {0}")]
    Generate(String),
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The loaded pair and the bytes it came from (to notice changes).
struct Loaded {
    key: Arc<CertifiedKey>,
    source: (Vec<u8>, Vec<u8>),
}

/// A certificate and key from files, reloaded when they change (cheap to
/// share: `Arc<CertWatcher>`).
pub struct CertWatcher {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Loaded>,
    loads: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for CertWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertWatcher")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("loads", &self.loads())
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Parses a certificate chain and key, and checks that they fit.
fn parse(
    cert_path: &Path,
    key_path: &Path,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<CertifiedKey, CertError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(CertError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertError::NoKey {
        path: key_path.to_owned(),
        reason: e.to_string(),
    })?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| CertError::Mismatch {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
        reason: e.to_string(),
    })
}

impl CertWatcher {
    /// Loads the PEM certificate (chain) at `cert` and the PEM key at
    /// `key`.
    ///
    /// # Errors
    /// When either cannot be read or parsed, or they do not fit.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Arc<Self>, CertError> {
        let (cert_path, key_path) = (cert.into(), key.into());
        let source = (read(&cert_path)?, read(&key_path)?);
        let key = Arc::new(parse(&cert_path, &key_path, &source.0, &source.1)?);
        Ok(Arc::new(Self {
            cert_path,
            key_path,
            current: RwLock::new(Loaded { key, source }),
            loads: AtomicU64::new(1),
            last_error: Mutex::new(None),
        }))
    }

    /// Loads `tls.crt` and `tls.key` from `dir` (the layout cert-manager
    /// and controller-runtime use).
    ///
    /// # Errors
    /// As [`CertWatcher::new`].
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Arc<Self>, CertError> {
        let dir = dir.as_ref();
        Self::new(dir.join("tls.crt"), dir.join("tls.key"))
    }

    /// Reads the files again; when their content changed and the new pair
    /// loads, new handshakes use it. `Ok(true)` when a new pair was taken.
    ///
    /// # Errors
    /// When the changed files do not load (the previous pair stays).
    pub fn reload(&self) -> Result<bool, CertError> {
        let source = (read(&self.cert_path)?, read(&self.key_path)?);
        if self.current.read().source == source {
            return Ok(false);
        }
        let key = Arc::new(parse(
            &self.cert_path,
            &self.key_path,
            &source.0,
            &source.1,
        )?);
        *self.current.write() = Loaded { key, source };
        self.loads.fetch_add(1, Ordering::SeqCst);
        tracing::info!(cert = %self.cert_path.display(), "loaded a new webhook serving certificate");
        Ok(true)
    }

    /// How many pairs have loaded (1 after construction; each reload that
    /// took a new pair adds one).
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::SeqCst)
    }

    /// The end-entity certificate new handshakes present (DER).
    pub fn certificate(&self) -> Option<CertificateDer<'static>> {
        let key = Arc::clone(&self.current.read().key);
        key.cert.first().cloned()
    }

    /// Polls the files every `interval` until `shutdown`, reloading when
    /// they change; a failure is logged once per distinct error.
    pub fn watch(
        self: &Arc<Self>,
        interval: Duration,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let watcher = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let outcome = watcher.reload().err().map(|e| e.to_string());
                let mut last = watcher.last_error.lock();
                if outcome != *last {
                    if let Some(e) = &outcome {
                        tracing::warn!(error = %e, "webhook certificate not reloaded; the previous one keeps serving");
                    }
                    *last = outcome;
                }
            }
        })
    }
}

impl ResolvesServerCert for CertWatcher {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.current.read().key))
    }
}
