//! Request routing as kube-apiserver's RequestInfo resolver does it: the
//! path names an API group/version, optional namespace, resource, name and
//! subresource; the method and `watch` parameter give the verb. Also query
//! parameter decoding.

use std::collections::HashMap;

/// The Kubernetes verb of a resource request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// kube's lower-case verb name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request for a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApiRequest {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub verb: Verb,
}

/// What a path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// A resource request.
    Resource(ApiRequest),
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    ResourceList { group: String, version: String },
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiV3Root,
    /// `/openapi/v3/<api/v1 | apis/g/v>`.
    OpenApiV3 { group: String, version: String },
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez` (and their checks).
    Health,
    /// `/__admin/...`.
    Admin(String),
    /// Nothing is served here.
    NotFound,
}

/// Decodes `%XX` escapes and `+` (a space in query strings).
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes.get(i) {
            Some(b'%') => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            Some(b'+') => out.push(b' '),
            Some(&b) => out.push(b),
            None => break,
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query parameters (the first value of each name wins, as Go's `Get`).
pub(crate) fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.entry(percent_decode(k))
            .or_insert_with(|| percent_decode(v));
    }
    out
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it.
pub(crate) fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Whether a boolean query parameter is set to true.
pub(crate) fn is_true(v: Option<&String>) -> bool {
    v.and_then(|v| parse_bool(v)) == Some(true)
}

/// Resolves a method and path.
pub(crate) fn route(method: &http::Method, path: &str, query: &HashMap<String, String>) -> Route {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        ["api"] => Route::CoreVersions,
        ["api", v] => Route::ResourceList {
            group: String::new(),
            version: (*v).to_owned(),
        },
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group((*g).to_owned()),
        ["apis", g, v] => Route::ResourceList {
            group: (*g).to_owned(),
            version: (*v).to_owned(),
        },
        ["api", v, rest @ ..] => resource(method, "", v, rest, query),
        ["apis", g, v, rest @ ..] => resource(method, g, v, rest, query),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3Root,
        ["openapi", "v3", "api", v] => Route::OpenApiV3 {
            group: String::new(),
            version: (*v).to_owned(),
        },
        ["openapi", "v3", "apis", g, v] => Route::OpenApiV3 {
            group: (*g).to_owned(),
            version: (*v).to_owned(),
        },
        ["version"] => Route::Version,
        ["healthz" | "readyz" | "livez", ..] => Route::Health,
        ["__admin", rest @ ..] => Route::Admin(rest.join("/")),
        _ => Route::NotFound,
    }
}

fn resource(
    method: &http::Method,
    group: &str,
    version: &str,
    rest: &[&str],
    query: &HashMap<String, String>,
) -> Route {
    let (legacy_watch, mut parts) = match rest {
        ["watch", tail @ ..] => (true, tail.to_vec()),
        _ => (false, rest.to_vec()),
    };
    let mut namespace = None;
    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        namespace = parts.get(1).map(|s| percent_decode(s));
        if parts.len() > 2 && !matches!(parts.get(2), Some(&"status") | Some(&"finalize")) {
            parts = parts.split_off(2);
        } else {
            // the namespace object itself
            namespace = None;
            let name = parts.get(1).copied().unwrap_or("");
            let mut v = vec!["namespaces", name];
            v.extend(parts.iter().skip(2));
            parts = v;
        }
    }
    let Some(resource) = parts.first() else {
        return Route::NotFound;
    };
    if parts.len() > 3 {
        return Route::NotFound;
    }
    let name = parts.get(1).map(|s| percent_decode(s));
    let subresource = parts.get(2).map(|s| (*s).to_owned());
    let verb = match (method.as_str(), name.is_some()) {
        ("GET" | "HEAD", _) if legacy_watch || (name.is_none() && is_true(query.get("watch"))) => {
            Verb::Watch
        }
        ("GET" | "HEAD", true) => Verb::Get,
        ("GET" | "HEAD", false) => Verb::List,
        ("POST", _) => Verb::Create,
        ("PUT", _) => Verb::Update,
        ("PATCH", _) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return Route::NotFound,
    };
    Route::Resource(ApiRequest {
        group: group.to_owned(),
        version: version.to_owned(),
        resource: (*resource).to_owned(),
        namespace,
        name,
        subresource,
        verb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn r(method: Method, path: &str, q: &str) -> Route {
        route(&method, path, &parse_query(Some(q)))
    }

    fn req(
        group: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
        sub: Option<&str>,
        verb: Verb,
    ) -> Route {
        Route::Resource(ApiRequest {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: ns.map(Into::into),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
            verb,
        })
    }

    #[test]
    fn resolves_like_request_info() {
        assert_eq!(
            r(Method::GET, "/api/v1/namespaces/default/configmaps", ""),
            req("", "configmaps", Some("default"), None, None, Verb::List)
        );
        assert_eq!(
            r(Method::GET, "/api/v1/configmaps", "watch=true"),
            req("", "configmaps", None, None, None, Verb::Watch)
        );
        assert_eq!(
            r(Method::GET, "/api/v1/watch/namespaces/x/configmaps", ""),
            req("", "configmaps", Some("x"), None, None, Verb::Watch)
        );
        assert_eq!(
            r(Method::GET, "/api/v1/namespaces/default", ""),
            req("", "namespaces", None, Some("default"), None, Verb::Get)
        );
        assert_eq!(
            r(Method::PUT, "/api/v1/namespaces/default/status", ""),
            req(
                "",
                "namespaces",
                None,
                Some("default"),
                Some("status"),
                Verb::Update
            )
        );
        assert_eq!(
            r(
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d/status",
                ""
            ),
            req(
                "apps",
                "deployments",
                Some("a"),
                Some("d"),
                Some("status"),
                Verb::Patch
            )
        );
        assert_eq!(
            r(Method::DELETE, "/apis/apps/v1/namespaces/a/deployments", ""),
            req(
                "apps",
                "deployments",
                Some("a"),
                None,
                None,
                Verb::DeleteCollection
            )
        );
        assert_eq!(
            r(Method::GET, "/apis/apps/v1", ""),
            Route::ResourceList {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(
            r(Method::GET, "/openapi/v3/apis/apps/v1", ""),
            Route::OpenApiV3 {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(r(Method::GET, "/nope", ""), Route::NotFound);
    }

    #[test]
    fn decodes_queries() {
        let q = parse_query(Some(
            "labelSelector=app%3Dweb%2Ctier+in+(a)&limit=5&limit=6&x",
        ));
        assert_eq!(
            q.get("labelSelector").map(String::as_str),
            Some("app=web,tier in (a)")
        );
        assert_eq!(q.get("limit").map(String::as_str), Some("5"));
        assert_eq!(q.get("x").map(String::as_str), Some(""));
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
