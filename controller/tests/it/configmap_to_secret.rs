//! The `configmap_to_secret` example, as a test: its embedded scenario
//! converges, and changes to or the deletion of an owned Secret re-trigger
//! the owning ConfigMap's reconcile (CT3 end to end).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code, unreachable_pub)]
#[path = "../../examples/configmap_to_secret.rs"]
mod example;

use crate::support;

use k8s_openapi::api::core::v1::Secret;
use kcontrol_client::{Client, Config};
use kcontrol_testserver::TestServer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_converges_on_an_embedded_server() {
    example::embedded().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_secret_changes_and_deletions_retrigger_the_owner() {
    let server = TestServer::start().await.unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "labels": {"kcontrol.dev/secret": "true"}}, "data": {"user": "admin"}});
    server
        .objects()
        .create("configmaps", "default", cm)
        .unwrap();
    let unlabelled =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}});
    server
        .objects()
        .create("configmaps", "default", unlabelled)
        .unwrap();
    let client = Client::new(Config::new(server.url().parse().unwrap())).unwrap();
    let shutdown = CancellationToken::new();
    let controller = example::controller(client);
    let stats = controller.stats();
    let run = tokio::spawn(controller.run(example::reconcile, shutdown.clone()));
    eventually("the Secret is created", async || {
        example::converged(&server, &["app"])
    })
    .await;
    let secret = |s: &TestServer| s.objects().get_as::<Secret>("default", "app").unwrap();
    let first = secret(&server).unwrap();
    assert_eq!(
        first.metadata.owner_references.as_ref().unwrap()[0].name,
        "app"
    );
    let reconciles = stats.successes();

    // someone changes the Secret's data: the owner is reconciled, the data restored
    let mut tampered = serde_json::to_value(&first).unwrap();
    tampered["data"] = json!({"user": "cm9vdA=="});
    tampered["apiVersion"] = json!("v1");
    tampered["kind"] = json!("Secret");
    server
        .objects()
        .update("secrets", "default", tampered)
        .unwrap();
    // by a reconcile: its write is seen before it returns and is counted,
    // so the count is waited for too
    eventually("the data is restored by a counted reconcile", async || {
        secret(&server).is_some_and(|s| {
            s.metadata.resource_version != first.metadata.resource_version
                && example::converged(&server, &["app"])
        }) && stats.successes() > reconciles
    })
    .await;

    // someone deletes it: re-created (a new object)
    server
        .objects()
        .delete("secrets", "default", "app")
        .unwrap();
    eventually("the Secret is re-created", async || {
        secret(&server).is_some_and(|s| s.metadata.uid != first.metadata.uid)
            && example::converged(&server, &["app"])
    })
    .await;
    // the unlabelled ConfigMap has no Secret
    assert!(server
        .objects()
        .get_as::<Secret>("default", "other")
        .unwrap()
        .is_none());
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}
