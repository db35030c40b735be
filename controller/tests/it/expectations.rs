//! Expectations (CT18) on the builder: creations made by a reconcile are
//! expected until the owned type's informer sees them, so a reconcile while
//! the cache lags creates nothing twice; a deleted owner's expectations go.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_client::{Api, DeleteParams, PostParams};
use kcontrol_controller::{owner, Action, Context, Controller, Expectations};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use support::{eventually, next, server, DEADLINE};

const WANTED: usize = 3;

#[derive(Debug, PartialEq)]
enum Seen {
    /// A reconcile found the expectations unmet and created nothing.
    Waiting,
    /// A reconcile found every Secret in the cache.
    Complete,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct18_a_lagging_cache_is_waited_for_instead_of_creating_twice() {
    let (server, client) = server().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}});
    server
        .objects()
        .create("configmaps", "default", cm)
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let creates = Arc::new(AtomicUsize::new(0));
    let faults = server.faults().clone();
    let reconcile = {
        let creates = Arc::clone(&creates);
        move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (tx, faults, creates) = (tx.clone(), faults.clone(), Arc::clone(&creates));
            async move {
                let expectations = ctx.expectations().unwrap();
                if !expectations.satisfied(ctx.key()) {
                    tx.send(Seen::Waiting).unwrap();
                    return Ok::<_, kcontrol_client::Error>(Action::RequeueAfter(
                        Duration::from_millis(20),
                    ));
                }
                let cached = ctx.lister::<Secret>().unwrap().list_namespaced("default");
                if cached.len() >= WANTED {
                    tx.send(Seen::Complete).unwrap();
                    return Ok(Action::Done);
                }
                // the watch that would bring the Secrets into the cache
                // stalls (once: the test resumes it)
                if creates.load(Ordering::SeqCst) == 0 {
                    faults.pause_watches();
                }
                expectations.expect_creations(ctx.key(), (WANTED - cached.len()) as i64);
                let api: Api<Secret> = Api::namespaced(ctx.client().clone(), "default");
                for i in cached.len()..WANTED {
                    let mut secret = Secret::default();
                    secret.metadata.name = Some(format!("app-{i}"));
                    secret.metadata.owner_references =
                        Some(vec![owner::new_controller_ref(cm.as_ref())]);
                    api.create(&PostParams::default(), &secret).await?;
                    creates.fetch_add(1, Ordering::SeqCst);
                }
                // look again soon: the cache has not seen the Secrets yet
                Ok(Action::RequeueAfter(Duration::from_millis(20)))
            }
        }
    };
    let expectations = Expectations::new();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client.clone())
        .for_resource::<ConfigMap>()
        .owns::<Secret>()
        .with_expectations(expectations.clone());
    let run = tokio::spawn(controller.run(reconcile, shutdown.clone()));

    // with the watch paused, the next reconcile waits instead of creating
    assert_eq!(next(&mut rx).await, Seen::Waiting);
    assert_eq!(
        expectations.pending("default/app").map(|p| p.adds),
        Some(WANTED as i64)
    );
    server.faults().resume_watches();
    // the Secrets' adds lower the expectations; then the cache is trusted
    loop {
        if next(&mut rx).await == Seen::Complete {
            break;
        }
    }
    assert_eq!(
        creates.load(Ordering::SeqCst),
        WANTED,
        "no Secret created twice"
    );
    assert_eq!(expectations.pending("default/app").map(|p| p.adds), Some(0));
    let stored = server.objects().list("secrets", Some("default")).unwrap();
    assert_eq!(stored.items.len(), WANTED);

    // the owner is deleted: a reconcile of its key drops its expectations
    let configmaps: Api<ConfigMap> = Api::namespaced(client, "default");
    configmaps
        .delete("app", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted owner's expectations to go", async || {
        expectations.pending("default/app").is_none()
    })
    .await;

    shutdown.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
