//! Request parameters: [`ListParams`], [`WatchParams`], [`PostParams`],
//! [`PatchParams`] with [`Patch`], and [`DeleteParams`], each with builder
//! methods and the query string (or body) it becomes.

use serde::Serialize;

use crate::error::Error;
use crate::path::Query;

/// How `resourceVersion` is interpreted by a list (or a watch with
/// `sendInitialEvents`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    /// Any data at least as new as the given version.
    NotOlderThan,
    /// Exactly the given version (fails with 410 when it is compacted).
    Exact,
}

impl ResourceVersionMatch {
    fn as_str(self) -> &'static str {
        match self {
            Self::NotOlderThan => "NotOlderThan",
            Self::Exact => "Exact",
        }
    }
}

/// Parameters of a list request.
///
/// An empty or absent `resource_version` asks for a consistent (quorum) read;
/// `"0"` accepts any cached data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListParams {
    /// `labelSelector`, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// `fieldSelector`, e.g. `metadata.name=x`.
    pub field_selector: Option<String>,
    /// `limit`: the page size.
    pub limit: Option<u32>,
    /// `continue`: the token of the previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `timeoutSeconds`: a server-side limit on the request.
    pub timeout_seconds: Option<u32>,
    /// Not sent: items of a protobuf answer are decoded without
    /// `metadata.managedFields`, skipped unread (JSON items keep them; the
    /// reflector strips those after decoding). Default `false`.
    pub strip_managed_fields: bool,
}

impl ListParams {
    /// Sets `labelSelector`.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }

    /// Sets `fieldSelector`.
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }

    /// Sets `limit`.
    #[must_use]
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets `continue`.
    #[must_use]
    pub fn continue_token(mut self, token: &str) -> Self {
        self.continue_token = Some(token.to_owned());
        self
    }

    /// Sets `resourceVersion`.
    #[must_use]
    pub fn resource_version(mut self, version: &str) -> Self {
        self.resource_version = Some(version.to_owned());
        self
    }

    /// Sets `resourceVersionMatch`.
    #[must_use]
    pub fn resource_version_match(mut self, rv_match: ResourceVersionMatch) -> Self {
        self.resource_version_match = Some(rv_match);
        self
    }

    /// Sets `timeoutSeconds`.
    #[must_use]
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }

    pub(crate) fn to_query(&self) -> Query {
        let mut q = Query::new();
        q.push_opt("labelSelector", self.label_selector.as_deref());
        q.push_opt("fieldSelector", self.field_selector.as_deref());
        if let Some(limit) = self.limit.filter(|l| *l > 0) {
            q.push("limit", &limit.to_string());
        }
        q.push_opt("continue", self.continue_token.as_deref());
        q.push_opt("resourceVersion", self.resource_version.as_deref());
        q.push_opt(
            "resourceVersionMatch",
            self.resource_version_match
                .map(ResourceVersionMatch::as_str),
        );
        if let Some(t) = self.timeout_seconds {
            q.push("timeoutSeconds", &t.to_string());
        }
        q
    }
}

