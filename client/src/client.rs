//! [`Client`]: the HTTP transport (hyper 1 + hyper-util's pooled client +
//! hyper-rustls, HTTP/1.1 and HTTP/2 by ALPN), with authentication, a user
//! agent, timeouts, client-side rate limiting, error mapping, and the raw
//! request methods [`Api`](crate::Api) is built on.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use http::header::{ACCEPT, AUTHORIZATION, RETRY_AFTER, USER_AGENT};
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyDataStream, BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_pki_types::ServerName;
use serde::de::DeserializeOwned;

use crate::auth::Authenticator;
use crate::config::{Config, ConfigError};
use crate::content::{self, ContentType};
use crate::error::{ApiError, Error};
use crate::metrics::{verb_and_resource, ClientMetrics};
use crate::ratelimit::TokenBucket;
use crate::tls::{self, ClientCertSlot, TlsError};
use crate::watch::WatchStream;

/// The largest error body read to build an [`ApiError`].
const MAX_ERROR_BODY: usize = 1024 * 1024;

type HttpClient = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A Kubernetes API client. Cheap to clone: clones share the connection
/// pool, credentials and rate limiter.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// What reads ask for; per handle ([`Client::with_content_type`]).
    content_type: ContentType,
}

struct Inner {
    http: HttpClient,
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    /// The server URL's path without a trailing `/` (usually empty).
    path_prefix: String,
    server: Arc<str>,
    auth: Authenticator,
    user_agent: HeaderValue,
    request_timeout: Option<Duration>,
    limiter: Option<TokenBucket>,
    default_namespace: String,
    max_watch_frame_size: usize,
    metrics: OnceLock<Arc<dyn ClientMetrics>>,
    max_response_size: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.server)
            .field("default_namespace", &self.inner.default_namespace)
            .finish_non_exhaustive()
    }
}

impl TryFrom<Config> for Client {
    type Error = Error;

    fn try_from(config: Config) -> Result<Self, Error> {
        Self::new(config)
    }
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::Config(ConfigError::Invalid {
        field: field.to_owned(),
        message: message.into(),
    })
}

/// The HTTPS-or-HTTP connector for a configuration.
fn connector(
    config: &Config,
    cert_slot: Arc<ClientCertSlot>,
) -> Result<HttpsConnector<HttpConnector>, Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    http.set_nodelay(true);
    http.set_keepalive(Some(Duration::from_secs(30)));
    let tls = tls::client_config(&config.tls, cert_slot)?;
    let mut builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls.server_name {
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(name.to_owned()).map_err(|e| {
            invalid(
                "tls-server-name",
                format!("{name:?} is not a DNS name or IP address ({e})"),
            )
        })?;
        builder = builder.with_server_name_resolver(FixedServerNameResolver::new(server_name));
    }
    Ok(builder.enable_all_versions().wrap_connector(http))
}

impl Client {
    /// A client for the current context of a kubeconfig given as YAML text,
    /// in one call (`Kubeconfig::from_yaml`, `Config::from_custom_kubeconfig`
    /// with default options, then [`Client::new`]): the way to reach an
    /// in-process test API server from its `kubeconfig()`.
    ///
    /// ```
    /// let yaml = "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
    ///     clusters: [{name: k, cluster: {server: 'http://127.0.0.1:6443'}}]\n\
    ///     contexts: [{name: c, context: {cluster: k, user: u}}]\n\
    ///     users: [{name: u, user: {}}]\n";
    /// let client = kcontrol_client::Client::from_kubeconfig_yaml(yaml)?;
    /// assert_eq!(client.host(), "127.0.0.1:6443");
    /// # Ok::<(), kcontrol_client::Error>(())
    /// ```
    ///
    /// # Errors
    /// When the YAML is not a usable kubeconfig, or the client cannot be
    /// built from it (TLS material...).
    pub fn from_kubeconfig_yaml(yaml: &str) -> Result<Self, Error> {
        let kubeconfig = crate::Kubeconfig::from_yaml(yaml)?;
        let config =
            Config::from_custom_kubeconfig(&kubeconfig, &crate::KubeconfigOptions::default())?;
        Self::new(config)
    }

