//! The `operator` example's whole life against the in-process API server:
//! its CRD installed from the Rust type, a `WebApp` created and made
//! ready, steady state (0 writes over reconciles of unchanged objects),
//! a spec edit (the Deployment follows, `observedGeneration` moves), an
//! owned Service deleted (re-created), the `WebApp` deleted (the finalizer
//! records its Event, awaited; the object goes; its children are garbage
//! collected), `/metrics` with every family; and the `--embedded` demo.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code, unreachable_pub)]
#[path = "../../examples/operator.rs"]
mod example;

use crate::support;

use std::net::SocketAddr;

use clap::Parser;
use kcontrol::client::DeleteParams;
use kcontrol::k8s_openapi::api::{apps::v1::Deployment, core::v1::Service};
use kcontrol::prelude::*;
use kcontrol::serde_json::json;
use kcontrol::testserver::TestServer;
use support::{eventually, get, DEADLINE};

use example::{WebApp, WebAppSpec, NAME};

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    args: Args,
}

fn args(flags: &[&str]) -> Args {
    Flags::try_parse_from(std::iter::once("operator").chain(flags.iter().copied()))
        .unwrap()
        .args
}

/// The value of every sample of `family` whose labels include all of
/// `labels`, summed.
fn sample_sum(text: &str, family: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(family) && !l.starts_with('#'))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The operator's client's user agent: its requests in the server's
/// request log.
const AGENT: &str = "webapp-operator-under-test";

fn operator_client(server: &TestServer) -> Client {
    let kubeconfig = kcontrol::client::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let options = kcontrol::client::KubeconfigOptions::default();
    let mut config =
        kcontrol::client::Config::from_custom_kubeconfig(&kubeconfig, &options).unwrap();
    config.user_agent = AGENT.into();
    Client::new(config).unwrap()
}

