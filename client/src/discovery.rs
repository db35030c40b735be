//! API discovery: the core versions (`/api`), the groups (`/apis`) and the
//! resources of a group version, to map a kind to its [`ApiResource`]
//! (plural, scope) at run time — [`Client::resolve_kind`] for one kind,
//! [`Discovery`] for the whole server.

use bytes::Bytes;
use http::{Method, Request};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList, APIVersions};
use kcontrol_indexer::ApiResource;

use crate::client::Client;
use crate::error::Error;

fn get(uri: &str) -> Result<Request<Bytes>, Error> {
    Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Bytes::new())
        .map_err(|e| Error::InvalidRequest(format!("cannot build the request for {uri}: {e}")))
}

/// The discovery path of a group version: `/api/v1` or `/apis/{group}/{version}`.
fn group_version_path(group_version: &str) -> Result<String, Error> {
    let valid = |s: &str| !s.is_empty() && !s.contains(['?', '#', ' ']) && s != "." && s != "..";
    match group_version.split_once('/') {
        None if valid(group_version) => Ok(format!("/api/{group_version}")),
        Some((group, version)) if valid(group) && valid(version) && !version.contains('/') => {
            Ok(format!("/apis/{group}/{version}"))
        }
        _ => Err(Error::InvalidRequest(format!(
            "invalid group version {group_version:?}"
        ))),
    }
}

fn split_group_version(group_version: &str) -> (&str, &str) {
    group_version.split_once('/').unwrap_or(("", group_version))
}

/// One resource found by discovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredResource {
    /// Group, version, kind, plural and scope.
    pub resource: ApiResource,
    /// The verbs the resource supports (`list`, `watch`, `create`...).
    pub verbs: Vec<String>,
    /// Subresources (`status`, `scale`...).
    pub subresources: Vec<String>,
    /// Whether this is the group's preferred version.
    pub preferred: bool,
}

impl DiscoveredResource {
    /// Whether the resource supports a verb.
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// The resources of one `APIResourceList`, subresources folded into their parent.
fn resources_of(list: &APIResourceList, preferred: bool) -> Vec<DiscoveredResource> {
    let (group, version) = split_group_version(&list.group_version);
    let mut out: Vec<DiscoveredResource> = list
        .resources
        .iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| DiscoveredResource {
            resource: ApiResource::new(
                r.group.clone().unwrap_or_else(|| group.to_owned()),
                r.version.clone().unwrap_or_else(|| version.to_owned()),
                r.kind.clone(),
                r.name.clone(),
                r.namespaced,
            ),
            verbs: r.verbs.clone(),
            subresources: Vec::new(),
            preferred,
        })
        .collect();
    for sub in list.resources.iter().filter_map(|r| r.name.split_once('/')) {
        if let Some(parent) = out.iter_mut().find(|p| p.resource.plural == sub.0) {
            parent.subresources.push(sub.1.to_owned());
        }
    }
    out
}

impl Client {
    /// `GET /api`: the core group's versions.
    pub async fn core_api_versions(&self) -> Result<APIVersions, Error> {
        self.request_json(get("/api")?, "/api discovery answer")
            .await
    }

    /// `GET /apis`: the API groups, their versions and preferred version.
    pub async fn api_groups(&self) -> Result<APIGroupList, Error> {
        self.request_json(get("/apis")?, "/apis discovery answer")
            .await
    }

    /// The resources of a group version (`"v1"`, `"apps/v1"`).
    pub async fn api_resources(&self, group_version: &str) -> Result<APIResourceList, Error> {
        let path = group_version_path(group_version)?;
        self.request_json(get(&path)?, &format!("{path} discovery answer"))
            .await
    }