    /// A client for a configuration. Needs no runtime to build, but must be
    /// used from within a tokio runtime.
    pub fn new(config: Config) -> Result<Self, Error> {
        let url = &config.cluster_url;
        let scheme = url
            .scheme()
            .cloned()
            .ok_or_else(|| invalid("server", "the URL has no scheme"))?;
        if scheme != http::uri::Scheme::HTTPS && scheme != http::uri::Scheme::HTTP {
            return Err(invalid("server", format!("unsupported scheme {scheme}")));
        }
        let authority = url
            .authority()
            .cloned()
            .ok_or_else(|| invalid("server", "the URL has no host"))?;
        let path_prefix = url.path().trim_end_matches('/').to_owned();
        config.check_credentials_transport()?;
        let cert_slot = Arc::new(ClientCertSlot::new());
        let auth = Authenticator::new(&config.auth, cert_slot.clone())?;
        let connector = connector(&config, cert_slot)?;
        let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(15))
            .build(connector);
        let user_agent = HeaderValue::from_str(&config.user_agent)
            .map_err(|_| invalid("user_agent", "not a valid header value"))?;
        let limiter = config.rate_limit.and_then(TokenBucket::new);
        Ok(Self {
            content_type: config.content_type,
            inner: Arc::new(Inner {
                http,
                scheme,
                server: Arc::from(format!(
                    "{}://{}",
                    url.scheme_str().unwrap_or("https"),
                    authority
                )),
                authority,
                path_prefix,
                auth,
                user_agent,
                request_timeout: config.request_timeout,
                limiter,
                default_namespace: config.default_namespace,
                max_watch_frame_size: config.max_watch_frame_size,
                metrics: OnceLock::new(),
                max_response_size: config.max_response_size,
            }),
        })
    }

    /// A client from [`Config::infer`].
    pub fn try_default() -> Result<Self, Error> {
        Self::new(Config::infer()?)
    }

    /// The namespace of the configuration's context.
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    /// The server, as `scheme://host:port`.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// What reads ask the server to encode in ([`Config::content_type`]).
    pub fn content_type(&self) -> ContentType {
        self.content_type
    }

    /// The same client (sharing its connections, credentials and rate
    /// limiter) asking reads in `content_type`:
    /// `client.with_content_type(ContentType::Json)` turns protobuf off.
    #[must_use]
    pub fn with_content_type(&self, content_type: ContentType) -> Self {
        Self {
            inner: self.inner.clone(),
            content_type,
        }
    }

    /// The configured maximum watch frame size.
    pub fn max_watch_frame_size(&self) -> usize {
        self.inner.max_watch_frame_size
    }

    /// Reports every request of this client and its clones to `metrics`
    /// from now on. Only the first call takes effect (false after that).
    pub fn set_metrics(&self, metrics: Arc<dyn ClientMetrics>) -> bool {
        self.inner.metrics.set(metrics).is_ok()
    }

    /// The `host:port` requests go to (the metrics' `host` label).
    pub fn host(&self) -> &str {
        self.inner.authority.as_str()
    }

    /// Waits for the client-side rate limiter, reporting the wait with the
    /// request's verb.
    async fn rate_limit(&self, request: &Request<Bytes>) {
        if let Some(limiter) = &self.inner.limiter {
            let started = tokio::time::Instant::now();
            limiter.acquire().await;
            if let Some(metrics) = self.inner.metrics.get() {
                let (verb, _) = verb_and_resource(
                    request.method(),
                    request.uri().path(),
                    request.uri().query(),
                );
                metrics.rate_limited(verb, self.host(), started.elapsed());
            }
        }
    }

    /// The configured request timeout.
    pub(crate) fn request_timeout(&self) -> Option<Duration> {
        self.inner.request_timeout
    }

    /// The absolute URI for a request URI holding a path and query.
    fn full_uri(&self, uri: &http::Uri) -> Result<http::Uri, Error> {
        let path_and_query = uri.path_and_query().map_or("/", |pq| pq.as_str());
        http::Uri::builder()
            .scheme(self.inner.scheme.clone())
            .authority(self.inner.authority.clone())
            .path_and_query(format!("{}{}", self.inner.path_prefix, path_and_query))
            .build()
            .map_err(|e| Error::InvalidRequest(format!("invalid request URI: {e}")))
    }

    /// Maps a transport error, naming TLS failures precisely.
    pub(crate) fn transport_error(
        &self,
        error: Box<dyn std::error::Error + Send + Sync>,
        connecting: bool,
    ) -> Error {
        if let Some(tls_error) = tls::find_tls_failure(error.as_ref()) {
            return Error::Tls(TlsError {
                kind: tls::classify(&tls_error),
                server: self.inner.server.to_string(),
                source: tls_error,
            });
        }
        if connecting {
            Error::Connect {
                server: self.inner.server.to_string(),
                source: error,
            }
        } else {
            Error::Transport(error)
        }
    }

    /// Sends a request with credentials, retrying once after a 401 when the
    /// credentials can be refreshed (rotated token file, exec plugin).
    async fn send(&self, request: Request<Bytes>) -> Result<Response<Incoming>, Error> {
        let (verb, resource) = verb_and_resource(
            &request.method().clone(),
            request.uri().path(),
            request.uri().query(),
        );
        let span = tracing::debug_span!("api_request", verb, resource = %resource, code = tracing::field::Empty);
        let started = tokio::time::Instant::now();
        let method = request.method().clone();
        let result = tracing::Instrument::instrument(self.send_inner(request), span.clone()).await;
        let code = result.as_ref().ok().map(|r| r.status().as_u16());
        if let Some(code) = code {
            span.record("code", code);
        }
        if let Some(metrics) = self.inner.metrics.get() {
            metrics.request(method.as_str(), verb, self.host(), code, started.elapsed());
        }
        result
    }

    async fn send_inner(&self, request: Request<Bytes>) -> Result<Response<Incoming>, Error> {
        let (parts, body) = request.into_parts();
        let uri = self.full_uri(&parts.uri)?;
        let mut retried = false;
        loop {
            let authorization = self.inner.auth.authorization().await?;
            let mut builder = Request::builder()
                .method(parts.method.clone())
                .uri(uri.clone());
            if let Some(headers) = builder.headers_mut() {
                headers.extend(parts.headers.clone());
                headers
                    .entry(USER_AGENT)
                    .or_insert_with(|| self.inner.user_agent.clone());
                headers
                    .entry(ACCEPT)
                    .or_insert_with(|| HeaderValue::from_static("application/json"));
                if let Some(value) = &authorization {
                    headers.insert(AUTHORIZATION, value.clone());
                }
            }
            let request = builder
                .body(Full::new(body.clone()))
                .map_err(|e| Error::InvalidRequest(format!("cannot build the request: {e}")))?;
            let response = self.inner.http.request(request).await.map_err(|e| {
                let connecting = e.is_connect();
                self.transport_error(Box::new(e), connecting)
            })?;
            tracing::trace!(method = %parts.method, %uri, status = %response.status(), "API request");
            if response.status() == http::StatusCode::UNAUTHORIZED
                && !retried
                && self
                    .inner
                    .auth
                    .refresh_after_unauthorized(authorization.as_ref())
                    .await
            {
                tracing::debug!("401 Unauthorized: retrying once with refreshed credentials");
                retried = true;
                continue;
            }
            return Ok(response);
        }
    }

    /// Turns an HTTP error response into an [`Error::Api`].
    pub(crate) async fn error_response(&self, response: Response<Incoming>) -> Error {
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = match Limited::new(response.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                tracing::debug!(error = %e, "could not read the error body");
                Bytes::new()
            }
        };
        ApiError::from_response(code, retry_after, &body).into()
    }

    /// Reads a whole body, at most `max_response_size` bytes of it.
    async fn read_body(&self, body: Incoming) -> Result<Bytes, Error> {
        let limit = self.inner.max_response_size;
        match Limited::new(body, limit).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                Err(Error::ResponseTooLarge { limit })
            }
            Err(e) => Err(self.transport_error(e, false)),
        }
    }

    /// Runs `work` under the request timeout.
    async fn with_timeout<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match self.inner.request_timeout {
            Some(limit) => tokio::time::timeout(limit, work)
                .await
                .map_err(|_| Error::Timeout(limit))?,
            None => work.await,
        }
    }

    /// Sends a non-watch request (rate-limited, with credentials and the
    /// request timeout) and returns the response as it is, whatever its
    /// status. The body is not read; the timeout covers only the headers.
    /// `request`'s URI is a path and query (`/api/v1/namespaces`).
    pub async fn request_raw(&self, request: Request<Bytes>) -> Result<Response<Incoming>, Error> {
        self.rate_limit(&request).await;
        self.with_timeout(self.send(request)).await
    }

    /// Sends a non-watch request and returns the body of a 2xx answer;
    /// other answers become [`Error::Api`].
    pub async fn request_bytes(&self, request: Request<Bytes>) -> Result<Bytes, Error> {
        self.rate_limit(&request).await;
        self.with_timeout(async {
            let response = self.send(request).await?;
            if !response.status().is_success() {
                return Err(self.error_response(response).await);
            }
            self.read_body(response.into_body()).await
        })
        .await
    }

    /// Sends a non-watch request and decodes the body of a 2xx answer
    /// straight into `T`, by its `Content-Type` (JSON, or protobuf when the
    /// request asked for it). `what` names the body in decode errors.
    pub async fn request_json<T: DeserializeOwned>(
        &self,
        request: Request<Bytes>,
        what: &str,
    ) -> Result<T, Error> {
        self.rate_limit(&request).await;
        let (protobuf, body) = self
            .with_timeout(async {
                let response = self.send(request).await?;
                if !response.status().is_success() {
                    return Err(self.error_response(response).await);
                }
                let protobuf = content::is_protobuf(response.headers());
                Ok((protobuf, self.read_body(response.into_body()).await?))
            })
            .await?;
        content::decode(protobuf, &body, what)
    }

    /// Starts a watch: rate-limited like every request (as in client-go: a
    /// relist storm is throttled too), not bound by the request timeout
    /// beyond the response headers; it ends when the server ends it
    /// (`timeoutSeconds`). An HTTP error answer is returned as [`Error::Api`].
    pub async fn request_watch<K: DeserializeOwned>(
        &self,
        request: Request<Bytes>,
    ) -> Result<WatchStream<K>, Error> {
        self.rate_limit(&request).await;
        let response = self.with_timeout(self.send(request)).await?;
        if !response.status().is_success() {
            return Err(self.error_response(response).await);
        }
        let protobuf = content::is_protobuf(response.headers());
        let client = self.clone();
        let chunks = BodyDataStream::new(response.into_body())
            .map_err(move |e| client.transport_error(Box::new(e), false));
        Ok(if protobuf {
            WatchStream::new_protobuf(chunks, self.inner.max_watch_frame_size)
        } else {
            WatchStream::new(chunks, self.inner.max_watch_frame_size)
        })
    }
}