/// Parameters of a watch request. The starting resourceVersion is an
/// argument of [`Api::watch`](crate::Api::watch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `timeoutSeconds`: the server ends the watch after this long.
    pub timeout_seconds: Option<u32>,
    /// `allowWatchBookmarks` (default `true`).
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`: stream the current state as `Added` events first,
    /// ending with a bookmark annotated `k8s.io/initial-events-end: "true"`.
    /// Requires `resource_version_match = NotOlderThan` and bookmarks.
    pub send_initial_events: bool,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// Not sent: objects of protobuf events are decoded without
    /// `metadata.managedFields`, skipped unread (as
    /// [`ListParams::strip_managed_fields`]). Default `false`.
    pub strip_managed_fields: bool,
}

impl Default for WatchParams {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            timeout_seconds: None,
            allow_bookmarks: true,
            send_initial_events: false,
            resource_version_match: None,
            strip_managed_fields: false,
        }
    }
}

impl WatchParams {
    /// Sets `labelSelector`.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }

    /// Sets `fieldSelector`.
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }

    /// Sets `timeoutSeconds`.
    #[must_use]
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }

    /// Turns bookmarks off.
    #[must_use]
    pub fn disable_bookmarks(mut self) -> Self {
        self.allow_bookmarks = false;
        self
    }

    /// The WatchList mode: `sendInitialEvents=true`,
    /// `resourceVersionMatch=NotOlderThan`, bookmarks on.
    #[must_use]
    pub fn streaming_lists(mut self) -> Self {
        self.send_initial_events = true;
        self.allow_bookmarks = true;
        self.resource_version_match = Some(ResourceVersionMatch::NotOlderThan);
        self
    }

    pub(crate) fn to_query(&self, resource_version: &str) -> Result<Query, Error> {
        if self.send_initial_events && !self.allow_bookmarks {
            return Err(Error::InvalidRequest(
                "sendInitialEvents needs allowWatchBookmarks".to_owned(),
            ));
        }
        let mut q = Query::new();
        q.push("watch", "true");
        q.push_opt("resourceVersion", Some(resource_version));
        q.push_opt("labelSelector", self.label_selector.as_deref());
        q.push_opt("fieldSelector", self.field_selector.as_deref());
        if let Some(t) = self.timeout_seconds {
            q.push("timeoutSeconds", &t.to_string());
        }
        if self.allow_bookmarks {
            q.push("allowWatchBookmarks", "true");
        }
        if self.send_initial_events {
            q.push("sendInitialEvents", "true");
        }
        q.push_opt(
            "resourceVersionMatch",
            self.resource_version_match
                .map(ResourceVersionMatch::as_str),
        );
        Ok(q)
    }
}

/// Parameters of a create or replace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostParams {
    /// `dryRun=All`: validate without persisting.
    pub dry_run: bool,
    /// `fieldManager`.
    pub field_manager: Option<String>,
}

impl PostParams {
    pub(crate) fn to_query(&self) -> Query {
        let mut q = Query::new();
        if self.dry_run {
            q.push("dryRun", "All");
        }
        q.push_opt("fieldManager", self.field_manager.as_deref());
        q
    }
}

/// A patch body and its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Patch<P> {
    /// Server-side apply (`application/apply-patch+yaml`, sent as JSON): the
    /// full intended state of the fields this manager owns.
    Apply(P),
    /// A JSON Patch (RFC 6902) array (`application/json-patch+json`).
    Json(P),
    /// A JSON merge patch (RFC 7386, `application/merge-patch+json`).
    Merge(P),
    /// A strategic merge patch (`application/strategic-merge-patch+json`;
    /// built-in types only).
    Strategic(P),
}

impl<P: Serialize> Patch<P> {
    /// The `Content-Type` of this patch.
    pub fn content_type(&self) -> &'static str {
        match self {
            Self::Apply(_) => "application/apply-patch+yaml",
            Self::Json(_) => "application/json-patch+json",
            Self::Merge(_) => "application/merge-patch+json",
            Self::Strategic(_) => "application/strategic-merge-patch+json",
        }
    }

    pub(crate) fn body(&self) -> Result<Vec<u8>, Error> {
        let (Self::Apply(p) | Self::Json(p) | Self::Merge(p) | Self::Strategic(p)) = self;
        serde_json::to_vec(p)
            .map_err(|e| Error::InvalidRequest(format!("cannot serialize the patch: {e}")))
    }

    fn is_apply(&self) -> bool {
        matches!(self, Self::Apply(_))
    }
}

/// Parameters of a patch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatchParams {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager` (required for server-side apply).
    pub field_manager: Option<String>,
    /// `force=true`: take ownership of conflicting fields (apply only).
    pub force: bool,
}

impl PatchParams {
    /// Server-side apply as `manager`.
    pub fn apply(manager: &str) -> Self {
        Self {
            field_manager: Some(manager.to_owned()),
            ..Self::default()
        }
    }

    /// Forces conflicts (server-side apply only).
    #[must_use]
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }

    pub(crate) fn to_query<P: Serialize>(&self, patch: &Patch<P>) -> Result<Query, Error> {
        if patch.is_apply() && self.field_manager.as_deref().unwrap_or("").is_empty() {
            return Err(Error::InvalidRequest(
                "server-side apply needs a field manager".to_owned(),
            ));
        }
        if self.force && !patch.is_apply() {
            return Err(Error::InvalidRequest(
                "force is only valid with server-side apply".to_owned(),
            ));
        }
        let mut q = Query::new();
        if self.dry_run {
            q.push("dryRun", "All");
        }
        q.push_opt("fieldManager", self.field_manager.as_deref());
        if self.force {
            q.push("force", "true");
        }
        Ok(q)
    }
}

