//! [`ClientMetrics`]: hooks a [`Client`](crate::Client) reports each API
//! request to (client-go's `rest_client_requests_total`,
//! `rest_client_request_duration_seconds` and
//! `rest_client_rate_limiter_duration_seconds`), and the Kubernetes verb
//! and resource of a request path, for metrics and tracing spans;
//! [`prometheus`] reports them as Prometheus families.

use std::time::Duration;

pub mod prometheus;

/// Receives a client's requests. Every method has a no-op default. Calls
/// come from the task sending the request: keep them quick.
pub trait ClientMetrics: Send + Sync {
    /// A response (or a transport failure: `code` `None`) came for a
    /// request with this HTTP `method` and Kubernetes `verb` to `host`
    /// (`host:port`) after `elapsed` (until the response head; a watch's
    /// stream is not included).
    fn request(
        &self,
        method: &str,
        verb: &'static str,
        host: &str,
        code: Option<u16>,
        elapsed: Duration,
    ) {
        let _ = (method, verb, host, code, elapsed);
    }

    /// A request with this Kubernetes `verb` to `host` waited `waited`
    /// for the client-side rate limiter.
    fn rate_limited(&self, verb: &'static str, host: &str, waited: Duration) {
        let _ = (verb, host, waited);
    }
}

/// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`,
/// `patch`, `delete`, `deletecollection`; `request` for paths outside the
/// resource API) and resource (`deployments`, `foos/status`; empty when
/// none) of a request.
pub fn verb_and_resource(
    method: &http::Method,
    path: &str,
    query: Option<&str>,
) -> (&'static str, String) {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return ("request", String::new()),
    };
    // namespaces/NS/RESOURCE[/NAME[/SUB]] or RESOURCE[/NAME[/SUB]]
    let rest = match rest {
        ["namespaces", _ns, resource, tail @ ..] => {
            let mut v = vec![*resource];
            v.extend_from_slice(tail);
            v
        }
        other => other.to_vec(),
    };
    let (resource, named) = match rest.as_slice() {
        [] => return ("request", String::new()),
        [resource] => ((*resource).to_owned(), false),
        [resource, _name] => ((*resource).to_owned(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
    };
    let watching =
        query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match *method {
        http::Method::GET if watching => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "request",
    };
    (verb, resource)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn verbs_and_resources_from_paths() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps/x",
                None,
                ("get", "configmaps"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps",
                None,
                ("list", "configmaps"),
            ),
            (
                Method::GET,
                "/api/v1/configmaps",
                Some("watch=true&resourceVersion=1"),
                ("watch", "configmaps"),
            ),
            (
                Method::POST,
                "/apis/apps/v1/namespaces/a/deployments",
                None,
                ("create", "deployments"),
            ),
            (
                Method::PUT,
                "/apis/s.k8s.io/v1/namespaces/a/foos/f/status",
                None,
                ("update", "foos/status"),
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/a/events/e",
                None,
                ("patch", "events"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/pods",
                None,
                ("deletecollection", "pods"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/n",
                None,
                ("delete", "namespaces"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                None,
                ("list", "namespaces"),
            ),
            (Method::GET, "/version", None, ("request", "")),
            (Method::GET, "/apis/apps/v1", None, ("request", "")),
        ];
        for (method, path, query, (verb, resource)) in cases {
            assert_eq!(
                verb_and_resource(&method, path, query),
                (verb, resource.to_owned()),
                "{method} {path}"
            );
        }
    }
}
