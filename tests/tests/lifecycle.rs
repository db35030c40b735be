//! The sample-controller's lifecycle end to end, on the testserver and (with
//! `KCONTROL_E2E_KUBECONFIG`) on a real cluster: a Foo gets its Deployment
//! and its status follows the Deployment; scaling, a deleted Deployment, a
//! Deployment that belongs to someone else, the Foo's deletion (garbage
//! collection by the server); and bad input: out-of-range replicas (422,
//! never seen by the controller), no deploymentName (dropped, not retried),
//! Deployment creates failing (Warning event, retried with backoff).
// the resource is named Foo; the skip lines are for whoever runs the suite
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_names, clippy::print_stdout)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::{DeleteParams, PostParams};
use kcontrol_e2e::{eventually_within, on_each_target, Env, RunningController};
use kcontrol_indexer::Object;
use kcontrol_testserver::{Failure, FaultScope, Verb};
use sample_controller::deployment::{available_replicas, new_deployment, spec_replicas};
use sample_controller::Foo;

const SHORT: Duration = Duration::from_secs(20);

async fn deployment_where(
    env: &Env,
    name: &str,
    what: &str,
    test: impl Fn(&Deployment) -> bool,
) -> Deployment {
    let api = env.deployments();
    eventually_within(
        format!("Deployment {name}: {what}"),
        env.patience(SHORT),
        || {
            let api = api.clone();
            let test = &test;
            async move { api.get_opt(name).await.ok().flatten().filter(|d| test(d)) }
        },
    )
    .await
}

async fn foo_status(env: &Env, name: &str, replicas: i32) -> Foo {
    let api = env.foos();
    eventually_within(
        format!("Foo {name} to report {replicas} available"),
        env.patience(SHORT),
        || {
            let api = api.clone();
            async move {
                api.get(name).await.ok().filter(|f| {
                    f.status
                        .as_ref()
                        .is_some_and(|s| s.available_replicas == replicas)
                })
            }
        },
    )
    .await
}

async fn event(env: &Env, object: &str, reason: &str) -> k8s_openapi::api::core::v1::Event {
    eventually_within(
        format!("a {reason} event about {object}"),
        env.patience(SHORT),
        || async move {
            env.events_about(object)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason))
        },
    )
    .await
}

