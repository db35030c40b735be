//! [`WebhookServer`]: HTTPS (rustls; HTTP/2 and HTTP/1.1 by ALPN) with the
//! [`CertWatcher`]'s certificate, routing `POST <path>` to the admission
//! and conversion handlers registered there and `GET /healthz` to `ok`.
//! Bodies must be `application/json` and at most the size limit (7 MiB by
//! default, controller-runtime's); anything else is answered with a review
//! saying why. A handler that panics is answered with a 500 in the review;
//! the server goes on.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kcontrol_indexer::TypedResource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::admission::{
    errored, outcome, AdmissionEndpoint, AdmissionHandler, Defaulter, DefaultingEndpoint,
    RawEndpoint, ValidatingEndpoint, Validator,
};
use super::certs::CertWatcher;
use super::conversion::Conversion;
use super::metrics::WebhookMetrics;
use super::review::{self, ReviewError};

/// controller-runtime's limit on a webhook request body (7 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS configuration could not be built.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// Two handlers were registered at one path.
    #[error("two webhooks registered at {0}")]
    DuplicatePath(String),
}

/// What answers at a path.
#[derive(Clone)]
enum Route {
    Admission(Arc<dyn AdmissionEndpoint>),
    Conversion(Arc<Conversion>),
}

/// Admission and conversion webhooks on one HTTPS listener
/// (controller-runtime's `webhook.Server`).
pub struct WebhookServer {
    certs: Arc<CertWatcher>,
    routes: BTreeMap<String, Route>,
    duplicate: Option<String>,
    max_body: usize,
    reload_interval: Duration,
    metrics: Option<WebhookMetrics>,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("paths", &self.routes.keys().collect::<Vec<_>>())
            .field("max_body", &self.max_body)
            .field("reload_interval", &self.reload_interval)
            .finish_non_exhaustive()
    }
}

impl WebhookServer {
    /// A server presenting `certs` (reloaded every 10 s when the files
    /// change), no handlers yet.
    pub fn new(certs: Arc<CertWatcher>) -> Self {
        Self {
            certs,
            routes: BTreeMap::new(),
            duplicate: None,
            max_body: DEFAULT_MAX_BODY_BYTES,
            reload_interval: Duration::from_secs(10),
            metrics: None,
        }
    }

    fn route(mut self, path: &str, route: Route) -> Self {
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        if self.routes.insert(path.clone(), route).is_some() || path == "/healthz" {
            self.duplicate.get_or_insert(path);
        }
        self
    }

    /// A mutating webhook at `path` that sets defaults on `K` objects.
    #[must_use]
    pub fn defaulting<K, D>(self, path: &str, defaulter: D) -> Self
    where
        K: TypedResource + Serialize + DeserializeOwned + Send + 'static,
        D: Defaulter<K>,
    {
        let endpoint = DefaultingEndpoint {
            defaulter,
            kind: PhantomData::<fn() -> K>,
        };
        self.route(path, Route::Admission(Arc::new(endpoint)))
    }

    /// A validating webhook at `path` for `K` objects.
    #[must_use]
    pub fn validating<K, V>(self, path: &str, validator: V) -> Self
    where
        K: TypedResource + DeserializeOwned + Send + Sync + 'static,
        V: Validator<K>,
    {
        let endpoint = ValidatingEndpoint {
            validator,
            kind: PhantomData::<fn() -> K>,
        };
        self.route(path, Route::Admission(Arc::new(endpoint)))
    }

    /// A raw admission handler (kube-rs's request and response types) at
    /// `path`, mutating or validating.
    #[must_use]
    pub fn admission<H: AdmissionHandler>(self, path: &str, handler: H) -> Self {
        self.route(path, Route::Admission(Arc::new(RawEndpoint(handler))))
    }

    /// A conversion webhook at `path`.
    #[must_use]
    pub fn conversion(self, path: &str, conversion: Conversion) -> Self {
        self.route(path, Route::Conversion(Arc::new(conversion)))
    }

    /// The largest request body read (default [`DEFAULT_MAX_BODY_BYTES`]).
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// How often the certificate files are checked for a change (default
    /// 10 s).
    #[must_use]
    pub fn cert_reload_interval(mut self, interval: Duration) -> Self {
        self.reload_interval = interval;
        self
    }

    /// Counts requests into these metric families.
    #[must_use]
    pub fn metrics(mut self, metrics: WebhookMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Whether metric families were given.
    pub(crate) fn has_metrics(&self) -> bool {
        self.metrics.is_some()
    }

    /// The registered paths.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.routes.keys().map(String::as_str)
    }