/// What happens to dependents of a deleted object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PropagationPolicy {
    /// Dependents are orphaned.
    Orphan,
    /// The object goes at once; the garbage collector deletes dependents.
    Background,
    /// The object stays (with a `foregroundDeletion` finalizer) until its
    /// dependents are gone.
    Foreground,
}

/// Conditions the object must meet for a delete to proceed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// The object must have this UID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The object must be at this resourceVersion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// Parameters of a delete (sent as a `DeleteOptions` body).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteParams {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `gracePeriodSeconds` (0 deletes at once).
    pub grace_period_seconds: Option<u32>,
    /// `propagationPolicy`.
    pub propagation_policy: Option<PropagationPolicy>,
    /// `preconditions`.
    pub preconditions: Option<Preconditions>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions<'a> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    grace_period_seconds: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    propagation_policy: Option<PropagationPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preconditions: Option<&'a Preconditions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dry_run: Vec<&'static str>,
}

impl DeleteParams {
    /// Foreground deletion.
    pub fn foreground() -> Self {
        Self {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..Self::default()
        }
    }

    /// Background deletion.
    pub fn background() -> Self {
        Self {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Self::default()
        }
    }

    /// Orphans dependents.
    pub fn orphan() -> Self {
        Self {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Self::default()
        }
    }

    /// Sets the preconditions.
    #[must_use]
    pub fn preconditions(mut self, preconditions: Preconditions) -> Self {
        self.preconditions = Some(preconditions);
        self
    }

    /// Sets the grace period.
    #[must_use]
    pub fn grace_period(mut self, seconds: u32) -> Self {
        self.grace_period_seconds = Some(seconds);
        self
    }

    pub(crate) fn body(&self) -> Result<Vec<u8>, Error> {
        let options = DeleteOptions {
            api_version: "v1",
            kind: "DeleteOptions",
            grace_period_seconds: self.grace_period_seconds,
            propagation_policy: self.propagation_policy,
            preconditions: self.preconditions.as_ref(),
            dry_run: if self.dry_run {
                vec!["All"]
            } else {
                Vec::new()
            },
        };
        serde_json::to_vec(&options)
            .map_err(|e| Error::InvalidRequest(format!("cannot serialize DeleteOptions: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_query() {
        let lp = ListParams::default()
            .labels("app=web")
            .limit(500)
            .continue_token("abc")
            .resource_version("0")
            .resource_version_match(ResourceVersionMatch::NotOlderThan)
            .timeout(30);
        assert_eq!(
            lp.to_query().with_path("/x"),
            "/x?labelSelector=app%3Dweb&limit=500&continue=abc&resourceVersion=0&resourceVersionMatch=NotOlderThan&timeoutSeconds=30"
        );
        assert_eq!(
            ListParams::default()
                .resource_version("")
                .to_query()
                .with_path("/x"),
            "/x"
        );
    }

    #[test]
    fn watch_query() {
        let wp = WatchParams::default().timeout(290).streaming_lists();
        assert_eq!(
            wp.to_query("").unwrap().with_path("/x"),
            "/x?watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        );
        let q = WatchParams::default()
            .disable_bookmarks()
            .to_query("15")
            .unwrap()
            .with_path("/x");
        assert_eq!(q, "/x?watch=true&resourceVersion=15");
        let mut bad = WatchParams::default().streaming_lists();
        bad.allow_bookmarks = false;
        assert!(bad.to_query("").is_err());
    }

    #[test]
    fn patch_rules() {
        let apply = Patch::Apply(serde_json::json!({"a": 1}));
        assert!(PatchParams::default().to_query(&apply).is_err());
        let q = PatchParams::apply("me")
            .force()
            .to_query(&apply)
            .unwrap()
            .with_path("/x");
        assert_eq!(q, "/x?fieldManager=me&force=true");
        let merge = Patch::Merge(serde_json::json!({}));
        assert!(PatchParams::default().force().to_query(&merge).is_err());
        assert_eq!(merge.content_type(), "application/merge-patch+json");
    }

    #[test]
    fn delete_body() {
        let dp = DeleteParams::foreground()
            .grace_period(0)
            .preconditions(Preconditions {
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
            });
        let body: serde_json::Value = serde_json::from_slice(&dp.body().unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "propagationPolicy": "Foreground",
                "preconditions": {"uid": "u1", "resourceVersion": "7"}
            })
        );
    }
}
