//! Read-your-writes (CT16): after a reconcile writes an object, it can
//! wait (bounded) until the controller's cache holds that write, so a stale
//! cache never makes it create the object a second time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_client::{Api, Client, PostParams};
use kcontrol_controller::{owner, Action, Context, Controller, NotCachedError};
use kcontrol_testserver::TestServer;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use support::DEADLINE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct16_a_write_is_waited_for_in_the_cache_and_a_lagging_cache_times_out() {
    let server = Arc::new(TestServer::start().await.unwrap());
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}});
    server
        .objects()
        .create("configmaps", "default", cm)
        .unwrap();
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let faults = server.faults().clone();
    let reconcile = move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
        let (tx, faults) = (tx.clone(), faults.clone());
        async move {
            if ctx
                .lister::<Secret>()
                .unwrap()
                .get("default", "app")
                .is_some()
            {
                return Ok::<_, kcontrol_client::Error>(Action::Done);
            }
            let api: Api<Secret> = Api::namespaced(ctx.client().clone(), "default");
            let mut secret = Secret::default();
            secret.metadata.name = Some("app".into());
            secret.metadata.owner_references = Some(vec![owner::new_controller_ref(cm.as_ref())]);
            // the watch that would bring the Secret into the cache stalls
            faults.pause_watches();
            let created = api.create(&PostParams::default(), &secret).await?;
            let lagging = ctx
                .wait_until_cached(&created, Duration::from_millis(300))
                .await;
            faults.resume_watches();
            let caught_up = ctx.wait_until_cached(&created, DEADLINE).await;
            let cached = ctx
                .lister::<Secret>()
                .unwrap()
                .get("default", "app")
                .is_some();
            tx.send((lagging, caught_up, cached)).unwrap();
            Ok(Action::Done)
        }
    };
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .owns::<Secret>();
    let run = tokio::spawn(controller.run(reconcile, shutdown.clone()));
    let (lagging, caught_up, cached) = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(lagging, Err(NotCachedError::Timeout { .. })),
        "{lagging:?}"
    );
    assert!(caught_up.is_ok(), "{caught_up:?}");
    assert!(cached, "after the wait the cache holds the write");
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // one Secret: the later reconciles (the Secret's own event) saw it
    assert_eq!(
        server
            .objects()
            .list("secrets", Some("default"))
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct16_an_uncached_type_or_an_unwritten_object_is_an_error() {
    let server = TestServer::start().await.unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}});
    server
        .objects()
        .create("configmaps", "default", cm)
        .unwrap();
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reconcile = move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
        let tx = tx.clone();
        async move {
            let secret = Secret::default();
            let not_watched = ctx.wait_until_cached(&secret, DEADLINE).await;
            let mut unwritten = ConfigMap::clone(&cm);
            unwritten.metadata.resource_version = None;
            let missing = ctx.wait_until_cached(&unwritten, DEADLINE).await;
            let itself = ctx.wait_until_cached(cm.as_ref(), DEADLINE).await;
            tx.send((not_watched, missing, itself)).unwrap();
            Ok::<_, kcontrol_client::Error>(Action::Done)
        }
    };
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(
        Controller::new(client)
            .for_resource::<ConfigMap>()
            .run(reconcile, shutdown.clone()),
    );
    let (not_watched, missing, itself) = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(not_watched, Err(NotCachedError::NotWatched(_))),
        "{not_watched:?}"
    );
    assert!(
        matches!(missing, Err(NotCachedError::Missing("resourceVersion"))),
        "{missing:?}"
    );
    assert!(
        itself.is_ok(),
        "the object reconciled is in the cache: {itself:?}"
    );
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
