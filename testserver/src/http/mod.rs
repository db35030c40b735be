//! The HTTP(S) front: accepts connections on loopback (HTTP/1.1 and
//! HTTP/2, TLS with ALPN when configured), authenticates, applies injected
//! faults, routes, and records every request.

pub(crate) mod accept;
pub(crate) mod admin;
pub(crate) mod body;
pub(crate) mod discovery;
pub(crate) mod handlers;
pub(crate) mod list;
pub(crate) mod negotiate;
pub(crate) mod openapi;
pub(crate) mod openapi_schemas;
mod printers;
pub(crate) mod render;
pub mod request;
pub(crate) mod table;
pub(crate) mod watch;

pub(crate) use accept::serve;

use crate::faults::{Failure, Faults, ScopedResource};
use crate::flow_control;
use crate::metrics::{Metrics, RequestRecord};
use crate::rest::Core;
use crate::status::StatusError;
use body::{full, ResponseBody};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use request::Route;
use serde_json::json;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch as tokio_watch;

/// Settings of the HTTP front.
#[derive(Clone, Debug)]
pub(crate) struct HttpConfig {
    pub bookmark_interval: Duration,
    pub default_watch_timeout: Duration,
    pub too_large_rv_wait: Duration,
    pub token: Option<String>,
    pub client_cert_auth: bool,
    pub server_address: String,
}

/// Shared by every connection.
pub(crate) struct State {
    pub core: Arc<Core>,
    pub admission: Arc<crate::admission::Admission>,
    pub faults: Faults,
    pub metrics: Arc<Metrics>,
    pub config: HttpConfig,
    pub shutdown: tokio_watch::Receiver<bool>,
}

type Resp = hyper::Response<ResponseBody>;

/// A Status error as a response, in protobuf when `protobuf` (the
/// request negotiated protobuf for a built-in kind).
fn status_response(e: &StatusError, protobuf: bool) -> Resp {
    let v = e.to_json();
    let (body, ct) = match protobuf.then(|| crate::proto::encode_object(&v)) {
        Some(Ok(b)) => (b, crate::proto::MEDIA_TYPE),
        _ => (
            serde_json::to_vec(&v).unwrap_or_default(),
            "application/json",
        ),
    };
    let mut r = hyper::Response::new(full(body));
    *r.status_mut() =
        http::StatusCode::from_u16(e.code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(ct),
    );
    if let Some(s) = e.retry_after {
        if let Ok(v) = http::HeaderValue::from_str(&s.to_string()) {
            r.headers_mut().insert(http::header::RETRY_AFTER, v);
        }
    }
    r
}

fn json_response(v: &serde_json::Value) -> Resp {
    let mut r = hyper::Response::new(full(serde_json::to_vec(v).unwrap_or_default()));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn failure_status(f: Failure) -> StatusError {
    match f {
        Failure::TooManyRequests { retry_after_secs } => {
            StatusError::too_many_requests(retry_after_secs)
        }
        Failure::InternalError => StatusError::internal("injected fault"),
        Failure::ServiceUnavailable => {
            StatusError::service_unavailable("the server is currently unable to handle the request")
        }
    }
}

fn authenticated(state: &State, parts: &http::request::Parts, cert_ok: bool) -> bool {
    let token = state.config.token.as_deref();
    if token.is_none() && !state.config.client_cert_auth {
        return true;
    }
    if state.config.client_cert_auth && cert_ok {
        return true;
    }
    let given = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    matches!((token, given), (Some(t), Some(g)) if t == g)
}

fn health(path: &str) -> Resp {
    let text = if path.contains("verbose") || path.split('/').count() > 2 {
        "[+]ping ok\n[+]etcd ok\nhealthz check passed\n"
    } else {
        "ok"
    };
    let mut r = hyper::Response::new(full(text.to_owned()));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn version() -> serde_json::Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-kcontrol-testserver",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64"
    })
}

/// Why the gate in front of the API turned a request away.
enum Refused {
    /// Every seat of the admission limit was taken (429, as APF).
    NoSeat,
    /// An injected fault or a restart's unavailability answers it.
    Failed(StatusError),
}

