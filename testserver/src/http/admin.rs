//! The admin endpoint (`/__admin/...`): fault injection, counters, the
//! request log and adding Nodes over HTTP, for tests that drive the server
//! from another process (the binary, the Python client).

use super::body::{full, ResponseBody};
use super::request::Verb;
use super::State;
use crate::faults::{Failure, FaultScope};
use crate::status::StatusError;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

fn num(q: &HashMap<String, String>, name: &str) -> Result<Option<u64>, StatusError> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            StatusError::bad_request(format!(
                "query parameter {name:?} must be a non-negative integer, got {v:?}"
            ))
        }),
    }
}

fn verb(s: &str) -> Result<Verb, StatusError> {
    Ok(match s {
        "get" => Verb::Get,
        "list" => Verb::List,
        "watch" => Verb::Watch,
        "create" => Verb::Create,
        "update" => Verb::Update,
        "patch" => Verb::Patch,
        "delete" => Verb::Delete,
        "deletecollection" => Verb::DeleteCollection,
        other => return Err(StatusError::bad_request(format!("unknown verb {other:?}"))),
    })
}

fn ok(v: Value) -> hyper::Response<ResponseBody> {
    let body = serde_json::to_vec(&v).unwrap_or_default();
    let mut r = hyper::Response::new(full(body));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn counters(state: &State) -> Value {
    let c = state.metrics.counters();
    let by: Vec<Value> = c
        .by_verb_resource
        .iter()
        .map(|((v, r), n)| json!({"verb": v, "resource": r, "count": n}))
        .collect();
    let status: serde_json::Map<String, Value> = c
        .by_status
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let flow_control = state.faults.flow_control();
    json!({"total": c.total, "byVerbResource": by, "byStatus": status, "activeWatches": c.active_watches, "watchesOpened": c.watches_opened,
        "inFlight": flow_control.in_flight(), "rejectedInFlight": flow_control.rejected(), "retryAfterViolations": c.retry_after_violations})
}

fn requests(state: &State) -> Value {
    let list: Vec<Value> = state
        .metrics
        .requests()
        .into_iter()
        .map(|r| {
            json!({"method": r.method, "path": r.path, "query": r.query, "verb": r.verb.map(Verb::as_str),
                "resource": r.resource, "subresource": r.subresource, "namespace": r.namespace, "name": r.name,
                "status": r.status, "userAgent": r.user_agent, "durationMs": r.duration.as_secs_f64() * 1000.0})
        })
        .collect();
    json!({"requests": list})
}

/// The failure a `fail` or `fail-for` call asks for (`code`, and
/// `retryAfter` for a 429).
fn failure(q: &HashMap<String, String>) -> Result<Failure, StatusError> {
    Ok(match num(q, "code")?.unwrap_or(429) {
        429 => Failure::TooManyRequests {
            retry_after_secs: num(q, "retryAfter")?.unwrap_or(1),
        },
        500 => Failure::InternalError,
        503 => Failure::ServiceUnavailable,
        other => {
            return Err(StatusError::bad_request(format!(
                "code must be 429, 500 or 503, got {other}"
            )))
        }
    })
}

/// The requests a failure applies to (`verb`, `resource`).
fn scope(q: &HashMap<String, String>) -> Result<FaultScope, StatusError> {
    Ok(FaultScope {
        verb: q.get("verb").map(|v| verb(v)).transpose()?,
        resource: q.get("resource").cloned(),
    })
}

/// Serves `/__admin/<path>`.
pub(crate) fn handle(
    state: &State,
    method: &http::Method,
    path: &str,
    q: &HashMap<String, String>,
) -> Result<hyper::Response<ResponseBody>, StatusError> {
    if method != http::Method::POST {
        return read(state, method, path).map(ok);
    }
    match path {
        "nodes" => add_node(state, q),
        "deployment-simulator" => deployment_simulator(state, q),
        "close-watches"
        | "close-watches-after"
        | "corrupt-watch-frames"
        | "unexpected-kind-watch-frames"
        | "pause-watches"
        | "resume-watches" => watch_fault(state, path, q),
        _ => request_fault(state, path, q),
    }
    .map(ok)
}

/// What a GET (or DELETE of the request log) reads: counters, the request
/// log, the store's resourceVersion.
fn read(state: &State, method: &http::Method, path: &str) -> Result<Value, StatusError> {
    match path {
        "counters" => Ok(counters(state)),
        "requests" if method == http::Method::DELETE => {
            state.metrics.clear();
            Ok(json!({"cleared": true}))
        }
        "requests" => Ok(requests(state)),
        "state" => Ok(json!({"resourceVersion": state.core.store.current_rv().to_string()})),
        _ => Err(StatusError::route_not_found()),
    }
}

/// Faults that act on watches: closing, corrupting, pausing them.
fn watch_fault(
    state: &State,
    path: &str,
    q: &HashMap<String, String>,
) -> Result<Value, StatusError> {
    let f = &state.faults;
    match path {
        "close-watches" => {
            f.close_all_watches();
            Ok(json!({"closed": true}))
        }
        "close-watches-after" => {
            let n = num(q, "events")?.filter(|n| *n > 0);
            f.close_watches_after(n);
            Ok(json!({"events": n}))
        }
        "corrupt-watch-frames" => {
            let n = num(q, "count")?.unwrap_or(1);
            f.corrupt_next_watch_frames(n);
            Ok(json!({"count": n}))
        }
        "unexpected-kind-watch-frames" => {
            let n = num(q, "count")?.unwrap_or(1);
            f.send_unexpected_kind_frames(n);
            Ok(json!({"count": n}))
        }
        "pause-watches" => {
            f.pause_watches();
            Ok(json!({"paused": true}))
        }
        "resume-watches" => {
            f.resume_watches();
            Ok(json!({"paused": false}))
        }
        _ => Err(StatusError::route_not_found()),
    }
}

/// Faults that act on requests and the store: expiry, compaction, failing
/// answers, the in-flight limit, latency, and resetting them all.
fn request_fault(
    state: &State,
    path: &str,
    q: &HashMap<String, String>,
) -> Result<Value, StatusError> {
    let f = &state.faults;
    match path {
        "expire" => {
            let lists = num(q, "lists")?.unwrap_or(0);
            let watches = num(q, "watches")?.unwrap_or(0);
            f.expire_next_lists(lists);
            f.expire_next_watches(watches);
            Ok(json!({"lists": lists, "watches": watches}))
        }
        "compact" => {
            f.compact();
            Ok(json!({"compactedAt": state.core.store.current_rv().to_string()}))
        }
        "fail" => {
            let count = num(q, "count")?.unwrap_or(1);
            let failure = failure(q)?;
            f.fail_next_matching(count, failure, scope(q)?);
            Ok(json!({"count": count}))
        }
        "fail-for" => {
            let ms = num(q, "ms")?.unwrap_or(1000);
            let failure = failure(q)?;
            if q.get("watchList").is_some_and(|w| w == "true") {
                f.fail_watch_lists_for(Duration::from_millis(ms), failure);
            } else {
                f.fail_for(Duration::from_millis(ms), failure, scope(q)?);
            }
            Ok(json!({"ms": ms}))
        }
        "max-in-flight" => {
            let limit = num(q, "limit")?.filter(|l| *l > 0);
            f.limit_in_flight(limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)));
            Ok(json!({"limit": limit}))
        }
        "latency" => {
            let ms = num(q, "ms")?.unwrap_or(0);
            f.set_latency(Duration::from_millis(ms));
            Ok(json!({"ms": ms}))
        }
        "reset" => {
            f.reset();
            Ok(json!({"reset": true}))
        }
        _ => Err(StatusError::route_not_found()),
    }
}

/// Adds a Node named by `name`.
fn add_node(state: &State, q: &HashMap<String, String>) -> Result<Value, StatusError> {
    let name = q
        .get("name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| StatusError::bad_request("query parameter \"name\" is required"))?;
    let node = crate::controllers::nodes::add_node(&state.core, name)?;
    Ok(node.value().clone())
}

/// Turns the Deployment simulator on (with `delayMs`) or off
/// (`enabled=false`).
fn deployment_simulator(state: &State, q: &HashMap<String, String>) -> Result<Value, StatusError> {
    let delay = if q.get("enabled").is_some_and(|e| e == "false") {
        None
    } else {
        Some(Duration::from_millis(num(q, "delayMs")?.unwrap_or(0)))
    };
    *state.core.deployment_sim.write() = delay;
    Ok(json!({"enabled": delay.is_some(), "delayMs": delay.map(|d| d.as_millis() as u64)}))
}
