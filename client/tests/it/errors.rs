//! HTTP error answers become `Error::Api` with the server's `Status` and the
//! right predicates: 404, 409, 410 (both "too old resource version" and an
//! expired continue token), 429 with Retry-After, 5xx, and bodies that are
//! not a `Status` at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Api, Client, Error, ListParams, PostParams};
use serde_json::json;
use support::TestServer;

async fn api_answering(
    respond: impl Fn(&support::Recorded) -> http::Response<support::Body> + Send + Sync + 'static,
) -> (TestServer, Api<ConfigMap>) {
    let server = TestServer::http(respond).await;
    let api = Api::namespaced(Client::try_from(server.config()).unwrap(), "ns1");
    (server, api)
}

#[tokio::test]
async fn not_found() {
    let (_s, api) =
        api_answering(|_| support::status(404, "NotFound", "configmaps \"x\" not found")).await;
    let err = api.get("x").await.unwrap_err();
    assert!(err.is_not_found());
    assert!(!err.is_conflict() && !err.is_expired() && !err.is_server_error());
    assert_eq!(
        err.status().unwrap().message(),
        "configmaps \"x\" not found"
    );
    assert_eq!(err.api_error().unwrap().http_code, 404);
}

#[tokio::test]
async fn conflict_on_stale_resource_version() {
    let (_s, api) = api_answering(|_| {
        support::status(
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again",
        )
    })
    .await;
    let err = api
        .replace("x", &PostParams::default(), &ConfigMap::default())
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert!(!err.is_already_exists());
    assert!(
        err.to_string().contains("the object has been modified"),
        "{err}"
    );
}

#[tokio::test]
async fn already_exists_is_a_conflict_too() {
    let (_s, api) =
        api_answering(|_| support::status(409, "AlreadyExists", "configmaps \"x\" already exists"))
            .await;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("x".into());
    let err = api.create(&PostParams::default(), &cm).await.unwrap_err();
    assert!(err.is_conflict() && err.is_already_exists());
}

#[tokio::test]
async fn gone_too_old_resource_version() {
    let (_s, api) =
        api_answering(|_| support::status(410, "Expired", "too old resource version: 5 (100)"))
            .await;
    let err = api
        .list(&ListParams::default().resource_version("5"))
        .await
        .unwrap_err();
    assert!(err.is_gone() && err.is_expired(), "{err}");
}

#[tokio::test]
async fn expired_continue_token() {
    let (_s, api) = api_answering(|_| {
        support::status(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        )
    })
    .await;
    let err = api
        .list(&ListParams::default().limit(10).continue_token("old"))
        .await
        .unwrap_err();
    assert!(err.is_expired(), "{err}");
}

#[tokio::test]
async fn too_many_requests_with_retry_after() {
    let (_s, api) = api_answering(|_| {
        let mut resp = support::json(
            429,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "TooManyRequests",
                   "message": "too many requests", "code": 429, "details": {"retryAfterSeconds": 9}}),
        );
        resp.headers_mut().insert("retry-after", "3".parse().unwrap());
        resp
    })
    .await;
    let err = api.get("x").await.unwrap_err();
    assert!(err.is_too_many_requests());
    assert_eq!(
        err.retry_after(),
        Some(Duration::from_secs(3)),
        "the header wins"
    );
    assert_eq!(
        err.status().unwrap().retry_after(),
        Some(Duration::from_secs(9))
    );
}

#[tokio::test]
async fn retry_after_from_status_details_alone() {
    let (_s, api) = api_answering(|_| {
        support::json(
            429,
            json!({"kind": "Status", "reason": "TooManyRequests", "code": 429,
                                  "details": {"retryAfterSeconds": 4}}),
        )
    })
    .await;
    let err = api.get("x").await.unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(4)));
}

#[tokio::test]
async fn server_errors() {
    let (_s, api) = api_answering(|_| support::status(500, "InternalError", "etcd is sad")).await;
    let err = api.get("x").await.unwrap_err();
    assert!(err.is_server_error());
    assert!(err.to_string().contains("etcd is sad"), "{err}");
}

#[tokio::test]
async fn non_status_bodies_keep_code_and_first_bytes() {
    let (_s, api) = api_answering(|req| match req.path().rsplit('/').next().unwrap() {
        "html" => support::bytes(
            502,
            "<html><body>Bad Gateway from the load balancer</body></html>",
        ),
        "empty" => support::bytes(503, ""),
        "huge" => support::bytes(500, "y".repeat(1_000_000)),
        _ => support::bytes(404, "404 page not found\n"),
    })
    .await;
    let err = api.get("html").await.unwrap_err();
    assert!(err.is_server_error());
    assert_eq!(err.api_error().unwrap().http_code, 502);
    assert!(
        err.to_string()
            .contains("Bad Gateway from the load balancer"),
        "{err}"
    );

    let err = api.get("empty").await.unwrap_err();
    assert_eq!(err.status().unwrap().code(), 503);
    assert!(err.to_string().contains("503"), "{err}");

    let err = api.get("huge").await.unwrap_err();
    let snippet = err.api_error().unwrap().body_snippet.clone().unwrap();
    assert!(
        snippet.len() < 1024,
        "the snippet is bounded: {}",
        snippet.len()
    );
    assert!(err.to_string().len() < 2048);

    let err = api.get("plain").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains("404 page not found"), "{err}");
}

#[tokio::test]
async fn undecodable_success_bodies_are_decode_errors() {
    let (_s, api) = api_answering(|_| support::bytes(200, "{\"metadata\": 12}")).await;
    let err = api.get("x").await.unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    assert!(err.to_string().contains("configmaps"), "{err}");
}