/// Whether a route is an API request (admission, latency and faults apply).
fn is_api(route: &Route) -> bool {
    matches!(
        route,
        Route::Resource(_)
            | Route::CoreVersions
            | Route::Groups
            | Route::Group(_)
            | Route::ResourceList { .. }
    )
}

/// The gate of an API request, in kube-apiserver's order: a seat of the
/// admission limit (priority and fairness), then the server's latency,
/// then whatever a fault makes it answer. The seat is the request's until
/// its answer is out.
async fn gate(
    state: &State,
    route: &Route,
    q: &HashMap<String, String>,
) -> Result<flow_control::Seat, Refused> {
    let seat = state
        .faults
        .flow_control()
        .admit()
        .map_err(|_| Refused::NoSeat)?;
    let latency = state.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let (verb, resource) = match route {
        Route::Resource(r) => (
            Some(r.verb),
            Some(ScopedResource {
                plural: &r.resource,
                group: &r.group,
            }),
        ),
        _ => (None, None),
    };
    if state.faults.unavailable() {
        return Err(Refused::Failed(failure_status(Failure::ServiceUnavailable)));
    }
    let watch_list = verb == Some(request::Verb::Watch)
        && q.get("sendInitialEvents")
            .and_then(|v| request::parse_bool(v))
            == Some(true);
    match state.faults.take_failure(verb, resource, watch_list) {
        Some(f) => Err(Refused::Failed(failure_status(f))),
        None => Ok(seat),
    }
}

async fn route_request(
    state: &Arc<State>,
    route: &Route,
    parts: &http::request::Parts,
    body: Incoming,
    q: &HashMap<String, String>,
    cert_ok: bool,
) -> Result<Resp, StatusError> {
    let public = matches!(route, Route::Health | Route::Version);
    if !public && !authenticated(state, parts, cert_ok) {
        return Err(StatusError::unauthorized());
    }
    if let Route::Admin(path) = route {
        return admin::handle(state, &parts.method, path, q);
    }
    if !is_api(route) {
        return dispatch(state, route, parts, body, q, None).await;
    }
    let seat = match gate(state, route, q).await {
        Ok(seat) => seat,
        Err(Refused::NoSeat) => return Ok(flow_control::rejection()),
        Err(Refused::Failed(e)) => return Err(e),
    };
    // a watch hands its seat back once initialized; anything else once
    // its answer's body is out
    if matches!(route, Route::Resource(r) if r.verb == request::Verb::Watch) {
        return dispatch(state, route, parts, body, q, Some(seat)).await;
    }
    let resp = dispatch(state, route, parts, body, q, None).await?;
    Ok(resp.map(|b| flow_control::SeatedBody::new(b, seat).boxed()))
}

/// Serves a request that passed authentication and the gate; `seat` is a
/// watch's admission seat.
async fn dispatch(
    state: &Arc<State>,
    route: &Route,
    parts: &http::request::Parts,
    body: Incoming,
    q: &HashMap<String, String>,
    seat: Option<flow_control::Seat>,
) -> Result<Resp, StatusError> {
    let registry = &state.core.registry;
    if matches!(route, Route::CoreVersions | Route::Groups) {
        if let Some(r) = aggregated_discovery(state, route, parts) {
            return Ok(r);
        }
    }
    match route {
        Route::Resource(r) => handlers::resource(state, r, parts, body, q, seat).await,
        Route::CoreVersions => Ok(json_response(&discovery::core_versions(
            &state.config.server_address,
        ))),
        Route::Groups => Ok(json_response(&discovery::groups(registry))),
        Route::Group(g) => discovery::group(registry, g)
            .map(|v| json_response(&v))
            .ok_or_else(StatusError::route_not_found),
        Route::ResourceList { group, version } => {
            discovery::resource_list(registry, group, version)
                .map(|v| json_response(&v))
                .ok_or_else(StatusError::route_not_found)
        }
        Route::OpenApiV2 => openapi_v2(state, parts),
        Route::OpenApiV3Root => Ok(json_response(&openapi::v3_root(registry))),
        Route::OpenApiV3 { group, version } => openapi::v3_doc(registry, group, version)
            .map(|v| json_response(&v))
            .ok_or_else(StatusError::route_not_found),
        Route::Version => Ok(json_response(&version())),
        Route::Health => Ok(health(parts.uri.path())),
        Route::Admin(_) | Route::NotFound => Err(StatusError::route_not_found()),
    }
}

