//! Liveness, readiness and metrics over HTTP: [`Health`] holds the
//! readiness checks (informer caches, handler registrations, anything a
//! closure can tell) and serves, on one listener:
//!
//! - `/healthz`: 200 while the process serves at all (HL1);
//! - `/readyz`: 503 until every registered check passes, then 200; 503
//!   again once [`Health::shutting_down`] was called (HL2, HL3); the body
//!   names each check as `[+]name ok` or `[-]name not ready`;
//! - `/metrics`: the Prometheus text of the registry given to
//!   [`Health::with_registry`] (HL4), 404 without one.
//!
//! ```no_run
//! # async fn demo(informer: std::sync::Arc<dyn kcontrol_informer::HasSynced>) -> std::io::Result<()> {
//! use kcontrol_controller::health::Health;
//! use tokio_util::sync::CancellationToken;
//!
//! let health = Health::new();
//! health.add_synced("foos", informer);
//! let shutdown = CancellationToken::new();
//! let addr = health.serve("127.0.0.1:8080".parse().unwrap(), shutdown.clone()).await?;
//! // ... on SIGTERM:
//! health.shutting_down();
//! # Ok(()) }
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kcontrol_informer::HasSynced;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::SharedRegistry;

/// One readiness check.
struct Check {
    name: String,
    ready: Box<dyn Fn() -> bool + Send + Sync>,
}

struct Inner {
    checks: Mutex<Vec<Check>>,
    shutting_down: AtomicBool,
    registry: Option<SharedRegistry>,
}

/// The health state of a controller and the server of `/healthz`,
/// `/readyz` and `/metrics` (cheap to clone; clones share the state).
#[derive(Clone)]
pub struct Health {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("checks", &self.inner.checks.lock().len())
            .field("shutting_down", &self.is_shutting_down())
            .finish_non_exhaustive()
    }
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

/// The readiness of every check, as `/readyz` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// Each check's name and whether it passes, in registration order.
    pub checks: Vec<(String, bool)>,
    /// Whether shutdown has started.
    pub shutting_down: bool,
}

impl Readiness {
    /// Ready: every check passes and shutdown has not started.
    pub fn is_ready(&self) -> bool {
        !self.shutting_down && self.checks.iter().all(|(_, ok)| *ok)
    }

    fn body(&self) -> String {
        let mut body = String::new();
        for (name, ok) in &self.checks {
            if *ok {
                body.push_str(&format!("[+]{name} ok\n"));
            } else {
                body.push_str(&format!("[-]{name} not ready\n"));
            }
        }
        if self.shutting_down {
            body.push_str("[-]shutdown in progress\n");
        }
        body.push_str(if self.is_ready() {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        body
    }
}

impl Health {
    /// Health without metrics: `/metrics` answers 404.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// Health that also serves `registry` at `/metrics`.
    pub fn with_registry(registry: SharedRegistry) -> Self {
        Self::build(Some(registry))
    }

    /// The registry served at `/metrics`, if any.
    pub fn registry(&self) -> Option<&SharedRegistry> {
        self.inner.registry.as_ref()
    }

    fn build(registry: Option<SharedRegistry>) -> Self {
        Self {
            inner: Arc::new(Inner {
                checks: Mutex::new(Vec::new()),
                shutting_down: AtomicBool::new(false),
                registry,
            }),
        }
    }

    /// Adds a readiness check: `/readyz` is 503 while `ready` returns false.
    pub fn add_check(
        &self,
        name: impl Into<String>,
        ready: impl Fn() -> bool + Send + Sync + 'static,
    ) {
        self.inner.checks.lock().push(Check {
            name: name.into(),
            ready: Box::new(ready),
        });
    }

    /// Adds an informer or a handler registration (anything that
    /// [`HasSynced`]) as a readiness check.
    pub fn add_synced(&self, name: impl Into<String>, synced: Arc<dyn HasSynced>) {
        self.add_check(name, move || synced.has_synced());
    }

    /// Shutdown has started: `/readyz` answers 503 from now on (a load
    /// balancer or a rollout stops counting on this process).
    pub fn shutting_down(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Whether [`Health::shutting_down`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::SeqCst)
    }

    /// Evaluates every check now.
    pub fn readiness(&self) -> Readiness {
        let checks = self
            .inner
            .checks
            .lock()
            .iter()
            .map(|c| (c.name.clone(), (c.ready)()))
            .collect();
        Readiness {
            checks,
            shutting_down: self.is_shutting_down(),
        }
    }

    /// Whether `/readyz` would answer 200 now.
    pub fn is_ready(&self) -> bool {
        self.readiness().is_ready()
    }

    /// The answer to one request.
    fn respond(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if method != Method::GET && method != Method::HEAD {
            return reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                "method not allowed\n".to_owned(),
            );
        }
        match path {
            "/healthz" | "/livez" => {
                reply(StatusCode::OK, "text/plain; charset=utf-8", "ok\n".into())
            }
            "/readyz" => {
                let readiness = self.readiness();
                let status = if readiness.is_ready() {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                reply(status, "text/plain; charset=utf-8", readiness.body())
            }
            "/metrics" => match &self.inner.registry {
                Some(registry) => match registry.encode() {
                    Ok(text) => reply(
                        StatusCode::OK,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        text,
                    ),
                    Err(e) => reply(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "text/plain; charset=utf-8",
                        format!("encoding metrics: {e}\n"),
                    ),
                },
                None => not_found(),
            },
            _ => not_found(),
        }
    }

    /// Binds `addr` and serves `/healthz`, `/readyz` and `/metrics` until
    /// `shutdown` is cancelled. Returns the bound address (the port is
    /// chosen when `addr`'s is 0). Must be called inside a tokio runtime.
    pub async fn serve(
        &self,
        addr: SocketAddr,
        shutdown: CancellationToken,
    ) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        tracing::info!(%bound, "serving /healthz, /readyz and /metrics");
        let health = self.clone();
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    () = shutdown.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            tracing::warn!(error = %e, "health listener");
                            continue;
                        }
                    },
                };
                let health = health.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let response = health.respond(req.method(), req.uri().path());
                        async move { Ok::<_, Infallible>(response) }
                    });
                    if let Err(e) = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(error = %e, "health connection");
                    }
                });
            }
        });
        Ok(bound)
    }
}

fn not_found() -> Response<Full<Bytes>> {
    reply(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        "not found\n".to_owned(),
    )
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
