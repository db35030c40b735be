//! Bearer tokens, basic auth and token files (rotation picked up on change,
//! and after a 401) against a loopback server that checks `Authorization`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Api, Auth, Client, Error, SecretString};
use support::{configmap, json, TestServer};

/// A server that accepts the `Authorization` values in `allowed`, else 401.
async fn checking_server(allowed: Arc<Mutex<HashSet<String>>>) -> TestServer {
    TestServer::http(move |req| {
        let presented = req.header("authorization").unwrap_or_default();
        if allowed.lock().unwrap().contains(&presented) {
            json(200, configmap("ns1", "a", "1"))
        } else {
            support::status(401, "Unauthorized", "Unauthorized")
        }
    })
    .await
}

fn allow(values: &[&str]) -> Arc<Mutex<HashSet<String>>> {
    Arc::new(Mutex::new(values.iter().map(|v| v.to_string()).collect()))
}

async fn get(client: &Client) -> Result<ConfigMap, Error> {
    Api::<ConfigMap>::namespaced(client.clone(), "ns1")
        .get("a")
        .await
}

fn authorizations(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn bearer_token() {
    let server = checking_server(allow(&["Bearer abc.def"])).await;
    let client = Client::try_from(
        server
            .config()
            .with_auth(Auth::Bearer(SecretString::from("abc.def"))),
    )
    .unwrap();
    get(&client).await.unwrap();
    let wrong = Client::try_from(
        server
            .config()
            .with_auth(Auth::Bearer(SecretString::from("nope"))),
    )
    .unwrap();
    let err = get(&wrong).await.unwrap_err();
    assert!(err.is_unauthorized(), "{err}");
    assert_eq!(
        server.requests().len(),
        2,
        "a static token is not retried after a 401"
    );
}

#[tokio::test]
async fn basic_auth() {
    let server = checking_server(allow(&["Basic YWxpY2U6czNjcmV0"])).await;
    let auth = Auth::Basic {
        username: "alice".into(),
        password: SecretString::from("s3cret"),
    };
    get(&Client::try_from(server.config().with_auth(auth)).unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn token_file_rotation_is_picked_up() {
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, "first-token\n").unwrap();
    let allowed = allow(&["Bearer first-token"]);
    let server = checking_server(allowed.clone()).await;
    let client = Client::try_from(
        server
            .config()
            .with_auth(Auth::TokenFile(token_path.clone())),
    )
    .unwrap();
    get(&client).await.unwrap();

    // Rotation: the old token stops working, the file holds a new one.
    *allowed.lock().unwrap() = ["Bearer second-token-longer".to_string()].into();
    std::fs::write(&token_path, "second-token-longer").unwrap();
    get(&client).await.unwrap();
    assert_eq!(
        authorizations(&server),
        ["Bearer first-token", "Bearer second-token-longer"]
    );
}

#[tokio::test]
async fn token_file_is_reread_after_a_401() {
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, "token-aaaa").unwrap();
    let allowed = allow(&["Bearer token-aaaa"]);
    let server = checking_server(allowed.clone()).await;
    let client = Client::try_from(
        server
            .config()
            .with_auth(Auth::TokenFile(token_path.clone())),
    )
    .unwrap();
    get(&client).await.unwrap();

    // A rotation the client cannot see from the file's size or time: same
    // length, and the old modification time put back.
    let modified = std::fs::metadata(&token_path).unwrap().modified().unwrap();
    std::fs::write(&token_path, "token-bbbb").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&token_path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    *allowed.lock().unwrap() = ["Bearer token-bbbb".to_string()].into();

    get(&client).await.unwrap();
    assert_eq!(
        authorizations(&server),
        [
            "Bearer token-aaaa",
            "Bearer token-aaaa",
            "Bearer token-bbbb"
        ],
        "the 401 makes the client re-read the file and retry once"
    );
}

#[tokio::test]
async fn a_vanished_token_file_keeps_the_last_token() {
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, "kept").unwrap();
    let server = checking_server(allow(&["Bearer kept"])).await;
    let client = Client::try_from(
        server
            .config()
            .with_auth(Auth::TokenFile(token_path.clone())),
    )
    .unwrap();
    get(&client).await.unwrap();
    std::fs::remove_file(&token_path).unwrap();
    get(&client).await.unwrap();
}

#[tokio::test]
async fn a_missing_token_file_is_an_auth_error() {
    let server = checking_server(allow(&[])).await;
    let client = Client::try_from(
        server
            .config()
            .with_auth(Auth::TokenFile("/nonexistent/token".into())),
    )
    .unwrap();
    let err = get(&client).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err}");
    assert!(err.to_string().contains("/nonexistent/token"), "{err}");
    assert!(server.requests().is_empty());
}
