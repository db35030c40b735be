//! Discovery against a loopback server shaped like kube-apiserver's `/api`,
//! `/apis` and group-version documents: mapping kinds to resources,
//! preferred versions, subresources, and a failing aggregated API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use kcontrol_client::{Client, Discovery, Error};
use kcontrol_indexer::ApiResource;
use serde_json::json;
use support::{json, TestServer};

fn apiserver(req: &support::Recorded) -> http::Response<support::Body> {
    match req.path() {
        "/api" => json(
            200,
            json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}]}),
        ),
        "/apis" => json(
            200,
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
                {"name": "samplecontroller.k8s.io", "versions": [
                    {"groupVersion": "samplecontroller.k8s.io/v1", "version": "v1"},
                    {"groupVersion": "samplecontroller.k8s.io/v1alpha1", "version": "v1alpha1"}],
                 "preferredVersion": {"groupVersion": "samplecontroller.k8s.io/v1", "version": "v1"}},
                {"name": "metrics.k8s.io", "versions": [{"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}],
                 "preferredVersion": {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}}
            ]}),
        ),
        "/api/v1" => json(
            200,
            json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "configmaps", "singularName": "configmap", "namespaced": true, "kind": "ConfigMap",
                 "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
                {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace",
                 "verbs": ["get", "list", "watch"]},
                {"name": "namespaces/status", "singularName": "", "namespaced": false, "kind": "Namespace", "verbs": ["get"]}
            ]}),
        ),
        "/apis/apps/v1" => json(
            200,
            json!({"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
                {"name": "deployments", "singularName": "deployment", "namespaced": true, "kind": "Deployment",
                 "verbs": ["get", "list", "watch"]},
                {"name": "deployments/status", "singularName": "", "namespaced": true, "kind": "Deployment", "verbs": ["get"]}
            ]}),
        ),
        "/apis/samplecontroller.k8s.io/v1" => json(
            200,
            json!({"groupVersion": "samplecontroller.k8s.io/v1",
            "resources": [{"name": "foos", "singularName": "foo", "namespaced": true, "kind": "Foo", "verbs": ["list"]}]}),
        ),
        "/apis/samplecontroller.k8s.io/v1alpha1" => json(
            200,
            json!({"groupVersion": "samplecontroller.k8s.io/v1alpha1",
            "resources": [{"name": "foos", "singularName": "foo", "namespaced": true, "kind": "Foo", "verbs": ["list"]}]}),
        ),
        "/apis/metrics.k8s.io/v1beta1" => support::status(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        _ => support::status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
    }
}

#[tokio::test]
async fn resolve_one_kind() {
    let server = TestServer::http(apiserver).await;
    let client = Client::try_from(server.config()).unwrap();
    let deployments = client.resolve_kind("apps/v1", "Deployment").await.unwrap();
    assert_eq!(
        deployments,
        ApiResource::new("apps", "v1", "Deployment", "deployments", true)
    );
    let namespaces = client.resolve_kind("v1", "Namespace").await.unwrap();
    assert!(!namespaces.namespaced);
    let err = client.resolve_kind("apps/v1", "Nothing").await.unwrap_err();
    assert!(matches!(err, Error::Discovery(_)), "{err}");
    let err = client.resolve_kind("nope/v1", "Foo").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn discover_everything() {
    let server = TestServer::http(apiserver).await;
    let client = Client::try_from(server.config()).unwrap();
    let discovery = Discovery::run(&client).await.unwrap();
    assert_eq!(discovery.failed().len(), 1);
    assert_eq!(discovery.failed()[0].0, "metrics.k8s.io/v1beta1");
    let preferred = discovery
        .resolve_kind("samplecontroller.k8s.io", "Foo")
        .unwrap();
    assert_eq!(preferred.version, "v1", "the preferred version wins");
    let alpha = discovery
        .resolve_gvk("samplecontroller.k8s.io", "v1alpha1", "Foo")
        .unwrap();
    assert_eq!(alpha.plural, "foos");
    assert_eq!(
        discovery.resolve_kind("", "ConfigMap").unwrap().plural,
        "configmaps"
    );
    let deployments = discovery
        .resources()
        .iter()
        .find(|r| r.resource.kind == "Deployment")
        .unwrap();
    assert_eq!(deployments.subresources, vec!["status"]);
    assert!(deployments.supports("watch") && !deployments.supports("create"));
    assert!(discovery.resolve_kind("apps", "ReplicaSet").is_none());
}