/// The operator's writes so far (method and path), from the server's
/// request log, without its Lease renewals: leader election renews every
/// retry period whether it reconciles or not.
fn writes(server: &TestServer) -> Vec<String> {
    server
        .request_log()
        .into_iter()
        .filter(|r| r.user_agent == AGENT && r.method != "GET")
        .filter(|r| !r.path.contains("/leases/"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

fn reconciles(metrics: &str) -> u64 {
    let controller = format!("controller=\"{NAME}\"");
    sample_sum(
        metrics,
        "controller_reconcile_total",
        &[&controller, "result=\"success\""],
    )
}

/// Waits until more than `seen` reconciles succeeded.
async fn wait_for_reconcile(addr: SocketAddr, seen: u64) {
    eventually(format!("a reconcile after {seen}"), async || {
        reconciles(&scrape(addr).await) > seen
    })
    .await;
}

/// Waits until the operator's queue is empty and no reconcile runs.
async fn wait_until_idle(addr: SocketAddr) {
    eventually("an empty queue and no reconcile running", async || {
        let text = scrape(addr).await;
        let depth = sample_sum(&text, "workqueue_depth", &[&format!("name=\"{NAME}\"")]);
        let active = sample_sum(
            &text,
            "controller_active_workers",
            &[&format!("controller=\"{NAME}\"")],
        );
        depth == 0 && active == 0
    })
    .await;
}

async fn scrape(addr: SocketAddr) -> String {
    let (code, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    body
}

fn webapp(server: &TestServer, name: &str) -> Option<WebApp> {
    server.objects().get_as::<WebApp>("default", name).unwrap()
}

fn uid_of<K: kcontrol::indexer::TypedResource + kcontrol::serde::de::DeserializeOwned>(
    server: &TestServer,
    name: &str,
) -> Option<String> {
    let object = server.objects().get_as::<K>("default", name).unwrap()?;
    object.meta().uid.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_drives_a_webapp_through_its_whole_life() {
    let server = TestServer::start().await.unwrap();
    // the test's own client; the operator's has the metrics
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    install_crd::<WebApp>(&client, "test", DEADLINE)
        .await
        .unwrap();
    let operator_client = operator_client(&server);
    let flags = ["--metrics-bind-address", "127.0.0.1:0", "--leader-elect"];
    let manager = args(&flags)
        .manager_on(operator_client, NAME)
        .await
        .unwrap();
    let metrics_at = manager.health_address().unwrap();
    let shutdown = CancellationToken::new();
    let operator = tokio::spawn(example::run(manager, shutdown.clone()));

    // create: owned Deployment and Service, status Ready at generation 1
    let api: Api<WebApp> = Api::namespaced(client.clone(), "default");
    let spec = WebAppSpec {
        image: "nginx:1.27".into(),
        replicas: 2,
        port: 8080,
    };
    api.create(&PostParams::default(), &WebApp::new("web", spec))
        .await
        .unwrap();
    eventually("web ready", async || {
        webapp(&server, "web").is_some_and(|a| example::is_ready(&a))
    })
    .await;
    let app = webapp(&server, "web").unwrap();
    assert_eq!(
        app.meta().finalizers.as_deref(),
        Some(&["demo.kcontrol.dev/cleanup".to_owned()][..])
    );
    let status = app.status.clone().unwrap();
    assert_eq!(
        (status.ready_replicas, status.observed_generation),
        (2, Some(1))
    );
    let deployment: Deployment = server.objects().get_as("default", "web").unwrap().unwrap();
    assert!(is_controlled_by(&deployment, &app));
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(2));
    let service: Service = server.objects().get_as("default", "web").unwrap().unwrap();
    assert!(is_controlled_by(&service, &app));

    // steady state: reconciles of unchanged objects write nothing
    wait_until_idle(metrics_at).await;
    let before = scrape(metrics_at).await;
    let (writes_before, reconciles_before) = (writes(&server).len(), reconciles(&before));
    let rounds = 10;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    for i in 0..rounds {
        // a label on the WebApp, an annotation on its Deployment: events
        // that reconcile it, changing nothing the operator manages
        let label = json!({"metadata": {"labels": {"touched": i.to_string()}}});
        let seen = reconciles(&scrape(metrics_at).await);
        api.patch("web", &PatchParams::default(), &Patch::Merge(&label))
            .await
            .unwrap();
        wait_for_reconcile(metrics_at, seen).await;
        let note = json!({"metadata": {"annotations": {"touched": i.to_string()}}});
        let seen = reconciles(&scrape(metrics_at).await);
        deployments
            .patch("web", &PatchParams::default(), &Patch::Merge(&note))
            .await
            .unwrap();
        wait_for_reconcile(metrics_at, seen).await;
    }
    wait_until_idle(metrics_at).await;
    let after = scrape(metrics_at).await;
    let steady_reconciles = reconciles(&after) - reconciles_before;
    assert!(steady_reconciles >= 2 * rounds, "{steady_reconciles}");
    let written = &writes(&server)[writes_before..];
    assert!(
        written.is_empty(),
        "the operator wrote during {steady_reconciles} reconciles of unchanged objects: {written:#?}"
    );
    eprintln!("steady state: 0 writes over {steady_reconciles} reconciles");

    // edit the spec: the Deployment follows, observedGeneration moves
    let edit = json!({"spec": {"replicas": 3, "image": "nginx:1.28"}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    eventually("the edit applied and ready", async || {
        let app = webapp(&server, "web").unwrap();
        let d: Option<Deployment> = server.objects().get_as("default", "web").unwrap();
        let replicas = d.and_then(|d| d.spec?.replicas);
        example::is_ready(&app) && app.meta().generation == Some(2) && replicas == Some(3)
    })
    .await;
    let status = webapp(&server, "web").unwrap().status.unwrap();
    assert_eq!(
        (status.ready_replicas, status.observed_generation),
        (3, Some(2))
    );

    // delete a child: it is re-created
    let old_uid = uid_of::<Service>(&server, "web").unwrap();
    server
        .objects()
        .delete("services", "default", "web")
        .unwrap();
    eventually("the Service re-created", async || {
        uid_of::<Service>(&server, "web").is_some_and(|uid| uid != old_uid)
    })
    .await;

    // delete the WebApp: the finalizer records its Event, then it goes,
    // and its children with it
    api.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("web gone", async || webapp(&server, "web").is_none()).await;
    let events = server.objects().list("events", Some("default")).unwrap();
    let deleting = events
        .items
        .iter()
        .map(|e| e.value())
        .find(|e| e["reason"] == "Deleting" && e["involvedObject"]["kind"] == "WebApp");
    let deleting = deleting.expect("the finalizer's Event, written before the WebApp went");
    assert_eq!(deleting["source"]["component"], NAME);
    eventually("children garbage collected", async || {
        uid_of::<Deployment>(&server, "web").is_none()
            && uid_of::<Service>(&server, "web").is_none()
    })
    .await;

    // every family, labelled by the controller's name where it is the controller's
    let metrics = scrape(metrics_at).await;
    for family in [
        format!("workqueue_adds_total{{name=\"{NAME}\"}}"),
        format!("workqueue_depth{{name=\"{NAME}\"}}"),
        format!("controller_reconcile_total{{controller=\"{NAME}\",result=\"success\"}}"),
        "rest_client_requests_total{".to_owned(),
        "rest_client_request_duration_seconds_bucket{".to_owned(),
        "reflector_lists_total{".to_owned(),
        "informer_notifications_total{".to_owned(),
        "informer_objects{".to_owned(),
        format!("leader_election_master_status{{name=\"{NAME}\"}} 1"),
    ] {
        assert!(
            metrics.contains(&family),
            "{family} not in /metrics:\n{metrics}"
        );
    }

    shutdown.cancel();
    operator.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_demo_converges() {
    example::embedded(&args(&["--metrics-bind-address", "127.0.0.1:0"]))
        .await
        .unwrap();
}

#[test]
fn the_crd_comes_from_the_type() {
    let crd = WebApp::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("webapps.demo.kcontrol.dev")
    );
    let version = &crd.spec.versions[0];
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns = version.additional_printer_columns.as_ref().unwrap();
    assert_eq!(columns[0].name, "Ready");
    assert_eq!(columns.len(), 1);
    assert_eq!(
        crd.spec.names.short_names.as_deref(),
        Some(&["web".to_owned()][..])
    );
    let schema = kcontrol::serde_json::to_value(&version.schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], json!(["image", "port", "replicas"]));
    assert_eq!(spec["properties"]["replicas"]["maximum"], json!(100.0));
    let yaml = crd_yaml::<WebApp>().unwrap();
    assert!(yaml.contains("kind: CustomResourceDefinition"), "{yaml}");
}
