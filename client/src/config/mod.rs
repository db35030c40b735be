//! [`Config`]: everything a [`Client`](crate::Client) needs to reach an API
//! server: the URL, TLS settings, credentials, namespace, timeouts, rate
//! limits. Built from a kubeconfig ([`Config::from_kubeconfig`]), from the
//! pod's service account ([`Config::incluster`]), by trying both
//! ([`Config::infer`]), or by hand ([`Config::new`]).

mod incluster;
mod kubeconfig;
mod resolve;

use std::path::PathBuf;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use crate::auth::{Auth, ExecConfig, ExecEnvVar, ExecInteractiveMode};
pub use kubeconfig::{
    AuthInfo, AuthProviderConfig, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext, NamedExtension,
};

/// The default maximum size of one watch frame (one JSON event line): 64 MiB.
pub const DEFAULT_MAX_WATCH_FRAME_SIZE: usize = 64 * 1024 * 1024;

/// The default maximum size of one whole (non-streamed) response body, such
/// as a list read by `Api::list`: 1 GiB. [`Api::list_stream`](crate::Api::list_stream)
/// never holds a whole list and is bounded per item instead.
pub const DEFAULT_MAX_RESPONSE_SIZE: usize = 1024 * 1024 * 1024;

/// How a [`Client`](crate::Client) reaches and authenticates to an API server.
///
/// `Debug` never shows a secret (tokens, passwords, keys, exec environment
/// values, a password in the URL's user information).
#[derive(Clone)]
pub struct Config {
    /// The server URL, e.g. `https://10.0.0.1:6443`; it may carry a path
    /// prefix (`https://proxy/k8s/clusters/c1`), prepended to every request.
    pub cluster_url: http::Uri,
    /// The namespace `Api::default_namespaced` uses.
    pub default_namespace: String,
    /// TLS settings.
    pub tls: TlsConfig,
    /// Credentials.
    pub auth: Auth,
    /// Time allowed to open a TCP connection (default 30 s).
    pub connect_timeout: Option<Duration>,
    /// Time allowed for a whole non-watch request, body included (default
    /// 120 s). Watches have no client-side limit: they end at the server's
    /// `timeoutSeconds`.
    pub request_timeout: Option<Duration>,
    /// Client-side rate limit for non-watch requests; `None` turns it off.
    /// Default: client-go's 5 QPS with a burst of 10.
    pub rate_limit: Option<RateLimit>,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// The largest watch frame accepted before the stream fails
    /// ([`DEFAULT_MAX_WATCH_FRAME_SIZE`] by default).
    pub max_watch_frame_size: usize,
    /// The largest whole response body read (a list, an object, a patch
    /// answer) before the request fails with
    /// [`Error::ResponseTooLarge`](crate::Error::ResponseTooLarge)
    /// ([`DEFAULT_MAX_RESPONSE_SIZE`] by default).
    pub max_response_size: usize,
    /// Send credentials (bearer token, token file, exec plugin token, basic
    /// auth) to an `http://` server. Off by default: [`Client::new`](crate::Client::new)
    /// refuses such a configuration, as the credentials would cross the
    /// network in clear text. Meant for loopback test servers only.
    pub allow_http_credentials: bool,
    /// What reads ask the server to encode in (client-go's
    /// `ContentConfig.ContentType`/`AcceptContentTypes`): protobuf for the
    /// built-in kinds that have it, the default, or JSON for everything
    /// ([`ContentType::Json`](crate::ContentType::Json)). Writes are JSON.
    pub content_type: crate::ContentType,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("cluster_url", &redacted_url(&self.cluster_url))
            .field("default_namespace", &self.default_namespace)
            .field("tls", &self.tls)
            .field("auth", &self.auth)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("rate_limit", &self.rate_limit)
            .field("user_agent", &self.user_agent)
            .field("max_watch_frame_size", &self.max_watch_frame_size)
            .field("max_response_size", &self.max_response_size)
            .field("allow_http_credentials", &self.allow_http_credentials)
            .field("content_type", &self.content_type)
            .finish()
    }
}

/// A URL for messages: user information (`user:password@`) is replaced by
/// `[REDACTED]@`.
pub(crate) fn redacted_url(url: &http::Uri) -> String {
    let text = url.to_string();
    match url.authority().map(http::uri::Authority::as_str) {
        Some(authority) if authority.contains('@') => {
            let host = authority.rsplit_once('@').map_or("", |(_, host)| host);
            text.replacen(authority, &format!("[REDACTED]@{host}"), 1)
        }
        _ => text,
    }
}

/// TLS settings of a [`Config`].
#[derive(Clone, Default)]
pub struct TlsConfig {
    /// CA certificates the server certificate must chain to. Empty means the
    /// system's trust store.
    pub root_certs: Vec<CertificateDer<'static>>,
    /// Skip verification of the server certificate (logged as a warning).
    pub insecure_skip_verify: bool,
    /// The name to verify the server certificate against (and send as SNI)
    /// instead of the host of the URL.
    pub server_name: Option<String>,
    /// A client certificate and key for mutual TLS.
    pub client_identity: Option<ClientIdentity>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("root_certs", &self.root_certs.len())
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .field("server_name", &self.server_name)
            .field("client_identity", &self.client_identity)
            .finish()
    }
}

