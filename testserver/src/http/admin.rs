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
    let f = &state.faults;
    let post = method == http::Method::POST;
    match (path, post) {
        ("counters", false) => Ok(ok(counters(state))),
        ("requests", false) if method == http::Method::DELETE => {
            state.metrics.clear();
            Ok(ok(json!({"cleared": true})))
        }
        ("requests", false) => Ok(ok(requests(state))),
        ("state", false) => Ok(ok(
            json!({"resourceVersion": state.core.store.current_rv().to_string()}),
        )),
        ("close-watches", true) => {
            f.close_all_watches();
            Ok(ok(json!({"closed": true})))
        }
        ("close-watches-after", true) => {
            let n = num(q, "events")?.filter(|n| *n > 0);
            f.close_watches_after(n);
            Ok(ok(json!({"events": n})))
        }
        ("expire", true) => {
            let lists = num(q, "lists")?.unwrap_or(0);
            let watches = num(q, "watches")?.unwrap_or(0);
            f.expire_next_lists(lists);
            f.expire_next_watches(watches);
            Ok(ok(json!({"lists": lists, "watches": watches})))
        }
        ("compact", true) => {
            f.compact();
            Ok(ok(
                json!({"compactedAt": state.core.store.current_rv().to_string()}),
            ))
        }
        ("fail", true) => {
            let count = num(q, "count")?.unwrap_or(1);
            let failure = failure(q)?;
            f.fail_next_matching(count, failure, scope(q)?);
            Ok(ok(json!({"count": count})))
        }
        ("fail-for", true) => {
            let ms = num(q, "ms")?.unwrap_or(1000);
            let failure = failure(q)?;
            if q.get("watchList").is_some_and(|w| w == "true") {
                f.fail_watch_lists_for(Duration::from_millis(ms), failure);
            } else {
                f.fail_for(Duration::from_millis(ms), failure, scope(q)?);
            }
            Ok(ok(json!({"ms": ms})))
        }
        ("max-in-flight", true) => {
            let limit = num(q, "limit")?.filter(|l| *l > 0);
            f.limit_in_flight(limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)));
            Ok(ok(json!({"limit": limit})))
        }
        ("latency", true) => {
            let ms = num(q, "ms")?.unwrap_or(0);
            f.set_latency(Duration::from_millis(ms));
            Ok(ok(json!({"ms": ms})))
        }
        ("corrupt-watch-frames", true) => {
            let n = num(q, "count")?.unwrap_or(1);
            f.corrupt_next_watch_frames(n);
            Ok(ok(json!({"count": n})))
        }
        ("unexpected-kind-watch-frames", true) => {
            let n = num(q, "count")?.unwrap_or(1);
            f.send_unexpected_kind_frames(n);
            Ok(ok(json!({"count": n})))
        }
        ("pause-watches", true) => {
            f.pause_watches();
            Ok(ok(json!({"paused": true})))
        }
        ("resume-watches", true) => {
            f.resume_watches();
            Ok(ok(json!({"paused": false})))
        }
        ("reset", true) => {
            f.reset();
            Ok(ok(json!({"reset": true})))
        }
        ("nodes", true) => {
            let name = q
                .get("name")
                .filter(|n| !n.is_empty())
                .ok_or_else(|| StatusError::bad_request("query parameter \"name\" is required"))?;
            let node = crate::controllers::nodes::add_node(&state.core, name)?;
            Ok(ok(node.value().clone()))
        }
        ("deployment-simulator", true) => {
            let delay = if q.get("enabled").is_some_and(|e| e == "false") {
                None
            } else {
                Some(Duration::from_millis(num(q, "delayMs")?.unwrap_or(0)))
            };
            *state.core.deployment_sim.write() = delay;
            Ok(ok(
                json!({"enabled": delay.is_some(), "delayMs": delay.map(|d| d.as_millis() as u64)}),
            ))
        }
        _ => Err(StatusError::route_not_found()),
    }
}