/// `/api` or `/apis` as aggregated discovery, when the client asks for it.
fn aggregated_discovery(
    state: &State,
    route: &Route,
    parts: &http::request::Parts,
) -> Option<Resp> {
    let accept = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let version = discovery::aggregated_version(accept)?;
    let doc = discovery::aggregated(
        &state.core.registry,
        matches!(route, Route::CoreVersions),
        version,
    );
    let mut r = json_response(&doc);
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    if let Ok(v) = http::HeaderValue::from_str(&ct) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    Some(r)
}

/// `/openapi/v2` in JSON (406 for an `Accept` without it).
fn openapi_v2(state: &State, parts: &http::request::Parts) -> Result<Resp, StatusError> {
    let accept = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !accept.is_empty() && !accept.contains("json") && !accept.contains("*/*") {
        return Err(StatusError::not_acceptable());
    }
    Ok(json_response(&openapi::v2_doc(&state.core.registry)))
}

/// Whether a request's errors are answered in protobuf: a built-in kind's
/// resource whose `Accept` negotiates protobuf, as kube-apiserver encodes
/// its Status errors in the negotiated encoding.
fn wants_protobuf(state: &State, route: &Route, parts: &http::request::Parts) -> bool {
    let Route::Resource(r) = route else {
        return false;
    };
    let builtin = if r.subresource.as_deref() == Some("scale") {
        true
    } else {
        state
            .core
            .registry
            .get(&r.group, &r.version, &r.resource)
            .is_some_and(|i| i.protobuf())
    };
    let accept = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    builtin
        && matches!(
            negotiate::output(accept, true),
            Ok(negotiate::Output::Protobuf { .. })
        )
}

/// A header's text, empty when absent or not text.
fn header_text(headers: &http::HeaderMap, name: http::header::HeaderName) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// Serves one request and records it.
async fn handle(state: Arc<State>, req: hyper::Request<Incoming>, cert_ok: bool) -> Resp {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let query_str = parts.uri.query().unwrap_or("").to_owned();
    let q = request::parse_query(Some(&query_str));
    let route = request::route(&parts.method, parts.uri.path(), &q);
    let client = parts
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let tracked = !matches!(route, Route::Admin(_));
    if tracked {
        state.metrics.retry_after.arrived(&client, started);
    }
    let mut resp = match route_request(&state, &route, &parts, body, &q, cert_ok).await {
        Ok(r) => r,
        Err(e) => status_response(&e, wants_protobuf(&state, &route, &parts)),
    };
    if let Some(wait) = crate::retry_after::header_secs(resp.headers()).filter(|_| tracked) {
        state
            .metrics
            .retry_after
            .asked(&client, Instant::now(), wait);
    }
    let headers = resp.headers_mut();
    headers.insert(
        "Audit-Id",
        http::HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
            .unwrap_or(http::HeaderValue::from_static("")),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
    let (verb, resource, subresource, namespace, name) = match &route {
        Route::Resource(r) => (
            Some(r.verb),
            Some(if r.group.is_empty() {
                r.resource.clone()
            } else {
                format!("{}.{}", r.resource, r.group)
            }),
            r.subresource.clone(),
            r.namespace.clone(),
            r.name.clone(),
        ),
        _ => (None, None, None, None, None),
    };
    state.metrics.record(RequestRecord {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: query_str,
        verb,
        resource,
        subresource,
        namespace,
        name,
        status: resp.status().as_u16(),
        user_agent: client,
        accept: header_text(&parts.headers, http::header::ACCEPT),
        content_type: header_text(resp.headers(), http::header::CONTENT_TYPE),
        duration: started.elapsed(),
    });
    resp
}

pub(crate) async fn serve_connection<I>(io: I, state: Arc<State>, cert_ok: bool)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(handle(state, req, cert_ok).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if let Err(e) = builder.serve_connection(TokioIo::new(io), svc).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