/// A client certificate chain and its private key. `Debug` shows neither.
#[derive(Clone)]
pub struct ClientIdentity {
    /// The certificate chain, leaf first.
    pub cert_chain: Vec<CertificateDer<'static>>,
    key: std::sync::Arc<PrivateKeyDer<'static>>,
}

impl ClientIdentity {
    /// A certificate chain (leaf first) and its private key.
    pub fn new(cert_chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> Self {
        Self {
            cert_chain,
            key: std::sync::Arc::new(key),
        }
    }

    /// Parses a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1
    /// or SEC1).
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, ConfigError> {
        Ok(Self::new(
            parse_pem_certs(cert_pem, "client certificate")?,
            parse_pem_key(key_pem, "client key")?,
        ))
    }

    /// The private key.
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }
}

/// Parses a PEM private key. The error never quotes the input.
pub(crate) fn parse_pem_key(
    pem: &[u8],
    field: &str,
) -> Result<PrivateKeyDer<'static>, ConfigError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| ConfigError::Invalid {
        field: field.to_owned(),
        message: "not a PEM private key (PKCS#8, PKCS#1 or SEC1)".to_owned(),
    })
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("certificates", &self.cert_chain.len())
            .field("key", &"[REDACTED]")
            .finish()
    }
}

/// Parses every certificate of a PEM bundle; at least one is required.
pub(crate) fn parse_pem_certs(
    pem: &[u8],
    field: &str,
) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::Invalid {
            field: field.to_owned(),
            message: format!("not a valid PEM certificate bundle ({e})"),
        })?;
    if certs.is_empty() {
        return Err(ConfigError::Invalid {
            field: field.to_owned(),
            message: "no PEM certificate found".to_owned(),
        });
    }
    Ok(certs)
}

/// A token bucket: `qps` tokens per second, at most `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second (must be > 0).
    pub qps: f64,
    /// Requests allowed at once (at least 1).
    pub burst: u32,
}

impl Default for RateLimit {
    /// client-go's defaults: 5 QPS, burst 10.
    fn default() -> Self {
        Self {
            qps: 5.0,
            burst: 10,
        }
    }
}

/// Which kubeconfig to read and which parts of it to use.
#[derive(Clone, Debug, Default)]
pub struct KubeconfigOptions {
    /// An explicit kubeconfig file; `None` means `$KUBECONFIG` (a list of
    /// files, merged) or `~/.kube/config`.
    pub path: Option<PathBuf>,
    /// Use this context instead of `current-context`.
    pub context: Option<String>,
    /// Use this cluster instead of the context's.
    pub cluster: Option<String>,
    /// Use this user instead of the context's.
    pub user: Option<String>,
}