    fn tls_config(&self) -> Result<Arc<rustls::ServerConfig>, WebhookError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| WebhookError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&self.certs) as _);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Binds `addr` (port 0: any) and serves until `shutdown`; the bound
    /// address. The certificate files are polled for changes meanwhile.
    /// Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// When `addr` cannot be bound, the TLS configuration fails, or two
    /// handlers share a path.
    pub async fn serve(
        self,
        addr: SocketAddr,
        shutdown: CancellationToken,
    ) -> Result<SocketAddr, WebhookError> {
        if let Some(path) = self.duplicate.clone() {
            return Err(WebhookError::DuplicatePath(path));
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(self.tls_config()?);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| WebhookError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| WebhookError::Bind { addr, source })?;
        self.certs.watch(self.reload_interval, shutdown.clone());
        tracing::info!(%bound, paths = ?self.routes.keys().collect::<Vec<_>>(), "serving webhooks");
        let state = Arc::new(State {
            routes: self.routes,
            max_body: self.max_body,
            metrics: self.metrics.unwrap_or_default(),
        });
        tokio::spawn(accept_loop(listener, acceptor, state, shutdown));
        Ok(bound)
    }
}

/// What every connection shares.
struct State {
    routes: BTreeMap<String, Route>,
    max_body: usize,
    metrics: WebhookMetrics,
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<State>,
    shutdown: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook listener");
                    continue;
                }
            },
        };
        let (acceptor, state, shutdown) = (acceptor.clone(), Arc::clone(&state), shutdown.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return tracing::debug!(error = %e, "webhook TLS handshake"),
                Err(_) => return tracing::debug!("webhook TLS handshake timed out"),
            };
            let service = service_fn(move |req| {
                let state = Arc::clone(&state);
                async move { Ok::<_, Infallible>(handle(&state, req).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            tokio::pin!(connection);
            let result = tokio::select! {
                r = connection.as_mut() => r,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "webhook connection");
            }
        });
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    reply(
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

/// Serves one request.
async fn handle(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    if path == "/healthz" {
        return match *req.method() {
            Method::GET | Method::HEAD => text(StatusCode::OK, "ok\n"),
            _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
        };
    }
    let Some(route) = state.routes.get(&path).cloned() else {
        return text(StatusCode::NOT_FOUND, "not found\n");
    };
    if req.method() != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    state.metrics.started(&path);
    let started = Instant::now();
    let (allowed, code, body) = answer(state, &route, req).await;
    state.metrics.answered(&path, allowed, code);
    state
        .metrics
        .finished(&path, StatusCode::OK.as_u16(), started.elapsed());
    reply(StatusCode::OK, "application/json", body)
}

/// Reads the body (JSON, within the limit).
async fn read_body(state: &State, req: Request<Incoming>) -> Result<Bytes, ReviewError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let media = content_type.split(';').next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return Err(ReviewError::new(
            400,
            format!("contentType={content_type}, expected application/json"),
            "",
        ));
    }
    match Limited::new(req.into_body(), state.max_body)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ReviewError::new(
                413,
                format!(
                    "request entity is too large; limit is {} bytes",
                    state.max_body
                ),
                "",
            ))
        }
        Err(e) => Err(ReviewError::new(
            400,
            format!("reading the request body: {e}"),
            "",
        )),
    }
}

/// The answer to a request at a route: allowed, the code in the review,
/// the body.
async fn answer(state: &State, route: &Route, req: Request<Incoming>) -> (bool, u16, Vec<u8>) {
    let body = read_body(state, req).await;
    match route {
        Route::Admission(endpoint) => {
            let input = match body.and_then(|b| review::decode_admission(&b)) {
                Ok(input) => input,
                Err(mut e) => {
                    if e.api_version.is_empty() {
                        e.api_version = "admission.k8s.io/v1".into();
                    }
                    return (false, e.code, review::admission_error(&e));
                }
            };
            let request = input.request.clone();
            let response = match AssertUnwindSafe(endpoint.call(input)).catch_unwind().await {
                Ok(r) => r,
                Err(_) => {
                    tracing::error!(uid = %request.uid, "an admission handler panicked");
                    errored(&request, 500, "the admission handler panicked".into())
                }
            };
            let (allowed, code) = outcome(&response);
            (allowed, code, review::encode_admission(response))
        }
        Route::Conversion(conversion) => {
            let request = match body.and_then(|b| review::decode_conversion(&b)) {
                Ok(r) => r,
                Err(mut e) => {
                    if e.api_version.is_empty() {
                        e.api_version = "apiextensions.k8s.io/v1".into();
                    }
                    return (false, e.code, review::conversion_error(&e));
                }
            };
            let api_version = request
                .types
                .as_ref()
                .map_or("apiextensions.k8s.io/v1".to_owned(), |t| {
                    t.api_version.clone()
                });
            let conversion = Arc::clone(conversion);
            let response = match std::panic::catch_unwind(AssertUnwindSafe(|| {
                conversion.review(request)
            })) {
                Ok(r) => r,
                Err(_) => {
                    let e = ReviewError::new(500, "the conversion function panicked", &api_version);
                    return (false, 500, review::conversion_error(&e));
                }
            };
            let (ok, code) = review::conversion_outcome(&response);
            (ok, code, review::encode_conversion(response, &api_version))
        }
    }
}
