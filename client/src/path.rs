//! Request paths of the Kubernetes REST API:
//! `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]` for the
//! core group and `/apis/{group}/{version}/...` for the others, with each
//! segment checked and percent-encoded.
//!
//! ```
//! use kcontrol_client::path::ResourcePath;
//!
//! let path = ResourcePath::new("apps", "v1", "deployments")
//!     .namespace("default")
//!     .name("web")
//!     .subresource("status")
//!     .build()
//!     .unwrap();
//! assert_eq!(path, "/apis/apps/v1/namespaces/default/deployments/web/status");
//! assert_eq!(ResourcePath::new("", "v1", "namespaces").build().unwrap(), "/api/v1/namespaces");
//! ```

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

use crate::error::Error;
use kcontrol_indexer::ApiResource;

/// Characters escaped in a path segment (RFC 3986 `pchar` complement).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'\\')
    .add(b'^')
    .add(b'|')
    .add(b'[')
    .add(b']');

/// A resource path under construction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourcePath<'a> {
    group: &'a str,
    version: &'a str,
    plural: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

impl<'a> ResourcePath<'a> {
    /// The collection path of a resource (`""` is the core group).
    pub fn new(group: &'a str, version: &'a str, plural: &'a str) -> Self {
        Self {
            group,
            version,
            plural,
            ..Self::default()
        }
    }

    /// The collection path of an [`ApiResource`].
    pub fn of(resource: &'a ApiResource) -> Self {
        Self::new(&resource.group, &resource.version, &resource.plural)
    }

    /// Within a namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: &'a str) -> Self {
        self.namespace = Some(namespace);
        self
    }

    /// Within a namespace if one is given.
    #[must_use]
    pub fn maybe_namespace(mut self, namespace: Option<&'a str>) -> Self {
        self.namespace = namespace;
        self
    }

    /// One object.
    #[must_use]
    pub fn name(mut self, name: &'a str) -> Self {
        self.name = Some(name);
        self
    }

    /// A subresource (`status`, `scale`...) of the named object.
    #[must_use]
    pub fn subresource(mut self, subresource: &'a str) -> Self {
        self.subresource = Some(subresource);
        self
    }

    /// The path; fails on empty segments, `.`/`..`, a `/` in a segment, or a
    /// subresource without a name.
    pub fn build(&self) -> Result<String, Error> {
        let mut path = String::with_capacity(64);
        if self.group.is_empty() {
            path.push_str("/api");
        } else {
            push_segment(&mut path, "group", self.group)?;
            path.insert_str(0, "/apis");
        }
        push_segment(&mut path, "version", self.version)?;
        if let Some(ns) = self.namespace {
            path.push_str("/namespaces");
            push_segment(&mut path, "namespace", ns)?;
        }
        push_segment(&mut path, "resource", self.plural)?;
        if let Some(name) = self.name {
            push_segment(&mut path, "name", name)?;
        }
        if let Some(sub) = self.subresource {
            if self.name.is_none() {
                return Err(Error::InvalidRequest(format!(
                    "subresource {sub:?} needs an object name"
                )));
            }
            push_segment(&mut path, "subresource", sub)?;
        }
        Ok(path)
    }
}

fn push_segment(path: &mut String, what: &str, segment: &str) -> Result<(), Error> {
    if segment.is_empty() || segment == "." || segment == ".." || segment.contains('/') {
        return Err(Error::InvalidRequest(format!(
            "invalid {what} {segment:?} in a resource path"
        )));
    }
    path.push('/');
    path.extend(utf8_percent_encode(segment, SEGMENT));
    Ok(())
}

/// A query string under construction (`application/x-www-form-urlencoded`).
pub(crate) struct Query {
    inner: form_urlencoded::Serializer<'static, String>,
    empty: bool,
}

impl Query {
    pub(crate) fn new() -> Self {
        Self {
            inner: form_urlencoded::Serializer::new(String::new()),
            empty: true,
        }
    }

    /// Adds `key=value`.
    pub(crate) fn push(&mut self, key: &str, value: &str) {
        self.inner.append_pair(key, value);
        self.empty = false;
    }

    /// Adds `key=value` when `value` is set and not empty.
    pub(crate) fn push_opt(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            self.push(key, v);
        }
    }

    /// `path?query`, or `path` when nothing was added.
    pub(crate) fn with_path(mut self, path: &str) -> String {
        if self.empty {
            path.to_owned()
        } else {
            format!("{path}?{}", self.inner.finish())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_group_paths() {
        let cm = ApiResource::new("", "v1", "ConfigMap", "configmaps", true);
        assert_eq!(ResourcePath::of(&cm).build().unwrap(), "/api/v1/configmaps");
        assert_eq!(
            ResourcePath::of(&cm)
                .namespace("kube-system")
                .name("x")
                .build()
                .unwrap(),
            "/api/v1/namespaces/kube-system/configmaps/x"
        );
        let foos = ApiResource::new("samplecontroller.k8s.io", "v1alpha1", "Foo", "foos", true);
        assert_eq!(
            ResourcePath::of(&foos)
                .namespace("d")
                .name("f")
                .subresource("status")
                .build()
                .unwrap(),
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/d/foos/f/status"
        );
    }

    #[test]
    fn rejects_bad_segments_and_escapes_others() {
        let p = ResourcePath::new("", "v1", "configmaps");
        assert!(p.clone().name("a/b").build().is_err());
        assert!(p.clone().name("..").build().is_err());
        assert!(p.clone().namespace("").build().is_err());
        assert!(p.clone().subresource("status").build().is_err());
        assert_eq!(
            p.name("a b?").build().unwrap(),
            "/api/v1/configmaps/a%20b%3F"
        );
    }

    #[test]
    fn query_encodes_selectors() {
        let mut q = Query::new();
        q.push("labelSelector", "app in (a,b),!x");
        q.push_opt("fieldSelector", Some(""));
        q.push_opt("continue", None);
        assert_eq!(
            q.with_path("/p"),
            "/p?labelSelector=app+in+%28a%2Cb%29%2C%21x"
        );
        assert_eq!(Query::new().with_path("/p"), "/p");
    }
}