/// Why a configuration could not be loaded. Messages name the file and the
/// field that was wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A kubeconfig file could not be read.
    #[error("cannot read kubeconfig {path}: {source}")]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A kubeconfig file is not valid YAML of the expected shape.
    #[error("malformed kubeconfig {path}: {source}")]
    ParseKubeconfig {
        /// The file (`<memory>` for a string).
        path: String,
        /// The YAML error, with the field path and line.
        #[source]
        source: serde_yaml::Error,
    },
    /// No kubeconfig file was found.
    #[error("no kubeconfig found ({0})")]
    NoKubeconfig(String),
    /// A file a kubeconfig field points to could not be read.
    #[error("{field}: cannot read {path}: {source}")]
    ReadFile {
        /// The field (`users[alice].client-key`).
        field: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A field has an invalid value, or a reference does not resolve.
    #[error("{field}: {message}")]
    Invalid {
        /// The field (`contexts[dev].cluster`, `clusters[prod].server`...).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// Not running in a pod, or the service account files are missing.
    #[error("in-cluster configuration: {0}")]
    InCluster(String),
    /// [`Config::infer`] found neither a usable kubeconfig nor an in-cluster
    /// environment.
    #[error("no usable configuration: kubeconfig: {kubeconfig}; in-cluster: {incluster}")]
    Infer {
        /// Why the kubeconfig attempt failed.
        kubeconfig: Box<ConfigError>,
        /// Why the in-cluster attempt failed.
        incluster: Box<ConfigError>,
    },
}

/// The default `User-Agent`: crate name, version, OS and architecture.
fn default_user_agent() -> String {
    format!(
        "kcontrol-client/{} ({}/{})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

impl Config {
    /// A configuration for `cluster_url` with no credentials, the system
    /// trust store, namespace `default` and the default timeouts and limits.
    pub fn new(cluster_url: http::Uri) -> Self {
        Self {
            cluster_url,
            default_namespace: "default".to_owned(),
            tls: TlsConfig::default(),
            auth: Auth::None,
            connect_timeout: Some(Duration::from_secs(30)),
            request_timeout: Some(Duration::from_secs(120)),
            rate_limit: Some(RateLimit::default()),
            user_agent: default_user_agent(),
            max_watch_frame_size: DEFAULT_MAX_WATCH_FRAME_SIZE,
            max_response_size: DEFAULT_MAX_RESPONSE_SIZE,
            allow_http_credentials: false,
            content_type: crate::ContentType::default(),
        }
    }

    /// Loads a kubeconfig (an explicit file, else `$KUBECONFIG` merged
    /// kubectl-style, else `~/.kube/config`) and resolves the selected
    /// context into a configuration.
    pub fn from_kubeconfig(options: &KubeconfigOptions) -> Result<Self, ConfigError> {
        let kubeconfig = match &options.path {
            Some(path) => Kubeconfig::read_from(path)?,
            None => Kubeconfig::read_default()?,
        };
        Self::from_custom_kubeconfig(&kubeconfig, options)
    }

    /// Resolves a kubeconfig already in memory (`options.path` is ignored).
    pub fn from_custom_kubeconfig(
        kubeconfig: &Kubeconfig,
        options: &KubeconfigOptions,
    ) -> Result<Self, ConfigError> {
        resolve::resolve(kubeconfig, options)
    }

    /// The configuration of a pod: `KUBERNETES_SERVICE_HOST`/`PORT`, the
    /// service-account token (re-read when it rotates), CA and namespace.
    pub fn incluster() -> Result<Self, ConfigError> {
        incluster::load()
    }

    /// A kubeconfig if one is present (`$KUBECONFIG`, else
    /// `~/.kube/config`), else the in-cluster configuration. The error names
    /// both attempts.
    pub fn infer() -> Result<Self, ConfigError> {
        let kubeconfig_err = match Self::from_kubeconfig(&KubeconfigOptions::default()) {
            Ok(config) => return Ok(config),
            // A kubeconfig that exists but is broken is an error of its own:
            // falling back to in-cluster would hide it.
            Err(ConfigError::NoKubeconfig(reason)) => ConfigError::NoKubeconfig(reason),
            Err(other) => return Err(other),
        };
        match Self::incluster() {
            Ok(config) => Ok(config),
            Err(incluster_err) => Err(ConfigError::Infer {
                kubeconfig: Box::new(kubeconfig_err),
                incluster: Box::new(incluster_err),
            }),
        }
    }

    /// Sets the request timeout for non-watch requests.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets (or with `None` turns off) client-side rate limiting.
    #[must_use]
    pub fn with_rate_limit(mut self, rate_limit: Option<RateLimit>) -> Self {
        self.rate_limit = rate_limit;
        self
    }

    /// Sets the credentials.
    #[must_use]
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Sets the default namespace.
    #[must_use]
    pub fn with_default_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.default_namespace = namespace.into();
        self
    }

    /// Sets the maximum watch frame size.
    #[must_use]
    pub fn with_max_watch_frame_size(mut self, bytes: usize) -> Self {
        self.max_watch_frame_size = bytes;
        self
    }

    /// Sets the maximum size of a whole response body.
    #[must_use]
    pub fn with_max_response_size(mut self, bytes: usize) -> Self {
        self.max_response_size = bytes;
        self
    }

    /// Sets what reads ask the server to encode in:
    /// [`ContentType::Json`](crate::ContentType::Json) turns protobuf off.
    #[must_use]
    pub fn with_content_type(mut self, content_type: crate::ContentType) -> Self {
        self.content_type = content_type;
        self
    }

    /// Allows (or, the default, refuses) sending credentials to an
    /// `http://` server: see [`Config::allow_http_credentials`].
    #[must_use]
    pub fn with_http_credentials_allowed(mut self, allow: bool) -> Self {
        self.allow_http_credentials = allow;
        self
    }

    /// Refuses credentials over plain HTTP unless allowed, and a URL with
    /// user information (which would show up in messages): called by
    /// [`Client::new`](crate::Client::new).
    pub(crate) fn check_credentials_transport(&self) -> Result<(), ConfigError> {
        if self
            .cluster_url
            .authority()
            .is_some_and(|a| a.as_str().contains('@'))
        {
            return Err(ConfigError::Invalid {
                field: "server".to_owned(),
                message: format!(
                    "{} carries user information (user:password@); set credentials with Config::auth",
                    redacted_url(&self.cluster_url)
                ),
            });
        }
        let credential = match &self.auth {
            Auth::None => return Ok(()),
            Auth::Basic { .. } => "a username and password",
            Auth::Bearer(_) => "a bearer token",
            Auth::TokenFile(_) => "a bearer token (token file)",
            Auth::Exec(_) => "a bearer token (exec plugin)",
        };
        if self.cluster_url.scheme() != Some(&http::uri::Scheme::HTTP)
            || self.allow_http_credentials
        {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            field: "server".to_owned(),
            message: format!(
                "{credential} would be sent in clear text to {}; use an https:// server, \
                 or set Config::allow_http_credentials (with_http_credentials_allowed) \
                 for a loopback test server",
                redacted_url(&self.cluster_url)
            ),
        })
    }
}