    /// The resource serving `kind` in `api_version` (`"apps/v1"`, `"Deployment"`).
    pub async fn resolve_kind(&self, api_version: &str, kind: &str) -> Result<ApiResource, Error> {
        let list = self.api_resources(api_version).await?;
        resources_of(&list, true)
            .into_iter()
            .find(|r| r.resource.kind == kind)
            .map(|r| r.resource)
            .ok_or_else(|| {
                Error::Discovery(format!("the server has no kind {kind} in {api_version}"))
            })
    }
}

/// Everything the server serves, from one discovery pass.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    resources: Vec<DiscoveredResource>,
    failed: Vec<(String, String)>,
}

impl Discovery {
    /// Discovers every version of every group. A group version that fails
    /// (e.g. an unavailable aggregated API) is skipped and reported by
    /// [`Discovery::failed`], as client-go does.
    pub async fn run(client: &Client) -> Result<Self, Error> {
        let mut versions: Vec<(String, bool)> = client
            .core_api_versions()
            .await?
            .versions
            .into_iter()
            .enumerate()
            .map(|(i, v)| (v, i == 0))
            .collect();
        for group in client.api_groups().await?.groups {
            let preferred = group
                .preferred_version
                .as_ref()
                .map(|p| p.group_version.clone());
            for v in group.versions {
                let is_preferred = preferred.as_deref() == Some(v.group_version.as_str());
                versions.push((v.group_version, is_preferred));
            }
        }
        let lists =
            futures::future::join_all(versions.iter().map(|(gv, _)| client.api_resources(gv)))
                .await;
        let mut discovery = Self::default();
        for ((group_version, preferred), list) in versions.into_iter().zip(lists) {
            match list {
                Ok(list) => discovery.resources.extend(resources_of(&list, preferred)),
                Err(e) => {
                    tracing::warn!(%group_version, error = %e, "discovery of a group version failed");
                    discovery.failed.push((group_version, e.to_string()));
                }
            }
        }
        Ok(discovery)
    }

    /// Every resource found.
    pub fn resources(&self) -> &[DiscoveredResource] {
        &self.resources
    }

    /// The group versions that could not be discovered, with the reason.
    pub fn failed(&self) -> &[(String, String)] {
        &self.failed
    }

    /// The resource of `kind` in `group`, in the preferred version when the
    /// kind exists there, else in any version.
    pub fn resolve_kind(&self, group: &str, kind: &str) -> Option<&ApiResource> {
        let mut fallback = None;
        for found in self
            .resources
            .iter()
            .filter(|r| r.resource.group == group && r.resource.kind == kind)
        {
            if found.preferred {
                return Some(&found.resource);
            }
            fallback.get_or_insert(&found.resource);
        }
        fallback
    }

    /// The resource of an exact group, version and kind.
    pub fn resolve_gvk(&self, group: &str, version: &str, kind: &str) -> Option<&ApiResource> {
        self.resources
            .iter()
            .map(|r| &r.resource)
            .find(|r| r.group == group && r.version == version && r.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_version_paths() {
        assert_eq!(group_version_path("v1").unwrap(), "/api/v1");
        assert_eq!(group_version_path("apps/v1").unwrap(), "/apis/apps/v1");
        assert!(group_version_path("a/b/c").is_err());
        assert!(group_version_path("").is_err());
        assert!(group_version_path("/v1").is_err());
    }

    #[test]
    fn folds_subresources() {
        let list: APIResourceList = serde_json::from_value(serde_json::json!({
            "groupVersion": "apps/v1",
            "resources": [
                {"name": "deployments", "singularName": "deployment", "namespaced": true, "kind": "Deployment", "verbs": ["get", "list", "watch"]},
                {"name": "deployments/status", "singularName": "", "namespaced": true, "kind": "Deployment", "verbs": ["get"]},
                {"name": "deployments/scale", "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get"]}
            ]
        }))
        .unwrap();
        let found = resources_of(&list, true);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].resource,
            ApiResource::new("apps", "v1", "Deployment", "deployments", true)
        );
        assert_eq!(found[0].subresources, vec!["status", "scale"]);
        assert!(found[0].supports("watch"));
    }
}