async fn lifecycle(env: Env) {
    let ctl = RunningController::start(&env, 2).await;
    let foos = env.foos();

    // create: the Deployment, then the status, then a Synced event
    let foo = foos
        .create(
            &PostParams::default(),
            &Foo::with_deployment(&env.namespace, "web", "web-nginx", 1),
        )
        .await
        .unwrap();
    let d = deployment_where(&env, "web-nginx", "created", |_| true).await;
    assert_eq!(d.controller_ref().unwrap().uid, foo.uid().unwrap());
    assert_eq!(d.controller_ref().unwrap().block_owner_deletion, Some(true));
    assert_eq!(d.labels()["app"], "nginx");
    assert_eq!(d.labels()["controller"], "web");
    assert_eq!(spec_replicas(&d), 1);
    foo_status(&env, "web", 1).await;
    let synced = event(&env, "web", "Synced").await;
    assert_eq!(synced.type_.as_deref(), Some("Normal"));
    assert_eq!(synced.message.as_deref(), Some("Foo synced successfully"));

    // scale: the Deployment follows, then the status
    let mut scaled = foos.get("web").await.unwrap();
    scaled.spec.replicas = Some(3);
    foos.replace("web", &PostParams::default(), &scaled)
        .await
        .unwrap();
    deployment_where(&env, "web-nginx", "scaled to 3", |d| spec_replicas(d) == 3).await;
    foo_status(&env, "web", 3).await;

    // the Deployment deleted: recreated (a new uid), the status follows again
    let old_uid = d.uid().unwrap().to_owned();
    env.deployments()
        .delete("web-nginx", &DeleteParams::default())
        .await
        .unwrap();
    let recreated = deployment_where(&env, "web-nginx", "recreated", |d| {
        d.uid() != Some(old_uid.as_str()) && d.metadata.deletion_timestamp.is_none()
    })
    .await;
    assert_eq!(spec_replicas(&recreated), 3);
    deployment_where(&env, "web-nginx", "available again", |d| {
        available_replicas(d) == 3
    })
    .await;
    foo_status(&env, "web", 3).await;

    // a Deployment of that name owned by nobody: ErrResourceExists, retried
    let mut foreign = new_deployment(&Foo::with_deployment(
        &env.namespace,
        "someone-else",
        "taken",
        1,
    ));
    foreign.metadata.owner_references = None;
    env.deployments()
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    foos.create(
        &PostParams::default(),
        &Foo::with_deployment(&env.namespace, "late", "taken", 2),
    )
    .await
    .unwrap();
    let warning = event(&env, "late", "ErrResourceExists").await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(
        warning.message.as_deref(),
        Some("Resource \"taken\" already exists and is not managed by Foo")
    );
    let taken = env.deployments().get("taken").await.unwrap();
    assert!(
        taken.owner_references().is_empty(),
        "the foreign Deployment is left alone"
    );
    assert_eq!(spec_replicas(&taken), 1);

    // the Foo deleted: the server's garbage collector removes its Deployment
    foos.delete("web", &DeleteParams::default()).await.unwrap();
    let api = env.deployments();
    eventually_within(
        "the Deployment of a deleted Foo to be collected",
        env.patience(SHORT),
        || {
            let api = api.clone();
            async move { api.get_opt("web-nginx").await.ok().filter(Option::is_none) }
        },
    )
    .await;

    let stats = ctl.controller.stats();
    assert!(stats.deployments_created >= 2, "{stats:?}");
    assert!(stats.deployments_updated >= 1, "{stats:?}");
    assert!(
        stats.sync_errors >= 1,
        "ErrResourceExists is an error: {stats:?}"
    );
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lifecycle() {
    kcontrol_e2e::init_logging();
    on_each_target("lifecycle", lifecycle).await;
}

async fn bad_input(env: Env) {
    let ctl = RunningController::start(&env, 2).await;
    let foos = env.foos();

    // out-of-range replicas: 422 from the server's schema validation
    for replicas in [0, 11, -1] {
        let err = foos
            .create(
                &PostParams::default(),
                &Foo::with_deployment(
                    &env.namespace,
                    &format!("bad-{}", replicas + 1),
                    "bad",
                    replicas,
                ),
            )
            .await
            .unwrap_err();
        assert_eq!(err.api_error().map(|e| e.code()), Some(422), "{err}");
        assert!(err.to_string().contains("spec.replicas"), "{err}");
    }

    // no deploymentName: dropped, never retried
    foos.create(
        &PostParams::default(),
        &Foo::with_deployment(&env.namespace, "nameless", "", 1),
    )
    .await
    .unwrap();
    // a later, valid Foo shows the controller has handled the queue so far
    foos.create(
        &PostParams::default(),
        &Foo::with_deployment(&env.namespace, "fine", "fine", 1),
    )
    .await
    .unwrap();
    foo_status(&env, "fine", 1).await;
    let controller = &ctl.controller;
    eventually_within(
        "the nameless Foo to be dropped",
        env.patience(SHORT),
        || async { (controller.stats().dropped >= 1).then_some(()) },
    )
    .await;
    assert_eq!(
        controller
            .queue()
            .num_requeues(&format!("{}/nameless", env.namespace)),
        0
    );
    let stats = controller.stats();
    assert_eq!(stats.sync_errors, 0, "{stats:?}");
    assert_eq!(stats.deployments_created, 1, "{stats:?}");
    // nothing the 422s carried reached the controller's cache
    assert!(controller
        .foos()
        .list()
        .iter()
        .all(|f| !f.name().unwrap().starts_with("bad-")));
    assert_eq!(controller.foos().list().len(), 2);
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_rejected_or_dropped() {
    kcontrol_e2e::init_logging();
    on_each_target("bad-input", bad_input).await;
}

/// Deployment creates fail with 500 three times: a Warning event, retries
/// with backoff, then the Deployment (testserver only: it injects the faults).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_creates_are_warned_about_and_retried_with_backoff() {
    kcontrol_e2e::init_logging();
    let env = Env::testserver("failing-creates").await;
    let server = env.server().unwrap();
    server.faults().fail_next_matching(
        3,
        Failure::InternalError,
        FaultScope {
            verb: Some(Verb::Create),
            resource: Some("deployments.apps".into()),
        },
    );
    let ctl = RunningController::start(&env, 2).await;
    env.foos()
        .create(
            &PostParams::default(),
            &Foo::with_deployment(&env.namespace, "unlucky", "unlucky", 2),
        )
        .await
        .unwrap();
    let warning = event(&env, "unlucky", "FailedCreate").await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        warning
            .message
            .as_deref()
            .unwrap()
            .starts_with("Error creating Deployment \"unlucky\""),
        "{warning:?}"
    );
    deployment_where(&env, "unlucky", "created after the failures", |_| true).await;
    foo_status(&env, "unlucky", 2).await;
    let stats = ctl.controller.stats();
    assert_eq!(stats.sync_errors, 3, "{stats:?}");
    assert_eq!(stats.deployments_created, 1, "{stats:?}");
    // the three failures were counted as one Event (the same message)
    let warnings = env.events_about("unlucky").await;
    let failed: Vec<_> = warnings
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedCreate"))
        .collect();
    assert_eq!(failed.len(), 1);
    eventually_within("the repeats to be counted", SHORT, || async {
        let events = env.events_about("unlucky").await;
        events
            .iter()
            .find(|e| e.reason.as_deref() == Some("FailedCreate"))
            .and_then(|e| (e.count == Some(3)).then_some(()))
    })
    .await;
    // the retries waited: the rate limiter's backoff of this key was used,
    // then forgotten on success
    assert_eq!(
        ctl.controller
            .queue()
            .num_requeues(&format!("{}/unlucky", env.namespace)),
        0
    );
    let creates: Vec<u16> = server
        .request_log()
        .iter()
        .filter(|r| {
            r.verb == Some(Verb::Create) && r.resource.as_deref() == Some("deployments.apps")
        })
        .map(|r| r.status)
        .collect();
    assert_eq!(creates, [500, 500, 500, 201]);
    ctl.stop().await;
    println!(
        "failed_creates: real-cluster part skipped (it needs the testserver's fault injection)"
    );
}

/// A cluster without nodes (a kube-apiserver with no kubelet): Deployments
/// are observed and never available. As with kubernetes/sample-controller,
/// every Foo still shows its status, `availableReplicas: 0`, and has a
/// Normal `Synced` event (issue 15; kcontrol's controller wrote neither).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nodes_every_foo_shows_status_0_and_a_synced_event() {
    let env = Env::testserver("without-nodes").await;
    env.server().unwrap().set_nodes_ready(false);
    let ctl = RunningController::start(&env, 2).await;
    let foos = env.foos();
    let names: Vec<String> = (0..20).map(|i| format!("nodeless-{i}")).collect();
    for name in &names {
        let foo = Foo::with_deployment(&env.namespace, name, name, 1 + (name.len() % 3) as i32);
        foos.create(&PostParams::default(), &foo).await.unwrap();
    }
    for name in &names {
        let foo = foo_status(&env, name, 0).await;
        assert_eq!(foo.status.unwrap().available_replicas, 0);
        let synced = event(&env, name, "Synced").await;
        assert_eq!(synced.type_.as_deref(), Some("Normal"));
    }
    ctl.stop().await;
}
